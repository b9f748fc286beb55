/*
 * ras_collect.c — gathering the job's state for one answer.
 *
 * The process a client reached asks every other process of the job it
 * knows (through the communicators it shares with them) for its records,
 * all at once, over non-blocking sockets that the RAS thread's poll() drives,
 * within the client's TIMEOUT. A process that refuses the connection has
 * lost its RAS listener (it died); one that is silent until the deadline
 * is stopped, hung or cut off; one that a process beside it saw stopped
 * or dead is not waited for. The query carries the secret of a
 * communicator both sides belong to; a stranger gets nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug.h"
#include "ras_internal.h"
#include "util.h"

int weft_ras_find_proc(const weft_ras_job_t *job, int pid, const char *host) {
  for (int i = 0; i < job->nprocs; i++)
    if (job->procs[i].pid == pid && strcmp(job->procs[i].host, host) == 0) return i;
  return -1;
}

// Every process the communicators here name, this one first.
static int gather_procs(weft_ras_job_t *job) {
  int cap = 1;
  pthread_mutex_lock(&weft_ras_lock);
  for (const weft_ras_comm_t *c = weft_ras_comms; c != NULL; c = c->next) cap += c->nranks;
  job->procs = calloc((size_t)cap, sizeof(*job->procs));
  job->secret = calloc((size_t)cap, sizeof(*job->secret));
  if (job->procs == NULL || job->secret == NULL) {
    pthread_mutex_unlock(&weft_ras_lock);
    return -1;
  }
  job->procs[0] = *weft_ras_self();
  job->nprocs = 1;
  for (const weft_ras_comm_t *c = weft_ras_comms; c != NULL; c = c->next)
    for (int r = 0; r < c->nranks; r++) {
      if (weft_ras_find_proc(job, c->members[r].pid, c->members[r].host) >= 0) continue;
      memcpy(job->secret[job->nprocs], c->secret, WEFT_SECRET_BYTES);
      job->procs[job->nprocs++] = c->members[r];
    }
  pthread_mutex_unlock(&weft_ras_lock);
  return 0;
}

static void append(weft_ras_job_t *job, const weft_ras_rank_t *r, int n) {
  if (job->nrecs + n > job->cap_recs) {
    int cap = job->nrecs + n + 16;
    weft_ras_rank_t *nr = realloc(job->recs, (size_t)cap * sizeof(*nr));
    if (nr == NULL) return;
    job->recs = nr;
    job->cap_recs = cap;
  }
  memcpy(job->recs + job->nrecs, r, (size_t)n * sizeof(*r));
  job->nrecs += n;
}

static void query(weft_ras_job_t *job, int i) {
  const weft_ras_peer_t *p = &job->procs[i];
  job->heard[i] = WEFT_RAS_PENDING;
  if (p->ras.sa.sa_family == 0 || p->ras.sin.sin_port == 0) {  // RAS is off there: nothing to ask
    job->heard[i] = WEFT_RAS_SILENT;
    return;
  }
  int fd = socket(p->ras.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    job->heard[i] = WEFT_RAS_SILENT;
    return;
  }
  socklen_t len = p->ras.sa.sa_family == AF_INET6 ? sizeof(p->ras.sin6) : sizeof(p->ras.sin);
  if (connect(fd, &p->ras.sa, len) != 0 && errno != EINPROGRESS) {
    job->heard[i] = errno == ECONNREFUSED ? WEFT_RAS_REFUSED : WEFT_RAS_SILENT;
    close(fd);
    return;
  }
  job->fd[i] = fd;
}

weft_ras_job_t *weft_ras_job_start(int timeout_s) {
  weft_ras_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL || gather_procs(job) != 0) goto fail;
  int n = job->nprocs;
  job->heard = calloc((size_t)n, 1);
  job->fd = malloc((size_t)n * sizeof(int));
  job->buf = calloc((size_t)n, sizeof(char *));
  job->got = calloc((size_t)n, sizeof(size_t));
  job->cap = calloc((size_t)n, sizeof(size_t));
  if (!job->heard || !job->fd || !job->buf || !job->got || !job->cap) goto fail;
  job->start_ns = weft_now_ns();
  job->deadline_ns = timeout_s > 0 ? job->start_ns + (int64_t)timeout_s * 1000000000 : INT64_MAX;
  int nlocal;
  weft_ras_rank_t *local = weft_ras_local_records(&nlocal);
  append(job, local, nlocal);
  free(local);
  job->heard[0] = WEFT_RAS_ANSWERED;
  for (int i = 0; i < n; i++) job->fd[i] = -1;
  for (int i = 1; i < n; i++) query(job, i);
  return job;
fail:
  weft_ras_job_free(job);
  return NULL;
}

int weft_ras_job_pollfds(const weft_ras_job_t *job, struct pollfd *pfds, int max) {
  int k = 0;
  for (int i = 1; i < job->nprocs && k < max; i++)
    if (job->fd[i] >= 0)
      pfds[k++] = (struct pollfd){.fd = job->fd[i], .events = job->got[i] == 0 && job->cap[i] == 0 ? POLLOUT : POLLIN};
  return k;
}

static void finish(weft_ras_job_t *job, int i, int how) {
  if (how == WEFT_RAS_ANSWERED) {
    const weft_ras_answer_t *a = (const weft_ras_answer_t *)job->buf[i];
    if (job->got[i] >= sizeof(*a) && a->magic == WEFT_RAS_WIRE_MAGIC &&
        job->got[i] == sizeof(*a) + (size_t)a->nrecs * sizeof(weft_ras_rank_t))
      append(job, (const weft_ras_rank_t *)(a + 1), (int)a->nrecs);
    else
      how = WEFT_RAS_SILENT;  // a garbled answer counts as none
  }
  job->heard[i] = (uint8_t)how;
  close(job->fd[i]);
  job->fd[i] = -1;
}

// One socket's turn: the connection completed (send the query) or bytes came.
static void step(weft_ras_job_t *job, int i, short revents) {
  int fd = job->fd[i];
  if (job->cap[i] == 0) {  // connecting
    int err = 0;
    socklen_t l = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err != 0) {
      finish(job, i, err == ECONNREFUSED ? WEFT_RAS_REFUSED : WEFT_RAS_SILENT);
      return;
    }
    weft_ras_query_t q = {.magic = WEFT_RAS_WIRE_MAGIC, .version = WEFT_RAS_WIRE_VERSION};
    memcpy(q.secret, job->secret[i], sizeof(q.secret));
    if (send(fd, &q, sizeof(q), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(q)) {
      finish(job, i, WEFT_RAS_SILENT);
      return;
    }
    job->cap[i] = 4096;
    job->buf[i] = malloc(job->cap[i]);
    if (job->buf[i] == NULL) {
      finish(job, i, WEFT_RAS_SILENT);
      return;
    }
    return;
  }
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  for (;;) {
    if (job->got[i] == job->cap[i]) {
      char *nb = realloc(job->buf[i], job->cap[i] * 2);
      if (nb == NULL) {
        finish(job, i, WEFT_RAS_SILENT);
        return;
      }
      job->buf[i] = nb;
      job->cap[i] *= 2;
    }
    ssize_t k = recv(fd, job->buf[i] + job->got[i], job->cap[i] - job->got[i], MSG_DONTWAIT);
    if (k > 0) {
      job->got[i] += (size_t)k;
      continue;
    }
    if (k == 0) {
      finish(job, i, WEFT_RAS_ANSWERED);
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) finish(job, i, WEFT_RAS_SILENT);
    return;
  }
}

// Whether a process beside it saw process i stopped or dead: then no answer will come.
static int seen_gone(const weft_ras_job_t *job, int i) {
  for (int k = 0; k < job->nrecs; k++) {
    const weft_ras_rank_t *r = &job->recs[k];
    if (r->source == WEFT_RAS_SEEN && r->pid == job->procs[i].pid && strcmp(r->host, job->procs[i].host) == 0 &&
        !r->closed && (r->proc == WEFT_RAS_PROC_STOPPED || r->proc == WEFT_RAS_PROC_DEAD))
      return 1;
  }
  return 0;
}

int weft_ras_job_progress(weft_ras_job_t *job, const struct pollfd *pfds, int n) {
  for (int k = 0; k < n; k++) {
    if (pfds[k].revents == 0) continue;
    for (int i = 1; i < job->nprocs; i++)
      if (job->fd[i] == pfds[k].fd) step(job, i, pfds[k].revents);
  }
  for (int i = 1; i < job->nprocs; i++)
    if (job->fd[i] >= 0 && seen_gone(job, i)) finish(job, i, WEFT_RAS_SILENT);
  int pending = 0;
  for (int i = 1; i < job->nprocs; i++) pending += job->heard[i] == WEFT_RAS_PENDING && job->fd[i] >= 0;
  if (pending > 0 && weft_now_ns() < job->deadline_ns) return 0;
  for (int i = 1; i < job->nprocs; i++)
    if (job->fd[i] >= 0) {
      finish(job, i, WEFT_RAS_SILENT);
      job->timeouts++;
    }
  job->end_ns = weft_now_ns();
  return 1;
}

void weft_ras_job_free(weft_ras_job_t *job) {
  if (job == NULL) return;
  for (int i = 0; job->fd != NULL && i < job->nprocs; i++) {
    if (job->fd[i] >= 0) close(job->fd[i]);
    if (job->buf != NULL) free(job->buf[i]);
  }
  free(job->procs);
  free(job->secret);
  free(job->heard);
  free(job->fd);
  free(job->buf);
  free(job->got);
  free(job->cap);
  free(job->recs);
  free(job);
}

// Whether one of this process's communicators has this secret.
static int knows(const uint8_t *secret) {
  int ok = 0;
  pthread_mutex_lock(&weft_ras_lock);
  for (const weft_ras_comm_t *c = weft_ras_comms; c != NULL && !ok; c = c->next)
    ok = memcmp(c->secret, secret, WEFT_SECRET_BYTES) == 0;
  pthread_mutex_unlock(&weft_ras_lock);
  return ok;
}

void weft_ras_answer_peer(int fd) {
  weft_ras_query_t q;
  if (weft_socket_recv(fd, &q, sizeof(q), 1000) != ncclSuccess) return;
  if (q.magic != WEFT_RAS_WIRE_MAGIC || q.version != WEFT_RAS_WIRE_VERSION || !knows(q.secret)) {
    INFO(WEFT_LOG_RAS, "RAS: dropped a query without a known communicator's secret");
    return;
  }
  int n;
  weft_ras_rank_t *recs = weft_ras_local_records(&n);
  weft_ras_answer_t a = {.magic = WEFT_RAS_WIRE_MAGIC, .nrecs = (uint32_t)n};
  if (weft_socket_send(fd, &a, sizeof(a), 2000) == ncclSuccess && n > 0)
    weft_socket_send(fd, recs, (size_t)n * sizeof(*recs), 2000);
  free(recs);
}
