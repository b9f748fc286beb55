/*
 * tree.c — AllReduce on two pipelined binary trees (a double binary tree).
 *
 * Each tree carries half of the buffer: its pieces are reduced up to the
 * tree's root (each rank adds its operand to what its children sent and
 * passes the partial result to its parent), then broadcast back down. A
 * node interior in one tree is a leaf in the other (from 4 nodes on), so
 * every node forwards about one buffer's worth of data in all, and the
 * depth — the latency — grows as log2 of the number of nodes instead of
 * the ring's n. Results are computed once, at the roots, and copied down:
 * every rank gets the same bits.
 *
 * Nodes are hosts when the call spans several (layout.h), ranks otherwise.
 * Within a host the ranks form a chain hanging off the host's node: the
 * chain's head links to the parent host and to the first child host, its
 * tail to the second child host, so no rank has more than two children.
 * The second tree runs the chain the other way, so the two trees cross
 * hosts through different ranks.
 *
 * The shapes: the first tree is the heap over nodes 0..m-1 (node v's
 * children are 2v+1 and 2v+2), interior exactly on A = {0 .. m/2-1}. The
 * second is a heap over the other nodes B, taken from the top (m-1, m-2,
 * ...), with the A nodes hung as leaves in its free child slots — each on a
 * B node that is not its own child in the first tree, so the trees share no
 * edge. A greedy pass finds such slots for every m >= 4 (m = 6 takes B in
 * increasing order). Trees without a shared connection each get a lane;
 * when they must share one (m <= 3, or hosts with several ranks, whose
 * chains both trees use) both go in one lane, piece by piece in one order
 * on every rank.
 *
 * The broadcast of piece j follows the reduction of piece j + lag, lag
 * being twice the deepest rank's distance from its root (plus one), so
 * reductions and broadcasts stream at once, one up and one down each link.
 *
 * Deadlock freedom with one slice of room per connection: every rank takes
 * the pieces in one global order (reduction j, then broadcast j - lag, the
 * trees alternating within one lane), each piece moves along a tree, and a
 * piece's connections hold nothing of earlier pieces once every rank is
 * past them — so the earliest unfinished piece can always move. The order
 * must be the same on every rank: a root that broadcast a piece before its
 * child expected it would fill the connection its child still needs free.
 */
#include <stdlib.h>

#include "checks.h"
#include "layout.h"
#include "schedule.h"

// A binary tree over m nodes.
typedef struct {
  int *parent;  // [m] -1 at the root
  int *slot;    // [m] which child slot of its parent a node fills (0 or 1)
  int *kid;     // [2m] kid[2v + s]: child in slot s of v, or -1
} btree_t;

// The nodes: hosts (each a chain of ranks), or single ranks on one host.
typedef struct {
  const weft_layout_t *lay;
  int per_rank;  // nodes are ranks
  int m;
} nodes_t;

static int node_first(const nodes_t *g, int v) { return g->per_rank ? v : weft_layout_host_first(g->lay, v); }
static int node_size(const nodes_t *g, int v) { return g->per_rank ? 1 : weft_layout_host_size(g->lay, v); }

// The rank at chain index i of node v in tree t (the second tree, t = 1,
// runs the chain backwards).
static int chain_rank(const nodes_t *g, int v, int t, int i) {
  int k = node_size(g, v);
  return weft_layout_rank_at(g->lay, node_first(g, v) + (t ? k - 1 - i : i));
}

static void link_child(btree_t *T, int parent, int slot, int child) {
  T->parent[child] = parent;
  T->slot[child] = slot;
  T->kid[2 * parent + slot] = child;
}

static void heap_tree(btree_t *T, int m) {
  for (int v = 0; v < 2 * m; v++) T->kid[v] = -1;
  T->parent[0] = -1;
  for (int v = 1; v < m; v++) link_child(T, (v - 1) / 2, (v - 1) % 2, v);
}

// The second tree (see the header), B from the top or (b_down = 0) from
// the bottom. With `avoid`, A nodes skip slots under their own children in
// the first tree; returns 0 if some A node finds no slot then.
static int second_tree(btree_t *T, int m, int b_down, int avoid, unsigned char *used) {
  int p = m / 2, q = m - p;
  for (int v = 0; v < 2 * m; v++) T->kid[v] = -1;
  // B heap: position s holds node b_at(s).
#define B_AT(s) (b_down ? m - 1 - (s) : p + (s))
  T->parent[B_AT(0)] = -1;
  for (int s = 1; s < q; s++) link_child(T, B_AT((s - 1) / 2), (s - 1) % 2, B_AT(s));
  // Free slots are heap positions q .. 2q, under position (j-1)/2.
  for (int j = 0; j <= 2 * q; j++) used[j] = 0;
  int lowest = q;
  for (int a = p - 1; a >= 0; a--) {
    while (used[lowest]) lowest++;
    int j = lowest;
    for (; j <= 2 * q; j++) {
      int b = B_AT((j - 1) / 2);
      if (!used[j] && !(avoid && (b == 2 * a + 1 || b == 2 * a + 2))) break;
    }
    if (j > 2 * q) return 0;
    used[j] = 1;
    link_child(T, B_AT((j - 1) / 2), (j - 1) % 2, a);
  }
#undef B_AT
  return 1;
}

// This rank in tree t: parent and up to two children.
typedef struct {
  int parent, child[2], nchild;
} tnode_t;

static tnode_t rank_node(const nodes_t *g, const btree_t *T, int t, int v, int i) {
  int k = node_size(g, v);
  tnode_t x = {.parent = -1, .child = {-1, -1}, .nchild = 0};
  if (i > 0) {
    x.parent = chain_rank(g, v, t, i - 1);
  } else if (T->parent[v] >= 0) {
    int up = T->parent[v];
    x.parent = chain_rank(g, up, t, T->slot[v] == 0 ? 0 : node_size(g, up) - 1);
  }
  if (i + 1 < k) x.child[x.nchild++] = chain_rank(g, v, t, i + 1);
  if (i == 0 && T->kid[2 * v] >= 0) x.child[x.nchild++] = chain_rank(g, T->kid[2 * v], t, 0);
  if (i == k - 1 && T->kid[2 * v + 1] >= 0) x.child[x.nchild++] = chain_rank(g, T->kid[2 * v + 1], t, 0);
  return x;
}

// Reduce one piece up: children's partial results and this rank's operand,
// to the parent or (at the root) into the result.
static ncclResult_t up_piece(weft_schedule_t *s, const tnode_t *x, uint64_t off, uint64_t len) {
  weft_step_t st = {0};
  st.send_peer = st.recv_peer = -1;
  st.src_off = off;
  st.count = len;
  if (x->nchild == 0) {
    st.kind = WEFT_STEP_SEND;
    st.src_buf = WEFT_BUF_SEND;
    st.flags = WEFT_STEP_REDUCE_INPUT;
    st.send_peer = x->parent;
    return weft_schedule_add(s, &st);
  }
  for (int c = 0; c < x->nchild; c++) {
    int last = c == x->nchild - 1;
    st.recv_peer = x->child[c];
    // The first child's data meets this rank's operand; the next adds to that partial.
    st.src_buf = c == 0 ? WEFT_BUF_SEND : WEFT_BUF_RECV;
    st.flags = c == 0 ? 0 : WEFT_STEP_ACCUMULATE;
    if (last && x->parent >= 0) {
      st.kind = WEFT_STEP_RECV_REDUCE_SEND;
      st.send_peer = x->parent;
      st.dst_buf = WEFT_BUF_NONE;
      st.dst_off = 0;
    } else {
      st.kind = WEFT_STEP_RECV_REDUCE;
      st.dst_buf = WEFT_BUF_RECV;
      st.dst_off = off;
      if (last) st.flags |= WEFT_STEP_FINAL;  // the root completes the piece
    }
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  return ncclSuccess;
}

// Broadcast one piece down: the root sends its result, the others receive
// it into recv and pass it on.
static ncclResult_t down_piece(weft_schedule_t *s, const tnode_t *x, uint64_t off, uint64_t len) {
  weft_step_t st = {0};
  st.send_peer = st.recv_peer = -1;
  st.count = len;
  int c = 0;
  if (x->parent >= 0) {
    st.kind = x->nchild ? WEFT_STEP_RECV_COPY_SEND : WEFT_STEP_RECV;
    st.recv_peer = x->parent;
    st.send_peer = x->nchild ? x->child[c++] : -1;
    st.dst_buf = WEFT_BUF_RECV;
    st.dst_off = off;
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  st = (weft_step_t){0};
  st.kind = WEFT_STEP_SEND;
  st.src_buf = WEFT_BUF_RECV;
  st.src_off = off;
  st.recv_peer = -1;
  st.count = len;
  for (; c < x->nchild; c++) {
    st.send_peer = x->child[c];
    WEFTCHECK(weft_schedule_add(s, &st));
  }
  return ncclSuccess;
}

// Tree t's half of the buffer.
typedef struct {
  uint64_t lo, hi;
} half_t;

static uint64_t piece(const half_t *h, uint64_t k, size_t slice, uint64_t *off) {
  *off = h->lo + k * slice;
  if (*off >= h->hi) return 0;
  return h->hi - *off < slice ? h->hi - *off : slice;
}

// Steps of the trees in `which` (bit t: tree t) in one lane. Step j of the
// order reduces piece j and broadcasts piece j - lag, the trees alternating,
// so a piece's broadcast starts once it can have reached the root and
// come back while later pieces are still on their way up.
static ncclResult_t tree_lane(weft_schedule_t *s, const tnode_t x[2], const half_t half[2], size_t slice,
                              uint64_t lag, unsigned which) {
  WEFTCHECK(weft_schedule_lane_begin(s));
  uint64_t longest = half[0].hi - half[0].lo > half[1].hi - half[1].lo ? half[0].hi - half[0].lo
                                                                       : half[1].hi - half[1].lo;
  uint64_t pieces = (longest + slice - 1) / slice, off, len;
  for (uint64_t j = 0; j < pieces + lag; j++)
    for (int down = 0; down < 2; down++) {
      if (down ? j < lag : j >= pieces) continue;
      uint64_t k = down ? j - lag : j;
      for (int t = 0; t < 2; t++) {
        if (!(which & (1u << t)) || (len = piece(&half[t], k, slice, &off)) == 0) continue;
        WEFTCHECK(down ? down_piece(s, &x[t], off, len) : up_piece(s, &x[t], off, len));
      }
    }
  return ncclSuccess;
}

// Rank-level depth of node v's head in tree T (its chain adds to it).
static int head_depth(const nodes_t *g, const btree_t *T, int v) {
  int d = 0;
  for (; T->parent[v] >= 0; v = T->parent[v]) d += 1 + (T->slot[v] ? node_size(g, T->parent[v]) - 1 : 0);
  return d;
}

// The deepest rank of either tree, in hops from its root.
static int deepest(const nodes_t *g, const btree_t T[2]) {
  int most = 0;
  for (int t = 0; t < 2; t++)
    for (int v = 0; v < g->m; v++) {
      int d = head_depth(g, &T[t], v) + node_size(g, v) - 1;
      if (d > most) most = d;
    }
  return most;
}

// This rank's place in both trees, the broadcast's lag, and whether each
// tree gets a lane of its own.
static ncclResult_t tree_shape(const weft_coll_args_t *a, const weft_layout_t *lay, tnode_t x[2], uint64_t *lag,
                               int *two_lanes) {
  nodes_t g = {.lay = lay, .per_rank = lay->nhosts == 1, .m = lay->nhosts == 1 ? a->nranks : lay->nhosts};
  int m = g.m, single_rank_nodes = 1;
  for (int v = 0; v < m && single_rank_nodes; v++) single_rank_nodes = node_size(&g, v) == 1;
  int *mem = malloc(sizeof(int) * (8 * (size_t)m + 2 * (size_t)m + 2));
  if (mem == NULL) {
    WARN("tree: out of memory for trees over %d nodes", m);
    return ncclSystemError;
  }
  size_t um = (size_t)m;
  btree_t T[2] = {{mem, mem + um, mem + 2 * um}, {mem + 4 * um, mem + 5 * um, mem + 6 * um}};
  unsigned char *used = (unsigned char *)(mem + 8 * um);  // 2m + 2 ints of room for 2q + 1 flags
  heap_tree(&T[0], m);
  // Disjoint trees: B from the top, else (m = 6) from the bottom; failing
  // both, the trees share edges and one lane carries both.
  int disjoint = m >= 4 && (second_tree(&T[1], m, 1, 1, used) || second_tree(&T[1], m, 0, 1, used));
  if (!disjoint) second_tree(&T[1], m, 1, 0, used);
  int v = g.per_rank ? weft_layout_pos(lay, a->rank) : weft_layout_host(lay, a->rank);
  int i = g.per_rank ? 0 : weft_layout_local(lay, a->rank), k = node_size(&g, v);
  x[0] = rank_node(&g, &T[0], 0, v, i);
  x[1] = rank_node(&g, &T[1], 1, v, k - 1 - i);
  // A piece needs about two hops per level to go up and come back down.
  *lag = 2 * (uint64_t)deepest(&g, T) + 1;
  *two_lanes = disjoint && single_rank_nodes;
  free(mem);
  return ncclSuccess;
}

static ncclResult_t tree_build(const weft_coll_args_t *a, const weft_layout_t *lay, weft_schedule_t *s) {
  tnode_t x[2];
  uint64_t lag;
  int two_lanes;
  WEFTCHECK(tree_shape(a, lay, x, &lag, &two_lanes));
  // The halves meet at the 16-element multiple nearest the middle, as ring
  // chunks are 16-element multiples; a count under 16 goes to the first tree alone.
  uint64_t split = (a->count / 2 + 8) / 16 * 16;
  if (split == 0) split = a->count;
  half_t half[2] = {{0, split}, {split, a->count}};
  if (two_lanes) {
    WEFTCHECK(tree_lane(s, x, half, a->slice, lag, 1u));
    return tree_lane(s, x, half, a->slice, lag, 2u);
  }
  return tree_lane(s, x, half, a->slice, lag, 3u);
}

ncclResult_t weft_tree_links(const weft_coll_args_t *a, int up[2], int down[2][2]) {
  for (int t = 0; t < 2; t++) up[t] = down[t][0] = down[t][1] = -1;
  if (a->nranks == 1) return ncclSuccess;
  weft_layout_t lay;
  tnode_t x[2] = {{0}, {0}};
  uint64_t lag;
  int two_lanes;
  ncclResult_t res = weft_layout_init(&lay, a, 1);
  if (res == ncclSuccess) res = tree_shape(a, &lay, x, &lag, &two_lanes);
  weft_layout_free(&lay);
  for (int t = 0; t < 2 && res == ncclSuccess; t++) {
    up[t] = x[t].parent;
    for (int c = 0; c < x[t].nchild; c++) down[t][c] = x[t].child[c];
  }
  return res;
}

ncclResult_t weft_tree_build(const weft_coll_args_t *a, weft_schedule_t *s) {
  if (a->coll != WEFT_COLL_ALLREDUCE) {
    WARN("tree: cannot run %s", weft_coll_name(a->coll));
    return ncclInvalidArgument;
  }
  if (a->nranks == 1) {  // nothing to exchange: the input, transformed, is the result
    weft_step_t st = {.kind = WEFT_STEP_COPY, .src_buf = WEFT_BUF_SEND, .dst_buf = WEFT_BUF_RECV,
                      .flags = WEFT_STEP_REDUCE_INPUT | WEFT_STEP_FINAL, .send_peer = -1, .recv_peer = -1,
                      .count = a->count};
    WEFTCHECK(weft_schedule_lane_begin(s));
    return weft_schedule_add_split(s, &st, a->slice);
  }
  weft_layout_t lay;
  ncclResult_t res = weft_layout_init(&lay, a, 1);
  if (res == ncclSuccess) res = tree_build(a, &lay, s);
  weft_layout_free(&lay);
  return res;
}
