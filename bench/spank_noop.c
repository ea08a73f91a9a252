/* A SPANK plugin that does nothing: bench/jail_bench.py loads it to measure
 * what any SPANK plugin costs a step (srun and slurmstepd read plugstack.conf,
 * load the plugin and call it), apart from what spank_jail itself does. */
#include <slurm/spank.h>

SPANK_PLUGIN(spank_noop, 1);

int slurm_spank_init(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  return 0;
}
