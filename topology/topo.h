/*
 * topo.h — the machine as a graph: NUMA nodes (CPU), PCI switches, GPUs,
 * NVSwitches, NICs and their network ports, joined by links that carry a
 * bandwidth (GB/s per direction) and a latency.
 *
 * A graph is built from a NCCL topology XML file, from hwloc (this machine or
 * an hwloc XML file), and then finalised: defaults are filled in, link
 * bandwidths follow NCCL's conventions (docs/topology.md), CPUs are joined by
 * inter-socket links and NVLink targets are resolved. On a finalised graph
 * one can ask for the path between two nodes (its class in NCCL's order and
 * its bottleneck bandwidth), each GPU's nearest NIC, and rings and trees.
 *
 * Every node keeps the XML attributes it was described with (plus the
 * defaults filled in), so dumping writes back what was loaded.
 */
#ifndef WEFT_TOPO_H
#define WEFT_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  WEFT_TOPO_CPU, // a NUMA node (NCCL's <cpu>)
  WEFT_TOPO_PCI, // a PCI switch or bridge, or another PCI device
  WEFT_TOPO_GPU,
  WEFT_TOPO_NVS, // an NVSwitch
  WEFT_TOPO_NIC, // a network adapter (PCI function, or a virtual one)
  WEFT_TOPO_NET, // one port of a NIC
  WEFT_TOPO_KINDS
} weft_topo_kind_t;

typedef enum { WEFT_LINK_LOC, WEFT_LINK_NVL, WEFT_LINK_PCI, WEFT_LINK_SYS, WEFT_LINK_NET } weft_link_kind_t;

// Path classes in NCCL's order: a larger class is a worse path.
typedef enum {
  WEFT_PATH_LOC, // the same device
  WEFT_PATH_NVL, // NVLink, directly or through NVSwitches
  WEFT_PATH_NVB, // NVLink through another GPU
  WEFT_PATH_PIX, // at most one PCI switch
  WEFT_PATH_PXB, // several PCI switches, no CPU
  WEFT_PATH_PHB, // through a CPU's host bridge
  WEFT_PATH_SYS, // across the inter-socket link
  WEFT_PATH_NET, // across the network (between hosts)
  WEFT_PATH_DIS  // no path
} weft_path_class_t;

typedef struct {
  char *key, *value;
} weft_topo_attr_t;

typedef struct {
  weft_topo_attr_t *items;
  int count, cap;
} weft_topo_attrs_t;

typedef struct {
  weft_topo_kind_t kind;
  int parent;             // the node above in the XML tree, -1 for none
  weft_topo_attrs_t attrs; // <cpu>, <pci> or <net> attributes (NVS: busid)
  weft_topo_attrs_t dev;  // <gpu> or <nic> attributes (GPU, NIC only)
  int on_pci;             // GPU/NIC/NVS: also a PCI device (has <pci>)
  // Filled by weft_topo_finalize:
  char busid[32];         // normalised, "" when not on PCI
  int cpu;                // the CPU node it hangs under, -1 for none
  int numa;               // that CPU's numaid, -1 for none
  int pci_class;          // 24-bit class code, -1 unknown
  int sm;                 // GPU compute capability x10, 0 unknown
  int net_mbps;           // NET: port speed in Mbit/s
  int *adj;               // indices of incident links
  int nadj;
} weft_topo_node_t;

typedef struct {
  int a, b;               // node indices; for tree links a is the parent
  weft_link_kind_t kind;
  double bw;              // GB/s per direction
  double lat_us;
  int count;              // NVLink: number of links; otherwise 1
} weft_topo_link_t;

typedef struct {
  int from;               // node index: a GPU, or an NVSwitch (its switch-to-switch links)
  char target[32];        // busid named by <nvlink target=...>
  int count;
  int tclass;             // class of the target, -1 unknown
  int mbps;               // MB/s per link per direction the description gives, 0: none
} weft_topo_nvlink_t;

typedef struct weft_topo {
  weft_topo_node_t *nodes;
  int nnodes, nodes_cap;
  weft_topo_link_t *links;
  int nlinks, links_cap;
  weft_topo_nvlink_t *nvlinks; // NVLinks as described, resolved by finalize
  int nnvlinks, nvlinks_cap;
  weft_topo_attrs_t system;    // <system> attributes
  char source[256];            // where the description came from
  char nvml_status[160];       // detection of this machine: what NVML and
  char ibv_status[160];        // libibverbs added ("" when not asked)
  int finalized;
} weft_topo_t;

#define WEFT_TOPO_MAX_HOPS 32

typedef struct {
  int link;   // link index
  int dir;    // 0: link.a -> link.b, 1: link.b -> link.a
  double cap; // bandwidth this hop is accounted against (GB/s)
} weft_topo_hop_t;

typedef struct {
  int nhops;
  weft_topo_hop_t hops[WEFT_TOPO_MAX_HOPS];
  int nodes[WEFT_TOPO_MAX_HOPS + 1];
  weft_path_class_t cls;
  double bw;      // bottleneck GB/s (GPU to GPU over NVLink: the most the
                  // NVLinks and NVSwitches between them carry at once)
  double lat_us;  // sum over hops
} weft_topo_path_t;

// --- graph (topo_graph.c) ---------------------------------------------------
weft_topo_t *weft_topo_new(const char *source);
void weft_topo_free(weft_topo_t *topo);
// Adds a node under parent (-1: top level); returns its index, -1 on ENOMEM.
int weft_topo_add_node(weft_topo_t *topo, weft_topo_kind_t kind, int parent);
int weft_topo_add_link(weft_topo_t *topo, int a, int b, weft_link_kind_t kind, double bw, int count);
// An NVLink as described: count links from node `from` to the device at bus
// id target (of class tclass, -1 unknown), each of mbps MB/s per direction
// (0: the GPU generation's figure). Resolved by weft_topo_finalize.
int weft_topo_add_nvlink(weft_topo_t *topo, int from, const char *target, int count, int tclass, int mbps);
int weft_topo_attr_set(weft_topo_attrs_t *attrs, const char *key, const char *value);
int weft_topo_attr_setf(weft_topo_attrs_t *attrs, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *weft_topo_attr_get(const weft_topo_attrs_t *attrs, const char *key);
void weft_topo_attrs_free(weft_topo_attrs_t *attrs);
// Normalises a PCI bus id to dddd:bb:dd.f (lower case); copies other text.
void weft_topo_busid_norm(const char *in, char *out, size_t outlen);
int weft_topo_find_busid(const weft_topo_t *topo, const char *busid);
int weft_topo_count(const weft_topo_t *topo, weft_topo_kind_t kind);
// Short human name of a node: busid, "numa N" or the port name.
const char *weft_topo_label(const weft_topo_t *topo, int node, char *buf, size_t len);
const char *weft_topo_kind_name(weft_topo_kind_t kind);
const char *weft_link_kind_name(weft_link_kind_t kind);
const char *weft_path_class_name(weft_path_class_t cls);
// Fills defaults, computes bandwidths, joins CPUs, resolves NVLinks. 0 or -1.
int weft_topo_finalize(weft_topo_t *topo, char *err, size_t errlen);
// Part of finalisation (topo_nvswitch.c): NVSwitch groups that share no GPU
// and that the description does not join (no switch-to-switch NVLink at
// all) are joined as one fabric, as NCCL treats every NVSwitch as one.
// Returns the number of links added, -1 on ENOMEM.
int weft_topo_join_nvswitch_groups(weft_topo_t *topo);
// A sorted, order-independent description of nodes and links (for tests
// and round trips). Caller frees.
char *weft_topo_signature(const weft_topo_t *topo);

// --- bandwidth conventions (topo_bw.c) ---------------------------------------
double weft_topo_pci_bw(const char *link_speed, int link_width);
double weft_topo_nvlink_bw(int sm);
int weft_topo_nvlink_raw_mbps(int sm);
// GB/s of one NVLink: the generation's figure, or the description's MB/s
// per link where that says more (hwloc gives signalling rates).
double weft_topo_nvlink_link_bw(int sm, int mbps);
double weft_topo_cpu_bw(const weft_topo_attrs_t *cpu);
int weft_topo_gpu_sm_from_device(int device_id);
int weft_topo_default_net_mbps(const char *nic_link_speed);
double weft_topo_link_latency_us(weft_link_kind_t kind);
#define WEFT_TOPO_LOC_BW 5000.0

// --- paths (topo_path.c) -------------------------------------------------------
// The best path from node `from` to node `to`: lowest class, then highest
// bandwidth, then fewest hops. Returns 0, or -1 when there is none.
int weft_topo_path(const weft_topo_t *topo, int from, int to, weft_topo_path_t *path);
// The NIC nearest each GPU, ties spread over GPUs. nic[g] for the g-th GPU
// (in node order); -1 when there is no NIC. Returns the number of GPUs.
int weft_topo_nearest_nics(const weft_topo_t *topo, int *nic, int max);
// The same among the NICs with allowed[node] set (NULL: every NIC).
int weft_topo_nearest_nics_among(const weft_topo_t *topo, const unsigned char *allowed, int *nic, int max);
// How near a NIC is: the path's class, its bottleneck (GB/s, the NIC's
// fastest port included) and hop count; a smaller class, then more
// bandwidth, then fewer hops is nearer.
typedef struct {
  weft_path_class_t cls;
  double bw;
  int hops;
} weft_topo_nearness_t;
// The NICs (allowed[node] set; NULL: all) tied for nearest to node `from`,
// in node order, at most max into cand; returns how many (0: none
// reachable). *best (may be NULL) says how near they are.
int weft_topo_nic_ties(const weft_topo_t *topo, int from, const unsigned char *allowed, int *cand, int max,
                       weft_topo_nearness_t *best);

// --- rings and trees (topo_search.c) -------------------------------------------
typedef struct {
  int n;
  int *members;      // GPU node indices, or ranks on CPU-only hosts
  int *parent;       // trees: parent position in members (-1 root); NULL for rings
  double bottleneck; // GB/s per direction, with shared links divided
  int is_ranks;      // members are ranks, not nodes
} weft_topo_ring_t;

typedef struct {
  weft_topo_ring_t ring;
  weft_topo_ring_t tree;
  int nranks;        // CPU-only: ranks placed one per core in core order
  int *rank_numa;    // CPU-only: the NUMA node of each rank
} weft_topo_plan_t;

// Searches a ring (and the chain tree NCCL uses inside a node) over the GPUs,
// or over nranks ranks placed one per core on a CPU-only host (nranks <= 0:
// one per core). Returns 0 or -1 (ENOMEM).
int weft_topo_search(const weft_topo_t *topo, int nranks, weft_topo_plan_t *plan);
void weft_topo_plan_free(weft_topo_plan_t *plan);
// The best ring over n members sitting at graph nodes nodes[] (repeats
// allowed: members on one node are side by side): order[k] is the index of
// the member at position k, *bw the ring's bottleneck. 0 or -1 (ENOMEM).
int weft_topo_ring_search(const weft_topo_t *topo, const int *nodes, int n, int *order, double *bw);
// The tie-breaker of the search for nodes visited in order (closed ring):
// the sum over hops of class x 64 + links; lower is better.
int weft_topo_order_cost(const weft_topo_t *topo, const int *nodes, int n);
// Bottleneck of members visited in order (closed ring or open chain), links
// shared by several hops divided among them.
double weft_topo_order_bw(const weft_topo_t *topo, const int *order, int n, int closed);
// Cores of a CPU node, from its affinity mask; returns the count (<= max).
int weft_topo_cpu_cores(const weft_topo_t *topo, int cpu, int *cores, int max);

// --- the ranks of one host (topo_order.c) ---------------------------------------
// Where a rank sits in the graph: the GPU with PCI bus id gpu_busid (NULL or
// "": none), else the CPU node that holds every one of the rank's allowed
// CPUs (cpus[ncpus], OS numbers), else -1 (unbound across NUMA nodes, or not
// in the graph).
int weft_topo_place(const weft_topo_t *topo, const char *gpu_busid, const int *cpus, int ncpus);
// The ring over the n ranks of one host, rank i sitting at place[i]:
// order[k] is the index of the rank at position k. It starts at the rank
// nearest a NIC (the chain NCCL's trees take inside a node). Rank order
// when some place is unknown (-1), when all ranks sit at one place, or
// when rank order is as good a ring as the best found (no reshuffle without
// a gain). *bw (may be NULL): the ring's bottleneck in GB/s. Returns 1 when
// order differs from rank order, 0 when it is rank order, -1 on ENOMEM.
int weft_topo_rank_order(const weft_topo_t *topo, const int *place, int n, int *order, double *bw);

// --- placement (topo_bind_plan.c, topo_bind.c) ---------------------------------
typedef struct {
  int *cpus;       // OS CPU numbers, ascending
  int ncpus;
  int numa;        // the NUMA node they all lie in, -1 when several
  int gpu, nic;    // node index of the GPU or NIC the rank sits near, -1 none
  int share, sharers; // this rank's share among the ranks on the same node(s)
} weft_topo_bind_t;

// The CPUs local rank local_rank (of local_size ranks on this host) should
// run on (docs/topology.md, "Binding"). core_of[cpu] names the core of each
// of ncore_of OS CPUs so SMT siblings stay together; NULL: one CPU per core.
// Returns 0, or -1 with a reason in err; free with weft_topo_bind_free.
int weft_topo_bind_plan(const weft_topo_t *topo, int local_rank, int local_size, const int *core_of, int ncore_of,
                        weft_topo_bind_t *bind, char *err, size_t errlen);
void weft_topo_bind_free(weft_topo_bind_t *bind);
// This machine's core of each OS CPU (the first of its SMT siblings), from
// sysfs; returns the number of entries (caller frees *core_of), 0 unknown.
int weft_topo_core_map(int **core_of);
// The process's CPU binding (hwloc_get_cpubind): its CPUs as a list
// ("0-3,8"), how many, and how many the process may use at all.
typedef struct {
  char list[256];
  int ncpus, navail;
} weft_topo_cpubind_t;
int weft_topo_cpubind_get(weft_topo_cpubind_t *bind); // 0 or -1 ("unknown")
// Binds the process to bind->cpus and, when they lie in one NUMA node and
// membind is set, the calling thread's memory (and that of threads it
// starts) to that node (libnuma). 0, or -1 with the reason in err.
int weft_topo_bind_apply(const weft_topo_bind_t *bind, int membind, char *err, size_t errlen);
// Writes cpus as a list ("0-3,8") into buf.
void weft_topo_cpulist(const int *cpus, int n, char *buf, size_t len);

// --- network device choice (topo_nic.c) -------------------------------------------
// A device a network backend offers, as the topology may know it.
typedef struct {
  const char *name;  // interface ("eth0") or RDMA device ("mlx5_0"): a port's <net name=...>
  int port;          // RDMA port (>= 1), or 0: any port of that name
  const char *busid; // PCI bus id of the device, NULL or "" unknown
} weft_topo_netdev_t;

typedef struct {
  int dev;          // the device to use: an index into the list
  int nic;          // its NIC node, -1 when the topology did not decide
  int gpu;          // the GPU node the rank drives, -1 none
  int numa;         // the NUMA node (numaid) the rank sits on, -1 several or unknown
  int rail, rails;  // dev is the rail-th of `rails` equally near devices
  char why[112];    // for the log: "nearest its NUMA node 1, rail 0 of 2", "the only device"
} weft_topo_nic_pick_t;

// The NIC node a device is on: by port name (and RDMA port), else by PCI
// bus id; -1 when the topology does not know it.
int weft_topo_netdev_match(const weft_topo_t *topo, const weft_topo_netdev_t *dev);
// The device local rank local_rank (of local_size on this host) uses among
// devs[0..ndevs): the NIC nearest its GPU (gpu_busid, or the
// (local rank mod nGPUs)-th GPU when NULL), else on hosts without GPUs the
// NIC(s) nearest where WEFT_BIND's plan puts it, the local ranks that share
// equally near NICs taking them in turn (rails); device 0 with one device,
// no topology (topo NULL) or no device it knows (docs/topology.md, "Network
// devices"). 0, or -1 on bad arguments or ENOMEM (pick->why says which).
int weft_topo_nic_pick(const weft_topo_t *topo, int local_rank, int local_size, const char *gpu_busid,
                       const weft_topo_netdev_t *devs, int ndevs, weft_topo_nic_pick_t *pick);

// --- at communicator init (topo_init.c) --------------------------------------------
// This process's topology: NCCL_TOPO_FILE, an hwloc XML file or detection,
// made once per process and kept. NULL with err when it cannot be had.
const weft_topo_t *weft_topo_system(char *err, size_t errlen);
// The topology a communicator orders its ranks by, or NULL when there is
// nothing to order by (one NUMA node, no GPU in use, no topology file: no
// detection, no cost) or it cannot be had (INFO). *sig is a hash of the
// graph (0 with NULL), so the ranks of a host can check they see one machine.
const weft_topo_t *weft_topo_for_ranks(int uses_gpu, uint32_t *sig);
// Called once per communicator after the ranks of each host are known:
// WEFT_BIND=1 binds this process (not when ranks_here, the communicator's
// ranks in this process, is above 1: ranks that are threads share one
// binding), and local rank 0 writes NCCL_TOPO_DUMP_FILE. Logs what it did.
// 0, or -1 after a WARN.
int weft_topo_comm_init(int local_rank, int local_size, int ranks_here);

// --- files (topo_xml_load.c, topo_xml_dump.c, topo_hwloc.c) --------------------
weft_topo_t *weft_topo_load_xml(const char *path, char *err, size_t errlen);
weft_topo_t *weft_topo_load_xml_mem(const char *text, size_t len, const char *name, char *err, size_t errlen);
int weft_topo_dump_xml(const weft_topo_t *topo, const char *path, char *err, size_t errlen);
// hwloc: this machine (xml_path NULL) or an hwloc XML file.
weft_topo_t *weft_topo_load_hwloc(const char *xml_path, char *err, size_t errlen);
// What the environment asks for: NCCL_TOPO_FILE, else WEFT_HWLOC_XML or
// HWLOC_XMLFILE, else detection; then NCCL_TOPO_DUMP_FILE if set.
weft_topo_t *weft_topo_from_env(char *err, size_t errlen);
// The same without the dump.
weft_topo_t *weft_topo_load_env(char *err, size_t errlen);
// Writes NCCL XML to path through a temporary file renamed over it, so that
// concurrent writers never leave a mixed file. 0 or -1.
int weft_topo_dump_xml_atomic(const weft_topo_t *topo, const char *path, char *err, size_t errlen);

// --- output (topo_print.c) -------------------------------------------------------
void weft_topo_print_tree(const weft_topo_t *topo, FILE *out);
void weft_topo_print_plan(const weft_topo_t *topo, const weft_topo_plan_t *plan, FILE *out);
void weft_topo_print_dot(const weft_topo_t *topo, FILE *out);
// bind: the process's CPU binding, reported when not NULL.
void weft_topo_print_cpubind(const weft_topo_cpubind_t *bind, FILE *out);
void weft_topo_print_json(const weft_topo_t *topo, const weft_topo_plan_t *plan, const weft_topo_cpubind_t *bind,
                          FILE *out);

#endif
