/*
 * env_table.h — the one table of environment knobs (X-macro).
 *
 * WEFT_ENV_INT(NAME, default, "doc") / WEFT_ENV_STR(NAME, "default" or NULL, "doc").
 * The accessor is weft_env_NAME(). NCCL's names where NCCL has the knob,
 * WEFT_ for weft's own. No include guard: included several times on purpose.
 */
WEFT_ENV_STR(NCCL_DEBUG, NULL, "Log level: VERSION, WARN, INFO, TRACE (default: none).")
WEFT_ENV_STR(NCCL_DEBUG_SUBSYS, "INIT,BOOTSTRAP,ENV", "Comma list of subsystems logged at INFO/TRACE; ALL; a leading ^ negates.")
WEFT_ENV_STR(NCCL_DEBUG_FILE, NULL, "Write log lines to this file instead of stdout; %h is the host name, %p the pid.")
WEFT_ENV_STR(NCCL_COMM_ID, NULL, "host:port of the rendezvous; when set, rank 0 hosts it and ncclGetUniqueId needs no root process.")
WEFT_ENV_STR(NCCL_SOCKET_IFNAME, NULL, "Interfaces for bootstrap sockets: prefix list, ^ excludes, = exact names.")
WEFT_ENV_INT(NCCL_SOCKET_NTHREADS, 1, "Socket transport: sockets per connection = NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (weft's proxy thread drives them all).")
WEFT_ENV_INT(NCCL_NSOCKS_PERTHREAD, 4, "Socket transport: sockets per thread; messages of at least 128 KiB are striped over the connection's sockets.")
WEFT_ENV_INT(WEFT_NET_DIRECT_MIN, 32768, "Network messages of at least this many bytes that only land in the user's buffer are received there straight from the socket, skipping the slot (0: never).")
WEFT_ENV_STR(NCCL_SOCKET_FAMILY, NULL, "AF_INET or AF_INET6 to force an address family.")
WEFT_ENV_INT(NCCL_SHM_DISABLE, 0, "1 disables the shared-memory transport.")
WEFT_ENV_INT(WEFT_LIVENESS_MS, 100, "How often a waiting rank checks that the processes of its host's other ranks are alive (a death fails the communicator with ncclRemoteError); 0 = never.")
WEFT_ENV_INT(WEFT_NET_DEAD_MS, 10000, "A network peer that goes silent (host gone, link down) is declared dead after about this many ms: TCP keepalive probes every second and TCP_USER_TIMEOUT on every socket; 0 = the kernel's defaults. Lower it on clean networks; a lossy link needs room for TCP's retransmissions.")
WEFT_ENV_INT(WEFT_TIMEOUT, 300, "Seconds any initialisation wait or collective may make no progress before it fails; 0 = never.")
WEFT_ENV_INT(WEFT_SHM_SLOT_BYTES, 65536, "Bytes in one shared-memory FIFO slot (the pipelining unit).")
WEFT_ENV_INT(WEFT_SHM_SLOTS, 16, "Slots in each shared-memory FIFO (per peer, per traffic class).")
WEFT_ENV_INT(WEFT_SPIN_NS, 20000, "Nanoseconds a waiting rank polls before it sleeps on a futex.")
WEFT_ENV_INT(WEFT_CHECK_MISMATCH, 1, "1: ranks compare each collective's arguments and fail mismatches with ncclInvalidUsage.")
WEFT_ENV_STR(WEFT_COMM_SECRET, NULL, "Shared secret for environment-based rendezvous (NCCL_COMM_ID, torchrun, Slurm, MPI).")
WEFT_ENV_INT(WEFT_MASTER_PORT_OFFSET, 1, "weftInitFromEnv: rendezvous port = MASTER_PORT + this (torchrun's own store uses MASTER_PORT).")
WEFT_ENV_STR(WEFT_UNIQUE_ID, NULL, "Set by weftrun: the hex-encoded ncclUniqueId of the job.")
WEFT_ENV_STR(WEFT_RANK, NULL, "Set by weftrun: this process's rank.")
WEFT_ENV_STR(WEFT_NRANKS, NULL, "Set by weftrun: the number of ranks.")
WEFT_ENV_STR(WEFT_HOSTID, NULL, "Overrides the host identity (host name + boot id) that decides which ranks share memory.")
WEFT_ENV_STR(NCCL_ALGO, NULL, "Algorithms the tuner may use, NCCL's syntax: 'ring,oneshot', '^oneshot', 'allreduce:ring;broadcast:chain'. weft's names: ring, chain, direct, oneshot, read, tree, recursive, rabenseifner, hier.")
WEFT_ENV_INT(WEFT_ONESHOT_MAX_BYTES, 16384, "AllReduce calls of at most this many bytes per rank use the one-hop algorithm (when allowed).")
WEFT_ENV_STR(WEFT_TUNE_FILE, NULL, "Link constants measured by weft-calibrate (lines: intra|inter ALPHA_US BANDWIDTH_GBPS) for the tuner's cost model; unset = built-in defaults.")
WEFT_ENV_INT(WEFT_NT_MIN_BYTES, 1048576, "Out-of-place calls whose output is at least this many bytes write it with non-temporal stores (no read-for-ownership, no cache pollution); 0 = never.")
WEFT_ENV_INT(WEFT_READ_MIN_BYTES, 0, "Calls of at least this many bytes per rank read peers' buffers directly (single copy) where ranks can reach each other's memory; 0 = only when NCCL_ALGO asks (cross-memory attach measured slower than the shared-memory ring on the reference machine).")
WEFT_ENV_STR(NCCL_TOPO_FILE, NULL, "NCCL topology XML describing this host; used instead of detection (docs/topology.md).")
WEFT_ENV_STR(NCCL_TOPO_DUMP_FILE, NULL, "Write the host's topology, as detected or loaded, to this file in NCCL's XML format.")
WEFT_ENV_STR(WEFT_HWLOC_XML, NULL, "hwloc XML file to detect the topology from instead of this machine (hwloc's own HWLOC_XMLFILE works too).")
WEFT_ENV_INT(WEFT_BIND, 0, "1: at communicator init, bind each rank's process to the cores nearest its GPU (or NIC), memory to that NUMA node; on hosts without GPUs, spread the ranks of the host over NUMA nodes and cores (docs/topology.md).")
