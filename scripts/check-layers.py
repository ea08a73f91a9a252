#!/usr/bin/env python3
"""Checks libk8sbridge's layers (docs/architecture.md, "Layers").

1. Every #include "k8sbridge/..." in libk8sbridge/<layer>/ names the layer itself
   or a layer its meson.build lists in layer_uses. The build already refuses an
   include of a layer that is not a dependency at all; this also refuses one that
   is only reached through another layer.
2. Slurm's headers (<slurm/...>, src/common/...) appear only under
   libk8sbridge/slurm/ (and in the plugin ABI files and programs, outside the library).
3. docs/architecture.md's layer table says what each meson.build says, and its
   contract table lists exactly the names of k8sbridge/contract.h.
4. Inside a layer, no module (a header and the source of the same name) reaches
   itself through the headers it and the others include: the modules of a layer
   stand one above another, with no arrow back up. MODULE_CYCLE_DEBT lists the
   circles still to break; one that is gone must leave the list.
5. With --build DIR: a scratch file in the lowest non-core layer that includes an
   undeclared layer fails to compile with that layer's own flags, and one that
   includes only what it declares compiles: the proof that the build enforces it.

Usage: scripts/check-layers.py [--build DIR]. Exits 1 naming every offence.
"""
import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "libk8sbridge"
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def meson_list(text: str, name: str) -> list:
    match = re.search(name + r"\s*=\s*\[([^\]]*)\]", text)
    if not match:
        sys.exit(f"check-layers: no '{name} = [...]' found")
    return re.findall(r"'([a-z_]+)'", match.group(1))


def layers() -> dict:
    """layer -> the layers it may include (itself included), in build order."""
    order = meson_list((LIB / "meson.build").read_text(), "k8sbridge_layers")
    uses = {}
    for layer in order:
        declared = meson_list((LIB / layer / "meson.build").read_text(), "layer_uses")
        for use in declared:
            if use not in uses:
                sys.exit(f"check-layers: {layer} uses {use}, which is not a lower layer")
        uses[layer] = set(declared) | {layer}
    return uses


def layer_of_include(header: str, known: dict):
    """The layer a k8sbridge header belongs to, or None for a non-k8sbridge one."""
    if not header.startswith("k8sbridge/"):
        return "core" if header == "k8sbridge_version.h" else None
    parts = header.split("/")
    if len(parts) == 2:  # k8sbridge/status.h is core's, k8sbridge/contract.h the contract's
        stem = parts[1].removesuffix(".h")
        return stem if stem in known else "core"
    return parts[1] if parts[1] in known else f"(unknown layer '{parts[1]}')"


def check_includes(uses: dict) -> list:
    problems = []
    for layer, allowed in uses.items():
        for path in sorted((LIB / layer).rglob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            rel = path.relative_to(ROOT)
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                header = match.group(1)
                if header.startswith("slurm/") or header.startswith("src/common"):
                    if layer != "slurm":
                        problems.append(f"{rel}:{number}: includes Slurm's {header}: only "
                                        "libk8sbridge/slurm/ may; go through the Slurm port")
                    continue
                target = layer_of_include(header, uses)
                if target is not None and target not in allowed:
                    problems.append(
                        f"{rel}:{number}: layer '{layer}' includes {header} of layer "
                        f"'{target}', which libk8sbridge/{layer}/meson.build does not list in "
                        "layer_uses: add it there if it is a lower layer, or move the code")
    return problems


# Circles between the modules of a layer still to break: (layer, the modules).
# conf: the key rows (key_table, conf_keys) read into the value types of
# bridge_conf.h (PlacementAffinity, label selectors), and bridge_conf.cpp reads
# k8sbridge.conf through conf_keys' rows; the way out is a header of its own for
# those value types.
MODULE_CYCLE_DEBT = {("conf", frozenset({"bridge_conf", "conf_keys", "key_table"}))}


def module_graph(layer: str) -> dict:
    """module (a file's name without its suffix) -> the modules of the same layer
    whose headers it includes."""
    base = LIB / layer
    files = [p for p in sorted(base.rglob("*")) if p.suffix in (".h", ".cpp")]
    # Modules are the public headers (include/) with their sources; a private header
    # in src/ is the inside of the module or modules that include it.
    header_module = {str(p.relative_to(base / "include")): p.stem
                     for p in files if p.suffix == ".h" and p.is_relative_to(base / "include")}
    graph = {}
    for path in files:
        arrows = graph.setdefault(path.stem, set())
        for line in path.read_text().splitlines():
            match = INCLUDE.match(line)
            if match and header_module.get(match.group(1), path.stem) != path.stem:
                arrows.add(header_module[match.group(1)])
    return graph


def circles(graph: dict) -> list:
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, found = {}, {}, [], []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = set()
            while not group or module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append(frozenset(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def check_module_circles(uses: dict) -> list:
    problems = []
    found = {(layer, group) for layer in uses for group in circles(module_graph(layer))}
    for layer, group in sorted(found - MODULE_CYCLE_DEBT, key=str):
        problems.append(f"libk8sbridge/{layer}: the modules {', '.join(sorted(group))} include "
                        "one another in a circle: move what the lower one needs into a header "
                        "of its own")
    for layer, group in sorted(MODULE_CYCLE_DEBT - found, key=str):
        problems.append(f"libk8sbridge/{layer}: {', '.join(sorted(group))} no longer form a "
                        "circle: take them off MODULE_CYCLE_DEBT")
    return problems


def table_rows(doc: str, heading: str) -> list:
    """The cells of the first table under `heading` in docs/architecture.md."""
    section = doc.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the header row


def check_docs(uses: dict) -> list:
    problems = []
    doc_path = ROOT / "docs" / "architecture.md"
    doc = doc_path.read_text()
    documented = {}
    for cells in table_rows(doc, "## Layers"):
        named = set(re.findall(r"[a-z_]+", cells[2].replace("(nothing)", "")))
        documented[cells[0]] = named
    for layer, allowed in uses.items():
        declared = allowed - {layer}
        if documented.get(layer) != declared:
            problems.append(f"docs/architecture.md's layer table says {layer} may include "
                            f"{sorted(documented.get(layer, []))}, its meson.build says "
                            f"{sorted(declared)}: make the table match")
    for layer in documented.keys() - uses.keys():
        problems.append(f"docs/architecture.md's layer table lists '{layer}', which is no layer")
    header = (LIB / "contract" / "include" / "k8sbridge" / "contract.h").read_text()
    in_header = set(re.findall(r'std::string_view (k\w+) =\s*"([^"]*)";', header))
    in_doc = {(cells[1].strip("`"), cells[0].strip("`"))
              for cells in table_rows(doc, "## The contract")}
    for const, value in sorted(in_header - in_doc):
        problems.append(f"contract.h's {const} ('{value}') is missing from docs/architecture.md's "
                        "contract table")
    for const, value in sorted(in_doc - in_header):
        problems.append(f"docs/architecture.md's contract table lists {const} ('{value}'), "
                        "which contract.h does not define")
    return problems


def compile_command(build: Path, layer: str) -> list:
    entries = json.loads((build / "compile_commands.json").read_text())
    for entry in entries:
        source = Path(entry["directory"], entry["file"]).resolve()
        if (LIB / layer / "src") in source.parents and "k8sbridge_" + layer in entry["command"]:
            return entry["directory"], shlex.split(entry["command"])
    sys.exit(f"check-layers: no compile command for a source of layer {layer} in {build}")


def compiles(build: Path, layer: str, header: str) -> tuple:
    directory, argv = compile_command(build, layer)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "scratch.cpp"
        scratch.write_text(f'#include "{header}"\n')
        # The layer's own compiler flags, on the scratch file, syntax only.
        out = []
        skip = False
        for arg in argv:
            if skip:
                skip = False
                continue
            if arg in ("-o", "-MF", "-MQ", "-c"):
                skip = arg != "-c"
                continue
            if arg.endswith(".cpp"):
                continue
            out.append(arg)
        run = subprocess.run(out + ["-fsyntax-only", str(scratch)], cwd=directory,
                             capture_output=True, text=True)
        return run.returncode == 0, run.stderr


def check_build(build: Path, uses: dict) -> list:
    problems = []
    layer = "topology"
    undeclared = "k8sbridge/kube/client.h"
    ok, err = compiles(build, layer, undeclared)
    if ok:
        problems.append(f"a scratch file in layer '{layer}' that includes {undeclared} compiled: "
                        "the build does not enforce layer_uses")
    else:
        err = re.sub(r"\x1b\[[0-9;]*[mK]", "", err)
        first = next((l for l in err.splitlines() if "error" in l), err.strip())
        print(f"check-layers: as expected, '{layer}' cannot include {undeclared}: {first}")
    ok, err = compiles(build, layer, "k8sbridge/status.h")
    if not ok:
        problems.append(f"the control scratch file (k8sbridge/status.h) in '{layer}' does not "
                        f"compile, so the probe proves nothing:\n{err}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, help="a configured meson build directory")
    args = parser.parse_args()
    uses = layers()
    problems = check_includes(uses) + check_module_circles(uses) + check_docs(uses)
    if args.build:
        problems += check_build(args.build.resolve(), uses)
    for problem in problems:
        print(f"check-layers: {problem}")
    if problems:
        return 1
    print(f"check-layers: {len(uses)} layers, every include declared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
