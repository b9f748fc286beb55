/*
 * topo_init.c — what the topology module does when a communicator starts:
 * the process's topology, made once and kept (detection costs tens of
 * milliseconds, and only WEFT_BIND or NCCL_TOPO_DUMP_FILE ask for it), the
 * binding WEFT_BIND=1 asks for, and the NCCL_TOPO_DUMP_FILE written by the
 * first rank of each host.
 */
#include "debug.h"
#include "env.h"
#include "topo.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static weft_topo_t *cached;  // lives until the process ends: communicators keep pointers into it
static int bound; // this process was bound already (by an earlier communicator)

__attribute__((destructor)) static void cached_free(void) {
  weft_topo_free(cached);
  cached = NULL;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

const weft_topo_t *weft_topo_system(char *err, size_t errlen) {
  pthread_mutex_lock(&lock);
  if (!cached) { // a failure is not kept: the next caller gets the reason too
    double t0 = now_ms();
    cached = weft_topo_load_env(err, errlen);
    if (cached)
      INFO(WEFT_LOG_GRAPH, "topology from %s in %.1f ms: %d NUMA nodes, %d GPUs, %d NICs%s%s%s%s", cached->source,
           now_ms() - t0, weft_topo_count(cached, WEFT_TOPO_CPU), weft_topo_count(cached, WEFT_TOPO_GPU),
           weft_topo_count(cached, WEFT_TOPO_NIC), cached->nvml_status[0] ? "; " : "", cached->nvml_status,
           cached->ibv_status[0] ? "; " : "", cached->ibv_status);
  }
  const weft_topo_t *t = cached;
  pthread_mutex_unlock(&lock);
  return t;
}

// NUMA nodes this machine has (sysfs), 1 when it cannot say.
static int numa_nodes(void) {
  DIR *d = opendir("/sys/devices/system/node");
  int n = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9';
  if (d != NULL) closedir(d);
  return n > 0 ? n : 1;
}

const weft_topo_t *weft_topo_for_ranks(int uses_gpu, uint32_t *sig) {
  static uint32_t cached_sig;
  *sig = 0;
  int asked = weft_env_NCCL_TOPO_FILE() != NULL || weft_env_WEFT_HWLOC_XML() != NULL || getenv("HWLOC_XMLFILE");
  if (!asked && !uses_gpu && numa_nodes() <= 1) return NULL;  // every rank sits alike: nothing to order by
  char err[512] = "";
  const weft_topo_t *t = weft_topo_system(err, sizeof(err));
  if (t == NULL) {
    INFO(WEFT_LOG_GRAPH, "no topology to order the ranks by (%s): host order", err);
    return NULL;
  }
  pthread_mutex_lock(&lock);
  if (cached_sig == 0) {
    char *text = weft_topo_signature(t);
    uint32_t h = 2166136261u;
    for (const char *p = text; p != NULL && *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    cached_sig = h ? h : 1;
    free(text);
  }
  *sig = cached_sig;
  pthread_mutex_unlock(&lock);
  return t;
}

static void bind_rank(const weft_topo_t *t, int local_rank, int local_size) {
  char err[512] = "", list[512];
  int *core_of = NULL, ncore = weft_topo_core_map(&core_of);
  weft_topo_bind_t b;
  int rc = weft_topo_bind_plan(t, local_rank, local_size, core_of, ncore, &b, err, sizeof(err));
  free(core_of);
  if (rc == 0 && weft_topo_bind_apply(&b, 1, err, sizeof(err)) == 0) {
    char near[80] = "";
    if (b.gpu >= 0 || b.nic >= 0) {
      char label[64];
      snprintf(near, sizeof(near), ", near %s %s", b.gpu >= 0 ? "GPU" : "NIC",
               weft_topo_label(t, b.gpu >= 0 ? b.gpu : b.nic, label, sizeof(label)));
    }
    weft_topo_cpulist(b.cpus, b.ncpus, list, sizeof(list));
    char mem[48] = "memory not bound (several NUMA nodes)";
    if (b.numa >= 0) snprintf(mem, sizeof(mem), "memory on NUMA node %d", b.numa);
    INFO(WEFT_LOG_INIT, "WEFT_BIND: local rank %d of %d bound to CPUs %s (%d CPUs, share %d of %d%s), %s", local_rank,
         local_size, list, b.ncpus, b.share + 1, b.sharers, near, mem);
    bound = 1;
  } else
    WARN("WEFT_BIND: local rank %d of %d left unbound: %s", local_rank, local_size, err);
  if (rc == 0) weft_topo_bind_free(&b);
}

int weft_topo_comm_init(int local_rank, int local_size, int ranks_here) {
  const char *dump = weft_env_NCCL_TOPO_DUMP_FILE();
  int want_dump = dump && *dump && local_rank == 0;
  int want_bind = weft_env_WEFT_BIND() != 0;
  if (!want_dump && !want_bind) return 0;
  char err[512] = "";
  const weft_topo_t *t = weft_topo_system(err, sizeof(err));
  if (!t) {
    WARN("topology: %s", err);
    return -1;
  }
  if (want_dump) {
    if (weft_topo_dump_xml_atomic(t, dump, err, sizeof(err))) {
      WARN("NCCL_TOPO_DUMP_FILE: %s", err);
      return -1;
    }
    INFO(WEFT_LOG_INIT, "topology (%s) written to %s", t->source, dump);
  }
  if (want_bind) {
    pthread_mutex_lock(&lock);
    if (ranks_here > 1)
      INFO(WEFT_LOG_INIT, "WEFT_BIND: %d ranks are threads of this process; not binding", ranks_here);
    else if (bound)
      INFO(WEFT_LOG_INIT, "WEFT_BIND: this process was bound by an earlier communicator; keeping it");
    else
      bind_rank(t, local_rank, local_size);
    pthread_mutex_unlock(&lock);
  }
  return 0;
}
