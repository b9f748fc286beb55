/*
 * cost.c — alpha-beta prices of schedules by replaying them (see cost.h).
 *
 * Every rank's schedule is built, then advanced lane by lane: a lane runs
 * until a step needs a piece that has not been sent yet, and sleeps on that
 * connection until its sender pushes one. Each connection keeps the arrival
 * times of the pieces in flight, in order, so the k-th piece a receiver
 * takes is the k-th one sent — as in the engine. Connections are found by a
 * small open-addressing table on (sender, receiver), so memory follows the
 * pairs a schedule uses, not n^2. Work and memory are linear in the steps of
 * all ranks; the tuner calls this only for calls across hosts and keeps
 * what it decided.
 */
#include "cost.h"

#include <stdlib.h>

#include "checks.h"

typedef struct {
  double *t;  // arrival times of the pieces in flight, a ring buffer
  uint32_t head, len, cap;
  int32_t waiter;  // lane asleep until a piece arrives, or -1
} conn_t;

typedef struct {
  const weft_coll_args_t *a;
  const weft_links_t *links;
  size_t esize;
  int n;
  weft_schedule_t *s;  // [n] every rank's schedule
  uint32_t *lane0;     // [n + 1] first lane id of each rank
  int *lane_rank;      // [lanes]
  uint32_t *cur;       // [lanes] next step of the lane
  double *free_at;     // [lanes] when the lane can start its next step
  uint32_t *work, nwork;
  uint64_t *keys;     // [hcap] sender * n + receiver + 1; 0: empty
  uint32_t *conn_of;  // [hcap]
  uint32_t hcap;
  conn_t *conns;
  uint32_t nconns;
  double *nic;  // [2 * nhosts] bytes each host sends / receives over the network
} replay_t;

static int across(const replay_t *R, int from, int to) {
  const int *h = R->a->host_of;
  return h != NULL && from != to && h[from] != h[to];
}

static const weft_link_t *link_of(const replay_t *R, int from, int to) {
  return across(R, from, to) ? &R->links->inter : &R->links->intra;
}

static conn_t *conn(replay_t *R, int from, int to) {
  uint64_t key = (uint64_t)from * (uint64_t)R->n + (uint64_t)to + 1;
  uint32_t i = (uint32_t)(key * 0x9e3779b97f4a7c15ull >> 32) & (R->hcap - 1);
  while (R->keys[i] != 0 && R->keys[i] != key) i = (i + 1) & (R->hcap - 1);
  if (R->keys[i] == 0) {
    R->keys[i] = key;
    R->conn_of[i] = R->nconns;
    R->conns[R->nconns++] = (conn_t){.waiter = -1};
  }
  return &R->conns[R->conn_of[i]];
}

static int push(conn_t *c, double t) {
  if (c->len == c->cap) {
    uint32_t cap = c->cap ? 2 * c->cap : 8;
    double *nt = malloc(cap * sizeof(*nt));
    if (nt == NULL) return -1;
    for (uint32_t i = 0; i < c->len; i++) nt[i] = c->t[(c->head + i) % c->cap];
    free(c->t);
    c->t = nt, c->head = 0, c->cap = cap;
  }
  c->t[(c->head + c->len++) % c->cap] = t;
  return 0;
}

// Run lane g until it finishes or waits for a piece. Returns -1 out of memory.
static int advance(replay_t *R, uint32_t g) {
  int r = R->lane_rank[g];
  const weft_schedule_t *s = &R->s[r];
  const weft_lane_t *ln = &s->lanes[g - R->lane0[r]];
  for (; R->cur[g] < ln->count; R->cur[g]++) {
    const weft_step_t *st = &s->steps[ln->first + R->cur[g]];
    int token = st->kind == WEFT_STEP_SIGNAL || st->kind == WEFT_STEP_WAIT;
    double start = R->free_at[g], bytes = token ? 0 : (double)st->count * (double)R->esize, busy = 0;
    if (st->recv_peer >= 0) {
      conn_t *c = conn(R, st->recv_peer, r);
      if (c->len == 0) {
        c->waiter = (int32_t)g;
        return 0;
      }
      double arrival = c->t[c->head];
      c->head = (c->head + 1) % c->cap, c->len--;
      if (arrival > start) start = arrival;
      busy = WEFT_COST_OVERHEAD * link_of(R, st->recv_peer, r)->alpha;
    }
    if (st->kind == WEFT_STEP_COPY) busy += bytes / R->links->intra.bandwidth;
    if (weft_step_touches_peer(st)) {
      const weft_link_t *l = link_of(R, r, st->rem_peer);
      busy += l->alpha + bytes / l->bandwidth;
    }
    if (st->send_peer >= 0) {
      const weft_link_t *l = link_of(R, r, st->send_peer);
      conn_t *c = conn(R, r, st->send_peer);
      if (push(c, start + busy + l->alpha + bytes / l->bandwidth)) return -1;
      busy += WEFT_COST_OVERHEAD * l->alpha + bytes / l->bandwidth;
      if (c->waiter >= 0) R->work[R->nwork++] = (uint32_t)c->waiter, c->waiter = -1;
      if (across(R, r, st->send_peer)) {
        R->nic[2 * R->a->host_of[r]] += bytes;
        R->nic[2 * R->a->host_of[st->send_peer] + 1] += bytes;
      }
    }
    R->free_at[g] = start + busy;
  }
  return 0;
}

static void replay_free(replay_t *R) {
  for (int r = 0; R->s && r < R->n; r++) weft_schedule_free(&R->s[r]);
  for (uint32_t i = 0; R->conns && i < R->nconns; i++) free(R->conns[i].t);
  free(R->s);
  free(R->lane0);
  free(R->lane_rank);
  free(R->cur);
  free(R->free_at);
  free(R->work);
  free(R->keys);
  free(R->conn_of);
  free(R->conns);
  free(R->nic);
}

// Build every rank's schedule and the replay's tables.
static ncclResult_t replay_init(replay_t *R, weft_algo_t algo) {
  int n = R->n;
  uint64_t steps = 0, ends = 0;
  for (int r = 0; R->a->host_of && r < n; r++)
    if (R->a->host_of[r] < 0 || R->a->host_of[r] >= R->a->nhosts) return ncclInvalidArgument;
  R->s = calloc((size_t)n, sizeof(*R->s));
  R->lane0 = calloc((size_t)n + 1, sizeof(*R->lane0));
  if (!R->s || !R->lane0) return ncclSystemError;
  for (int r = 0; r < n; r++) {
    weft_coll_args_t b = *R->a;
    b.rank = r;
    WEFTCHECK(weft_schedule_build(&b, algo, &R->s[r]));
    steps += R->s[r].nsteps;
    if (steps > 2 * (uint64_t)WEFT_COST_MAX_STEPS) return ncclInvalidArgument;  // a rank far above rank 0
    R->lane0[r + 1] = R->lane0[r] + R->s[r].nlanes;
    for (uint32_t i = 0; i < R->s[r].nsteps; i++)
      ends += (R->s[r].steps[i].send_peer >= 0) + (R->s[r].steps[i].recv_peer >= 0);
  }
  uint32_t lanes = R->lane0[n];
  R->hcap = 8;
  while (R->hcap < 2 * ends + 2) R->hcap *= 2;
  R->lane_rank = malloc((lanes + 1) * sizeof(*R->lane_rank));
  R->cur = calloc(lanes + 1, sizeof(*R->cur));
  R->free_at = calloc(lanes + 1, sizeof(*R->free_at));
  R->work = malloc((lanes + 1) * sizeof(*R->work));
  R->keys = calloc(R->hcap, sizeof(*R->keys));
  R->conn_of = malloc(R->hcap * sizeof(*R->conn_of));
  R->conns = malloc((ends + 1) * sizeof(*R->conns));
  R->nic = calloc(2 * (size_t)(R->a->host_of ? R->a->nhosts : 1), sizeof(*R->nic));
  if (!R->lane_rank || !R->cur || !R->free_at || !R->work || !R->keys || !R->conn_of || !R->conns || !R->nic)
    return ncclSystemError;
  for (int r = 0; r < n; r++)
    for (uint32_t g = R->lane0[r]; g < R->lane0[r + 1]; g++) R->lane_rank[g] = r;
  return ncclSuccess;
}

// Seconds the call a takes: the replay, or the busiest host's network
// traffic at the link's bandwidth when that takes longer (a host's ranks
// share its network link; the replay gives each pair a link of its own).
static ncclResult_t replay(const weft_coll_args_t *a, weft_algo_t algo, size_t esize, const weft_links_t *links,
                           double *seconds) {
  replay_t R = {.a = a, .links = links, .esize = esize, .n = a->nranks};
  ncclResult_t res = replay_init(&R, algo);
  *seconds = 0;
  if (res == ncclSuccess) {
    uint32_t lanes = R.lane0[R.n];
    for (uint32_t g = 0; g < lanes; g++) R.work[R.nwork++] = g;
    while (R.nwork > 0 && res == ncclSuccess)
      if (advance(&R, R.work[--R.nwork])) res = ncclSystemError;
    for (uint32_t g = 0; g < lanes && res == ncclSuccess; g++) {
      const weft_lane_t *ln = &R.s[R.lane_rank[g]].lanes[g - R.lane0[R.lane_rank[g]]];
      if (R.cur[g] < ln->count) {
        WARN("cost: %s schedules of %s do not complete (rank %d lane %u waits)", weft_algo_name(algo),
             weft_coll_name(a->coll), R.lane_rank[g], g - R.lane0[R.lane_rank[g]]);
        res = ncclInternalError;
      }
      if (R.free_at[g] > *seconds) *seconds = R.free_at[g];
    }
    for (int h = 0; a->host_of && h < 2 * a->nhosts; h++)
      if (R.nic[h] / links->inter.bandwidth > *seconds) *seconds = R.nic[h] / links->inter.bandwidth;
  }
  replay_free(&R);
  return res;
}

ncclResult_t weft_cost_call(const weft_coll_args_t *a, weft_algo_t algo, size_t esize,
                            const weft_links_t *links, double *seconds) {
  // Rank 0's schedule sizes the replay; a call too long to replay whole is
  // priced at a fraction of its count and scaled up (time is linear in the
  // count once a schedule has many pieces).
  weft_schedule_t s0 = {0};
  weft_coll_args_t b = *a;
  b.rank = 0;
  WEFTCHECK(weft_schedule_build(&b, algo, &s0));
  double steps = (double)s0.nsteps * (double)a->nranks, scale = 1;
  weft_schedule_free(&s0);
  if (steps > WEFT_COST_MAX_STEPS) {
    b.count = (size_t)((double)a->count * WEFT_COST_MAX_STEPS / steps);
    if (b.count == 0) b.count = 1;
    scale = (double)a->count / (double)b.count;
  }
  ncclResult_t res = replay(&b, algo, esize, links, seconds);
  *seconds *= scale;
  return res;
}

double weft_cost_transfer(const weft_coll_args_t *a, size_t esize, const weft_links_t *links) {
  double bytes = (double)a->count * (double)esize;
  if (a->peer == a->rank) return bytes / links->intra.bandwidth;  // a copy
  int across = a->host_of != NULL && a->host_of[a->rank] != a->host_of[a->peer];
  const weft_link_t *l = across ? &links->inter : &links->intra;
  return l->alpha + bytes / l->bandwidth;
}
