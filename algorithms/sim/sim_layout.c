/*
 * sim_layout.c — the host layouts the simulator's sweeps run schedules on
 * and the NUMA splits inside them (see sim.h), shared by weft-sim and the algorithm tests so both check
 * the same shapes of cluster.
 */
#include "sim.h"

#include "layout.h"

const weft_sim_layout_t weft_sim_layouts[] = {
    {WEFT_SIM_ONE_HOST, 0},    {WEFT_SIM_HOSTS_OF_K, 1}, {WEFT_SIM_HOSTS_OF_K, 2},  {WEFT_SIM_HOSTS_OF_K, 4},
    {WEFT_SIM_HOSTS_OF_K, 8}, {WEFT_SIM_UNEVEN, 0},     {WEFT_SIM_ALTERNATING, 0}};
const int weft_sim_nlayouts = (int)(sizeof(weft_sim_layouts) / sizeof(weft_sim_layouts[0]));

int weft_sim_layout_fill(const weft_sim_layout_t *l, int n, int *host_of) {
  switch (l->kind) {
    case WEFT_SIM_ONE_HOST: return 0;
    case WEFT_SIM_HOSTS_OF_K:
      for (int r = 0; r < n; r++) host_of[r] = r / l->k;
      return (n + l->k - 1) / l->k;
    case WEFT_SIM_UNEVEN: {  // hosts of 3, 1, 2, 3, 1, 2, ... ranks
      static const int sizes[] = {3, 1, 2};
      int h = 0;
      for (int r = 0, left = sizes[0]; r < n; r++) {
        if (left == 0) left = sizes[++h % 3];
        host_of[r] = h;
        left--;
      }
      return h + 1;
    }
    default:  // alternating: even ranks on host 0, odd ones on host 1
      for (int r = 0; r < n; r++) host_of[r] = r % 2;
      return n < 2 ? 1 : 2;
  }
}

int weft_sim_numa_fill(const weft_sim_layout_t *l, const int *host_of, int nhosts, int n, int *numa_of) {
  int node[WEFT_SIM_MAX_RANKS];
  if (n < 1 || n > WEFT_SIM_MAX_RANKS) return 0;
  if (weft_sim_layout_fill(l, n, node) == 0)
    for (int r = 0; r < n; r++) node[r] = 0;
  return weft_layout_numa_groups(host_of, nhosts, node, n, numa_of);
}
