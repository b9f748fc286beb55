/*
 * ras_internal.h — what the RAS room's files share: the members of a
 * communicator, the record one rank's state travels in between RAS
 * threads, the job's view gathered for one answer, and the clients.
 */
#ifndef WEFT_RAS_INTERNAL_H
#define WEFT_RAS_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdint.h>

#include "rendezvous.h"
#include "segment.h"
#include "socket.h"

#define WEFT_RAS_PROTOCOL 2              // NCCL's client protocol version
#define WEFT_RAS_DEFAULT_TIMEOUT_S 5     // NCCL's default for a query's leg
#define WEFT_RAS_WIRE_MAGIC 0x77726173u  // "wras": a query between RAS threads
#define WEFT_RAS_WIRE_VERSION 1
#define WEFT_RAS_HOST_LEN 48

// One process of the job, as a communicator's allgather told it.
typedef struct {
  weft_sockaddr_t ras;  // its RAS thread's peer listener; port 0: RAS is off there
  int32_t pid;
  char host[WEFT_RAS_HOST_LEN];  // its bootstrap interface's address (NCCL names hosts by address)
} weft_ras_peer_t;

// A record comes from the rank's own process, from a process beside it
// (its control segment), or names only who the rank is (the first rank of
// each host sends these for the ranks of the other hosts, so that a rank
// nobody can answer for is still named).
enum { WEFT_RAS_OWN = 0, WEFT_RAS_SEEN = 1, WEFT_RAS_MEMBER = 2 };
enum { WEFT_RAS_PROC_RUNNING = 0, WEFT_RAS_PROC_STOPPED, WEFT_RAS_PROC_DEAD, WEFT_RAS_PROC_UNKNOWN };

// One rank of one communicator: the wire format between RAS threads (the
// same build on both ends, so the layout is shared) and the report's input.
typedef struct {
  uint64_t comm_hash;
  int32_t nranks, rank, pid;
  uint8_t source, proc;                                // WEFT_RAS_OWN/SEEN/MEMBER; WEFT_RAS_PROC_* (SEEN only)
  uint8_t finalized, aborted, closed, op_state, coll;  // op_state: WEFT_STATUS_*; coll: its weft_coll_t
  int32_t async_error;  // ncclResult_t: the communicator's sticky error or its host's abort code
  int32_t waiting_on;   // the rank its latest operation waits on, -1 none
  uint64_t seq, ops_done;
  uint64_t launched[WEFT_STATUS_NCOLLS];
  char host[WEFT_RAS_HOST_LEN];
} weft_ras_rank_t;

typedef struct {
  uint32_t magic, version;
  uint8_t secret[WEFT_SECRET_BYTES];  // of a communicator both ends belong to
} weft_ras_query_t;
typedef struct {
  uint32_t magic, nrecs;  // then nrecs weft_ras_rank_t
} weft_ras_answer_t;

// ras.c: this process's communicators (under weft_ras_lock).
typedef struct weft_ras_comm {
  struct ncclComm *comm;
  uint64_t hash;
  int rank, nranks;
  uint8_t secret[WEFT_SECRET_BYTES];
  weft_ras_peer_t *members;  // [nranks]
  struct weft_ras_comm *next;
} weft_ras_comm_t;
extern pthread_mutex_t weft_ras_lock;
extern weft_ras_comm_t *weft_ras_comms;

// ras_local.c: this process's ranks, and the other ranks of this host its
// communicators map, as records (malloc'd; *n of them). Takes weft_ras_lock.
weft_ras_rank_t *weft_ras_local_records(int *n);
// Who rank `rank` of communicator `hash` is, when this process is in it (1).
int weft_ras_member(uint64_t hash, int rank, weft_ras_peer_t *out);
// The state of process pid (same pid namespace) from /proc: WEFT_RAS_PROC_*.
int weft_ras_proc_state(int pid);

// The job as one answer sees it (ras_collect.c).
enum { WEFT_RAS_PENDING = 0, WEFT_RAS_ANSWERED, WEFT_RAS_REFUSED, WEFT_RAS_SILENT };
typedef struct {
  weft_ras_peer_t *procs;  // every process of the job known here, procs[0] this one
  uint8_t *heard;          // per process: WEFT_RAS_PENDING ...
  int *fd;                 // per process: the query's socket, -1
  char **buf;              // per process: its answer so far
  size_t *got, *cap;
  uint8_t (*secret)[WEFT_SECRET_BYTES];
  int nprocs;
  weft_ras_rank_t *recs;
  int nrecs, cap_recs;
  int64_t start_ns, deadline_ns, end_ns;
  int timeouts;
} weft_ras_job_t;
// Start gathering: this process's records now, a query to every other
// process (non-blocking connects). NULL when out of memory.
weft_ras_job_t *weft_ras_job_start(int timeout_s);
// Add the job's sockets to pfds (at most max; returns how many), and take
// what poll() says of them; 1 once every process answered or time is up.
int weft_ras_job_pollfds(const weft_ras_job_t *job, struct pollfd *pfds, int max);
int weft_ras_job_progress(weft_ras_job_t *job, const struct pollfd *pfds, int n);
void weft_ras_job_free(weft_ras_job_t *job);
// The index of process pid on host in job->procs, -1 when it is not there.
int weft_ras_find_proc(const weft_ras_job_t *job, int pid, const char *host);
// Answer a peer's query on fd (accepted here): this process's records.
void weft_ras_answer_peer(int fd);

// The job's view, digested for the reports (ras_view.c).
enum { WEFT_RAS_ST_RUNNING = 1, WEFT_RAS_ST_FINALIZE = 2, WEFT_RAS_ST_ABORT = 4 };
enum { WEFT_RAS_ERR_INCOMPLETE = 1, WEFT_RAS_ERR_ERROR = 2, WEFT_RAS_ERR_LAGGING = 4, WEFT_RAS_ERR_DEAD = 8 };
enum { WEFT_RAS_P_ALIVE = 0, WEFT_RAS_P_STOPPED, WEFT_RAS_P_DEAD, WEFT_RAS_P_UNREACHABLE };
typedef struct {
  const weft_ras_rank_t *rec;    // the best record of the rank, NULL: none
  int proc;                      // index in job->procs, -1 unknown
  int pid;                       // its process (-1 unknown) ...
  char host[WEFT_RAS_HOST_LEN];  // ... and host
  int pstate;                    // WEFT_RAS_P_* of its process
  int lagging;                   // behind the communicator's others, or its process is stopped
} weft_ras_vrank_t;
typedef struct {
  uint64_t hash;
  int nranks, nhosts, rph_min, rph_max;
  int status, errors;  // WEFT_RAS_ST_* bits, WEFT_RAS_ERR_* bits
  int nmissing, ndead, nlagging, nerror;
  uint64_t most[WEFT_STATUS_NCOLLS];  // the most launched of each collective among its ranks
  weft_ras_vrank_t *r;                // [nranks]
  int group, in_group;                // "#group-in_group" in the text report
} weft_ras_vcomm_t;
typedef struct {
  const weft_ras_job_t *job;
  int *pstate;  // per process: WEFT_RAS_P_*
  int nhosts, nprocs, nalive, nstopped, ndead, nunreachable;
  weft_ras_vcomm_t *comms;
  int ncomms, ngroups;
  double seconds;
} weft_ras_view_t;
int weft_ras_view_build(const weft_ras_job_t *job, weft_ras_view_t *v);  // 0, or -1 out of memory
void weft_ras_view_free(weft_ras_view_t *v);
const char *weft_ras_coll_name(int c);  // "AllReduce", ... (weft_coll_t order)
const char *weft_ras_pstate_name(int p);

// A growing text buffer for the answers.
typedef struct {
  char *s;
  size_t len, cap;
  int failed;
} weft_ras_out_t;
void weft_ras_out(weft_ras_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// ras_text.c, ras_json.c: the report of STATUS / VERBOSE STATUS.
void weft_ras_report_text(const weft_ras_view_t *v, int verbose, weft_ras_out_t *o);
void weft_ras_report_json(const weft_ras_view_t *v, weft_ras_out_t *o);

// ras_monitor.c: the events between the last view (*seen; NULL: none yet,
// only the baseline is taken) and v, as text lines and as JSON objects.
typedef struct weft_ras_seen weft_ras_seen_t;
void weft_ras_monitor_events(weft_ras_seen_t **seen, const weft_ras_view_t *v, weft_ras_out_t *text,
                             weft_ras_out_t *json);
void weft_ras_monitor_forget(weft_ras_seen_t **seen);

// ras_thread.c: count one more communicator (the first starts the thread)
// and say where this process's RAS thread listens (port 0: RAS is off);
// one fewer (the last stops and joins it); wake it (a communicator joined).
void weft_ras_thread_hold(weft_ras_peer_t *self);
void weft_ras_thread_release(void);
void weft_ras_wake(void);
// This process as the RAS thread's peers know it.
const weft_ras_peer_t *weft_ras_self(void);

#endif
