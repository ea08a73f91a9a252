"""The chaos suite's CI variant (tests/chaos/chaos.py): a fixed seed, every fault kind
once while 24 jobs arrive over 200 s, and every invariant must hold with a count of
zero. The long variant is bench/chaos.py."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chaos  # noqa: E402
from harness.paths import SYNC  # noqa: E402
from harness.testcase import RigTestCase, main  # noqa: E402


class Chaos(RigTestCase):
    def test_nothing_is_lost_under_every_fault_kind(self):
        if not SYNC.exists():
            self.skipTest(f"{SYNC} is not built")
        seed = int(os.environ.get("K8SBRIDGE_CHAOS_SEED", "1"))
        report = chaos.run(chaos.Plan(seed=seed, jobs=24, window=200.0))
        detail = f"{chaos.format_report(report)}\n{report['world']}"
        self.assertGreaterEqual(report["jobs"], 24)  # and the faults' own jobs
        self.assertEqual(report["skipped"], [], detail)
        self.assertEqual({kind: k["count"] for kind, k in report["faults"].items()},
                         {kind: 1 for kind in chaos.FAULTS}, detail)
        self.assertEqual(report["violations"], {name: 0 for name in chaos.INVARIANTS}, detail)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
