/*
 * topo_nvswitch.c — NVSwitch groups that a description leaves apart.
 *
 * NVML reports the NVLinks of GPUs only, so neither hwloc's NVLinkBandwidth
 * matrix nor NCCL's XML says how NVSwitches are joined to each other: on a
 * DGX-2 / HGX-2 the two baseboards (8 GPUs and 6 NVSwitches each) are
 * joined switch to switch, and a description from NVML shows two groups
 * that share nothing. NCCL counts every NVSwitch as one switch, so every GPU
 * with an NVLink to a switch reaches every other one over NVLink. weft keeps
 * the switches apart (a path between two GPUs is worth what all the switches
 * between them carry), and when the description has no switch-to-switch
 * link at all it joins the groups as NCCL's model does: the k-th switch of
 * each further group (in bus id order) to the (k mod n)-th of the first
 * group's n switches, with as many links as the busier of the two has to
 * its GPUs, so the join never limits a path (a non-blocking fabric, which
 * is how the DGX-2 is cabled). A description that names any
 * switch-to-switch link is taken as it is.
 */
#include "debug.h"
#include "topo.h"

#include <stdlib.h>
#include <string.h>

static int root(int *up, int i) {
  while (up[i] != i) i = up[i] = up[up[i]];
  return i;
}

// GPUs and NVSwitches: what NVLink groups are made of.
static int fabric_node(const weft_topo_t *t, int i) {
  return t->nodes[i].kind == WEFT_TOPO_GPU || t->nodes[i].kind == WEFT_TOPO_NVS;
}

typedef struct {
  int node;   // the switch
  int first;  // its group's switch with the smallest bus id
  int links;  // NVLinks to GPUs
  double bw;  // their GB/s
} sw_t;

// Groups in order of their first switch's bus id, switches by bus id within.
static int before(const weft_topo_t *t, const sw_t *a, const sw_t *b) {
  int c = strcmp(t->nodes[a->first].busid, t->nodes[b->first].busid);
  return (c ? c : strcmp(t->nodes[a->node].busid, t->nodes[b->node].busid)) < 0;
}

int weft_topo_join_nvswitch_groups(weft_topo_t *t) {
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *k = &t->links[l];
    if (k->kind == WEFT_LINK_NVL && t->nodes[k->a].kind == WEFT_TOPO_NVS && t->nodes[k->b].kind == WEFT_TOPO_NVS)
      return 0; // the description says how its switches are joined
  }
  int n = t->nnodes, nsw = 0, added = 0;
  int *up = malloc(sizeof(int) * (size_t)(n + 1));
  sw_t *sw = calloc((size_t)n + 1, sizeof(sw_t));
  if (!up || !sw) {
    free(up);
    free(sw);
    return -1;
  }
  for (int i = 0; i < n; i++) up[i] = i;
  for (int i = 0; i < n; i++)
    if (t->nodes[i].kind == WEFT_TOPO_NVS) sw[nsw++] = (sw_t){i, i, 0, 0};
  for (int l = 0; l < t->nlinks; l++) {
    const weft_topo_link_t *k = &t->links[l];
    if (k->kind != WEFT_LINK_NVL || !fabric_node(t, k->a) || !fabric_node(t, k->b)) continue;
    up[root(up, k->a)] = root(up, k->b);
    for (int s = 0; s < nsw; s++)
      if ((sw[s].node == k->a && t->nodes[k->b].kind == WEFT_TOPO_GPU) ||
          (sw[s].node == k->b && t->nodes[k->a].kind == WEFT_TOPO_GPU))
        sw[s].links += k->count, sw[s].bw += k->bw;
  }
  int m = 0; // switches no GPU names (a PCI device only) stay out of it
  for (int s = 0; s < nsw; s++)
    if (sw[s].links > 0) sw[m++] = sw[s];
  nsw = m;
  for (int s = 0; s < nsw; s++)
    for (int r = 0; r < nsw; r++)
      if (root(up, sw[r].node) == root(up, sw[s].node) &&
          strcmp(t->nodes[sw[r].node].busid, t->nodes[sw[s].first].busid) < 0)
        sw[s].first = sw[r].node;
  for (int s = 1; s < nsw; s++) // insertion sort: a few dozen switches at most
    for (int r = s; r > 0 && before(t, &sw[r], &sw[r - 1]); r--) {
      sw_t x = sw[r];
      sw[r] = sw[r - 1];
      sw[r - 1] = x;
    }
  int ngroups = 0, first_len = 0;
  for (int s = 0; s < nsw; s++) {
    if (s == 0 || sw[s].first != sw[s - 1].first) ngroups++;
    if (ngroups == 1) first_len++;
  }
  if (ngroups > 1) {
    for (int s = first_len, k = 0; s < nsw; s++, k++) {
      if (sw[s].first != sw[s - 1].first) k = 0;
      const sw_t *a = &sw[k % first_len], *b = &sw[s];
      int count = a->links > b->links ? a->links : b->links;
      double bw = a->bw > b->bw ? a->bw : b->bw;
      if (weft_topo_add_link(t, a->node, b->node, WEFT_LINK_NVL, bw, count) < 0) {
        added = -1;
        break;
      }
      added++;
    }
    if (added > 0)
      INFO(WEFT_LOG_GRAPH,
           "%s: %d groups of NVSwitches with no link between them described; joined as one NVLink fabric, as "
           "NCCL counts all NVSwitches as one (%d switch-to-switch links, each as wide as its switch's GPU side)",
           t->source, ngroups, added);
  }
  free(up);
  free(sw);
  return added;
}
