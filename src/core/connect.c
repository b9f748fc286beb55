/*
 * connect.c — how a communicator gets its connections: the control segment
 * first (segment.h), then the transport registry.
 *
 * Every peer, this rank included, goes to the first transport of the
 * registry whose can_connect accepts it (shared memory for the ranks of
 * this host unless NCCL_SHM_DISABLE=1, the network for everyone else).
 * Each transport is then set up on every rank, in registry order, with the
 * peers it serves: set-up is collective, so a transport that serves no
 * peer here still takes part. A transport sees only the view
 * (transports/transport.h) filled here, never the communicator. A test
 * may put its own transports in the registry's place
 * (weft_comm_use_transports) to run the core over a stand-in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "checks.h"
#include "segment.h"
#include "comm.h"
#include "env.h"
#include "net_choice.h"

static const weft_transport_t *const builtin[] = {&weft_shm_transport, &weft_net_transport};
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))
_Static_assert(NBUILTIN <= WEFT_MAX_TRANSPORTS, "WEFT_MAX_TRANSPORTS bounds the registry");

// The registry new communicators connect with: the built-in one, or a
// test's (weft_comm_use_transports).
static const weft_transport_t *const *registry = builtin;
static size_t nregistry = NBUILTIN;

ncclResult_t weft_comm_use_transports(const weft_transport_t *const *list, size_t n) {
  if (list != NULL && (n < 1 || n > WEFT_MAX_TRANSPORTS)) {
    WARN("weft_comm_use_transports: %zu transports (1 to %d)", n, WEFT_MAX_TRANSPORTS);
    return ncclInvalidArgument;
  }
  nregistry = list != NULL ? n : NBUILTIN;
  registry = list != NULL ? list : builtin;
  return ncclSuccess;
}

/* ---------- the view's callbacks ---------- */

static struct ncclComm *comm_of(const weft_transport_view_t *v) { return v->core; }

static ncclResult_t view_allgather(const weft_transport_view_t *v, void *data, size_t size) {
  return weft_bootstrap_allgather(&comm_of(v)->bs, data, size);
}

static weft_doorbell_t *view_doorbell(const weft_transport_view_t *v, int rank) {
  return weft_segment_doorbell(comm_of(v)->seg, rank);
}

static int view_failed(const weft_transport_view_t *v) {
  struct ncclComm *comm = comm_of(v);
  return weft_segment_abort_code(comm->seg) != ncclSuccess || atomic_load(&comm->aborted);
}

static void view_failure(const weft_transport_view_t *v, char *buf, size_t len) {
  struct ncclComm *comm = comm_of(v);
  const weft_segment_header_t *h = weft_segment_abort_header(comm->seg);
  snprintf(buf, len, "%s", h != NULL && weft_segment_abort_code(comm->seg) != ncclSuccess ? h->abort_reason : "");
}

// How long a rank that lost a connection looks for a death on its own host
// before it blames the peer: the failure may have started here, and the
// reset from afar outrun the news of it (kill -9 of the rank beside it).
#define LOCAL_DEATH_GRACE_MS 30

// A transport failed the communicator. A lost connection (ncclRemoteError)
// is blamed on a rank of this host that has died, when there is one: the
// host's own liveness is trusted before a reset that came from afar.
static void view_fail(const weft_transport_view_t *v, ncclResult_t code, const char *reason) {
  struct ncclComm *comm = comm_of(v);
  char origin[400];
  for (int waited = 0; code == ncclRemoteError && comm->seg != NULL && !view_failed(v); waited += 5) {
    int pid = 0, dead = weft_segment_find_dead_now(comm->seg, &pid);
    if (dead >= 0) {
      snprintf(origin, sizeof(origin), "rank %d (pid %d, host %d) died, seen by its host; then: %s", dead, pid,
               comm->host_of[dead], reason);
      WARN("%s", origin);
      reason = origin;
      break;
    }
    if (waited >= LOCAL_DEATH_GRACE_MS) break;
    struct timespec nap = {0, 5 * 1000000};
    nanosleep(&nap, NULL);
  }
  weft_comm_fail(comm, code, reason);
}

void weft_comm_fail(struct ncclComm *comm, ncclResult_t code, const char *reason) {
  if (comm->seg != NULL) weft_segment_abort(comm->seg, code, reason);
}

/* ---------- set-up and teardown ---------- */

// The FIFO geometry every connection uses (WEFT_SLOT_BYTES, WEFT_SLOTS).
static ncclResult_t read_geometry(weft_transport_view_t *v) {
  int64_t slot = weft_env_WEFT_SLOT_BYTES(), nslots = weft_env_WEFT_SLOTS();
  if (slot < 4096 || slot % 64 != 0 || slot > (1 << 26)) {
    WARN("WEFT_SLOT_BYTES=%lld must be a multiple of 64 between 4096 and 64 MiB", (long long)slot);
    return ncclInvalidArgument;
  }
  if (nslots < 2 || nslots > WEFT_TRANSPORT_MAX_SLOTS) {
    WARN("WEFT_SLOTS=%lld must be between 2 and %d", (long long)nslots, WEFT_TRANSPORT_MAX_SLOTS);
    return ncclInvalidArgument;
  }
  v->slot_bytes = (size_t)slot;
  v->nslots = (size_t)nslots;
  return ncclSuccess;
}

static void fill_view(struct ncclComm *comm) {
  weft_transport_view_t *v = &comm->tv;
  v->rank = comm->rank;
  v->nranks = comm->nranks;
  v->host_of = comm->host_of;
  v->id_hash = comm->id_hash;
  v->allgather = view_allgather;
  v->secret = comm->bs.secret;
  v->secret_bytes = sizeof(comm->bs.secret);
  v->doorbell = view_doorbell;
  v->fail = view_fail;
  v->failed = view_failed;
  v->failure = view_failure;
  v->net_backend = weft_net_backend;
  v->net_device = weft_comm_net_device;  // net_choice.c: the topology's choice
  v->core = comm;
}

ncclResult_t weft_comm_connect(struct ncclComm *comm) {
  weft_transport_view_t *v = &comm->tv;
  int n = comm->nranks;
  const weft_transport_t *const *tps = comm->tps = registry;
  size_t ntps = comm->ntps = nregistry;
  fill_view(comm);
  WEFTCHECK(read_geometry(v));
  WEFTCHECK(weft_segment_open(&comm->bs, comm->host_of, v->slot_bytes, v->nslots, &comm->seg));
  v->conns = calloc((size_t)WEFT_NUM_CLASSES * 2 * (size_t)n, sizeof(*v->conns));
  uint8_t *route = malloc((size_t)n), *serve = malloc((size_t)n);
  ncclResult_t res = ncclSuccess;
  if (v->conns == NULL || route == NULL || serve == NULL) {
    res = ncclSystemError;
    goto out;
  }
  for (int p = 0; p < n; p++) {
    route[p] = (uint8_t)ntps;
    for (size_t t = 0; t < ntps && route[p] == ntps; t++)
      if (tps[t]->can_connect(v, p)) route[p] = (uint8_t)t;
    if (route[p] == ntps) {
      WARN("rank %d: no transport can reach rank %d", comm->rank, p);
      res = ncclInternalError;
      goto out;
    }
  }
  for (size_t t = 0; t < ntps; t++) {
    for (int p = 0; p < n; p++) serve[p] = route[p] == t;
    WEFTCHECKGOTO(tps[t]->setup(v, serve, &comm->tp_state[t]), res, out);
  }
  // Set-up is collective: every rank has passed weft_segment_open by now.
  weft_segment_unlink(comm->seg);
  for (int p = 0; p < n; p++)
    for (int cls = 0; cls < WEFT_NUM_CLASSES; cls++)
      for (int is_send = 0; is_send < 2; is_send++)
        if (weft_view_conn(v, cls, is_send, p)->tp == NULL) {
          WARN("rank %d: transport %s set up no connection to rank %d", comm->rank, tps[route[p]]->name, p);
          res = ncclInternalError;
          goto out;
        }
out:
  free(route);
  free(serve);
  return res;
}

void weft_comm_disconnect(struct ncclComm *comm) {
  // The network first: its proxy may still ring doorbells in the segment.
  for (size_t t = comm->ntps; t-- > 0;) {
    if (comm->tv.core != NULL) comm->tps[t]->teardown(&comm->tv, comm->tp_state[t]);
    comm->tp_state[t] = NULL;
  }
  free(comm->tv.conns);
  comm->tv.conns = NULL;
  weft_segment_close(comm->seg);
  comm->seg = NULL;
}
