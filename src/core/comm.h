/*
 * comm.h — the communicator: who the ranks are, how they are connected, and
 * the per-communicator state of operations in flight.
 */
#ifndef WEFT_COMM_H
#define WEFT_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bootstrap.h"
#include "call_cache.h"
#include "nccl.h"
#include "transport.h"

#define WEFT_COMM_MAGIC 0x7765667463306d6dull
#define WEFT_MAX_PREMUL_OPS 64
#define WEFT_MAX_TRANSPORTS 4  // the registry's length bound (connect.c)
#define WEFT_LATER_MAX 32      // descriptor checks a communicator may owe (mismatch.c)

struct weft_segment;

typedef struct {
  int in_use;
  ncclDataType_t dtype;
  int64_t scale_i;
  double scale_f;
  const void *dev_scalar;  // ncclScalarDevice on device memory: read in stream order at each call
} weft_premul_t;

// The value of one element of `dt` at host address p, into pm's scale_i or scale_f.
void weft_premul_read_scalar(const void *p, ncclDataType_t dt, weft_premul_t *pm);

typedef struct weft_registration {
  void *buff;
  size_t size;
  struct weft_registration *next;
} weft_registration_t;

struct ncclComm {
  uint64_t magic;
  int rank, nranks;
  int cuda_dev;
  void *cuda_ctx;          // the caller's current CUDA context at creation (weft_CUcontext), or NULL
  struct weft_cuda_ipc *cuda_ipc;  // the IPC path's state (src/cuda/cuda_ipc.c), or NULL
  int blocking;            // config.blocking (1 unless the config says 0)
  char name[64];           // config.commName, for logs
  int num_rma_ctx;         // config.numRmaCtx (default 1); 0: one-sided calls are refused
  int max_p2p_peers;       // config.maxP2pPeers; 0: unset (every peer)
  int graph_usage_mode;    // config.graphUsageMode (default 2); kept, weft refuses graph capture
  int graph_stream_ordering;  // config.graphStreamOrdering (default 1); kept, as above
  uint64_t id_hash;        // identifies the communicator in logs

  weft_bootstrap_t bs;
  struct weft_segment *seg;  // the host control block: doorbells, abort word, descriptors, status (segment.h)
  weft_transport_view_t tv;  // what the transports see: connections, geometry, can_read (connect.c)
  const weft_transport_t *const *tps;  // the registry it was connected with, ntps long (connect.c)
  size_t ntps;
  void *tp_state[WEFT_MAX_TRANSPORTS];  // each of those transports' set-up state
  int *host_of;            // [nranks]: host index of each rank (hosts numbered by their first rank)
  int nhosts;
  int *order, *pos;        // [nranks] each: the ring order chosen from the topology (the rank at each
                           // position; each host's ranks side by side) and its inverse, or NULL: host
                           // order (comm_order.c). Handed to the schedules in weft_coll_args_t.
  int *numa_of;            // [nranks]: NUMA group of each rank ((host, NUMA node) pairs numbered host by
  int nnuma;               // host, weft_layout_numa_groups), or NULL where some rank's node is unknown or no
                           // host spans two (comm_order.c). Handed to the schedules in weft_coll_args_t.
  void *init_affinity;      // the initialising thread's own CPU set (cpu_set_t) while init runs it near
                           // the GPU, or NULL (comm_order.c)
  int local_rank, local_size;  // this rank among the ranks of its host
  int64_t spin_ns;         // how long a waiting call polls before it sleeps (weft_spin_ns of local_size)
  int64_t spin_ns_queued;  // the same for calls a stream's worker runs: the thread that queued them
                           // wants a core too, so twice as many threads share the host's CPUs

  pthread_mutex_t lock;    // seq and ticket issue, premul table, registrations
  uint64_t coll_seq;       // sequence number of the next collective launched

  _Atomic int async_error; // ncclInProgress during non-blocking init, then the sticky error
  _Atomic int aborted;     // ncclCommAbort called: every operation fails fast
  _Atomic int revoked;     // ncclCommRevoke called: new operations refused; destroy, split, shrink allowed
  _Atomic int inflight;    // operations launched and not finished (finalize waits on it)
  int finalized;
  uint32_t shrink_count;   // ncclCommShrink calls on this communicator (mixed into the children's id_hash)
  _Atomic int suspended;   // ncclCommSuspend: 0, or 1 | the flags (<< 1) until ncclCommResume
  struct ncclWindow_vidmem *windows;  // registered windows (window.h), under `lock`
  _Atomic int nwindows_mapped;  // windows every rank maps (window_map.c)
  _Atomic int nsymmetric;  // of those, the ones registered NCCL_WIN_COLL_SYMMETRIC
  uint64_t *signals_taken; // [nranks]: signals from each rank consumed by ncclWaitSignal, under `lock`
  int grow_id_pending;     // ncclCommGetUniqueId gave grow_id, which no ncclCommGrow has consumed yet
  ncclUniqueId grow_id;

  pthread_t init_thread;   // non-blocking initialisation
  int init_thread_live;

  weft_call_cache_t calls; // the decision cache: the tuner's answers by call shape (call_cache.h)
  struct weft_small_kept *small;  // small calls' compiled schedules by shape (small.c), from the first one
  // Collectives whose descriptor check against a peer they only sent to
  // was left for later (mismatch.h): under `lock`; count readable without it.
  struct { uint64_t seq; int peer; } later[WEFT_LATER_MAX];
  _Atomic unsigned nlater;
  _Atomic unsigned later_age;  // calls since the owed checks were last settled
  void *tuner;             // NCCL_TUNER_PLUGIN's per-communicator state, or NULL (plugins/hooks.h)
  void *prof;              // NCCL_PROFILER_PLUGIN's, or NULL

  // Tickets on point-to-point receive connections that any-source receives
  // gave up (anysrc.c): skipped when their turn comes. Under `lock`; n readable without it.
  struct { int peer; uint64_t ticket; } *voids;
  int voids_cap;
  _Atomic int nvoids;
  _Atomic int any_next;    // where the next any-source receive starts looking (round robin)

  weft_premul_t premul[WEFT_MAX_PREMUL_OPS];
  weft_registration_t *registrations;
  struct weft_cuda_bridge **cuda_bridges;  // CUDA stream bridges this communicator used (src/cuda/cuda_stream.c)
  int ncuda_bridges;
};

static inline weft_conn_t *weft_comm_conn(struct ncclComm *c, int cls, int is_send, int peer) {
  return weft_view_conn(&c->tv, cls, is_send, peer);
}

// Fill host_of, nhosts, local_rank and local_size from the bootstrap's peer table.
ncclResult_t weft_comm_map_hosts(struct ncclComm *comm);

// The ring order from the machine's topology (comm_order.c): the ranks of
// each host exchange where they sit (GPU, or the NUMA node they are bound
// to), each host orders its ranks by the topology's ring search, and every
// rank learns every host's order. Also places this rank's threads near its
// GPU (NCCL_IGNORE_CPU_AFFINITY). Collective over the bootstrap; logs the
// ring and trees as NCCL does. Host order (order NULL) where the machine
// gives nothing to go on.
ncclResult_t weft_comm_order_ranks(struct ncclComm *comm);
// Threads near a GPU or NIC (comm_affinity.c): until init ends, the calling
// thread runs on the CPUs of graph node `node`'s NUMA node (within the
// process's binding unless NCCL_IGNORE_CPU_AFFINITY), so the threads init
// starts inherit them; `what` names the node for the log. Once per init.
struct weft_topo;
void weft_comm_threads_near(struct ncclComm *comm, const struct weft_topo *topo, int node, const char *what);
// The end of init, success or not: the initialising thread's own affinity back.
void weft_comm_restore_affinity(struct ncclComm *comm);

// Live-communicator registry: public entry points reject pointers that are
// not live communicators (NULL, destroyed, or garbage) without touching them.
ncclResult_t weft_comm_check(ncclComm_t comm, const char *api);
// weft_comm_check for the calls that move data: also refused while the
// communicator is suspended (ncclCommSuspend).
ncclResult_t weft_comm_check_calls(ncclComm_t comm, const char *api);
void weft_registry_add(ncclComm_t comm);
void weft_registry_remove(ncclComm_t comm);
int weft_registry_contains(ncclComm_t comm);

// Validate a config (NULL is allowed: every field takes its default) and
// apply it to comm's config fields (blocking, name, num_rma_ctx, ...). The
// caller's struct is read by its size and version, so a 2.28 caller's
// smaller struct is never read past (src/boot/config.c).
ncclResult_t weft_comm_read_config(const ncclConfig_t *config, const char *api, struct ncclComm *comm);
// The defaults of those fields; a copy of a parent's (a NULL config
// inherits it); those fields as a config struct (for a call that takes one).
void weft_comm_config_defaults(struct ncclComm *comm);
void weft_comm_config_inherit(struct ncclComm *dst, const struct ncclComm *parent);
void weft_comm_config_to_struct(const struct ncclComm *comm, ncclConfig_t *out);

// Non-blocking initialisation may still be running: wait for it to settle
// and return its result (or the communicator's later sticky error).
ncclResult_t weft_comm_wait_init(ncclComm_t comm);

// For the calls that make a communicator from a parent (split, shrink): the
// pointer is live, initialisation succeeded and it was not finalized. A
// revoked parent passes once its operations have stopped; one whose
// operations failed (ncclCommGetAsyncError) passes only with allow_failed.
ncclResult_t weft_comm_check_parent(ncclComm_t comm, const char *api, int allow_failed);
// Wait (bounded, limit_ms < 0: no bound) until no operation of comm runs; 1 if none does.
int weft_comm_drain(ncclComm_t comm, int64_t limit_ms);

// A communicator built from a parent (split, shrink): rank of nranks, with
// members[] (ranks 0..nranks-1, each with its new bootstrap listen address)
// and this rank's listener listen_fd (taken over). settings gives the
// config fields (weft_comm_config_inherit). Connects the bootstrap ring and the transports, registers it.
ncclResult_t weft_comm_create_child(const struct ncclComm *parent, const struct ncclComm *settings, int rank,
                                    int nranks, const weft_peer_info_t *members, int *listen_fd, uint64_t id_hash,
                                    struct ncclComm **out);

// Tuner and profiler plugins: set up once the communicator is connected and
// has its id_hash (never fails: a plugin that does not load is not used);
// torn down by weft_comm_free.
void weft_comm_plugins_init(struct ncclComm *comm);

// connect.c: open the control segment and set up every registered
// transport once the bootstrap is up (collective); weft_comm_disconnect
// undoes it, safe on a partly connected communicator.
ncclResult_t weft_comm_connect(struct ncclComm *comm);
void weft_comm_disconnect(struct ncclComm *comm);
// Tests only: communicators connected after this call use the transports
// list[0..n) (n <= WEFT_MAX_TRANSPORTS), in that order, instead of the
// built-in registry; list NULL restores it. Call while no communicator is
// being created (tests/unit/test_engine_fake.c).
ncclResult_t weft_comm_use_transports(const weft_transport_t *const *list, size_t n);
// Fail the communicator for every rank (first reason wins): through the
// abort word on this host, and the network transport carries it on.
void weft_comm_fail(struct ncclComm *comm, ncclResult_t code, const char *reason);
// Free everything; safe on a partly built communicator.
void weft_comm_free(struct ncclComm *comm);

// Record a failure so ncclCommGetAsyncError reports it (first one sticks).
void weft_comm_set_error(struct ncclComm *comm, ncclResult_t res);

#endif
