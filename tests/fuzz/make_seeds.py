#!/usr/bin/env python3
"""make_seeds.py — writes the binary seeds of corpus/wire, corpus/unique_id,
corpus/env and corpus/net_ib (the topology seeds are XML files kept as they are).

The layouts mirror src/boot/rendezvous.h (rdv_msg_t in rendezvous.c: 116 bytes;
weft_peer_info_t: 48 bytes, 8-aligned) and src/boot/bootstrap.c (ring hello: 40
bytes, ring header: 8). Secrets are zero here: the harness splices the job's
secret in when the input's option bits ask for it. The verbs connection info
mirrors transports/ib/net_ib_conn.c (WEFT_IB_CONN_BYTES = 120, FNV-1a 64 checksum).
Rerun after a layout change.
"""
import os
import socket
import struct

MAGIC = 0x77656674
SECRET = bytes(32)
AUTH, FIX = 0x0C, 0x10  # fuzz_wire.c: OPT_SECRET | OPT_MAGIC, OPT_FIX
here = os.path.dirname(os.path.abspath(__file__))


def sockaddr_in(ip, port):
    b = struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip)
    return b + bytes(28 - len(b))


def sockaddr_in6(ip, port):
    b = struct.pack("<H", socket.AF_INET6) + struct.pack(">H", port) + bytes(4)
    b += socket.inet_pton(socket.AF_INET6, ip) + bytes(4)
    return b + bytes(28 - len(b))


def rdv(typ, nranks, nid, k, count):
    return struct.pack("<II", MAGIC, typ) + SECRET + struct.pack("<iiii", nranks, nid, k, count) + bytes(60)


def peer(rank):
    return struct.pack("<iiQ", rank, 1234, 0x1234) + sockaddr_in("127.0.0.1", 40000 + rank) + bytes(4)


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def ib_conn(qpns, link_layer, gid, fifo_addr=0, fifo_rkey=0):
    qp = list(qpns) + [0] * (16 - len(qpns))
    b = struct.pack("<IHH", 0x42494657, 1, len(qpns)) + struct.pack("<16I", *qp)
    b += struct.pack("<IHBB", 0x123456, 7, link_layer, 5) + gid + struct.pack("<QII", fifo_addr, fifo_rkey, 0)
    return b + struct.pack("<Q", fnv1a64(b))


def uid(flags, root):
    b = struct.pack("<II", MAGIC, flags) + root + bytes(range(32))
    return b + bytes(128 - len(b))


hello = struct.pack("<Ii", MAGIC, 1) + SECRET
traffic = struct.pack("<II", 1, 1) + b"\x5a" + struct.pack("<II", 2, 4) + struct.pack("<i", 1)

seeds = {
    # wire, mode 0: the rendezvous root
    "wire/root-hello": bytes([0 | AUTH, 0]) + rdv(1, 2, 1, 0, 1) + peer(1),
    "wire/root-batch": bytes([0 | AUTH, 0]) + rdv(2, 3, 1, 0, 2) + peer(0) + peer(2),
    # A known bug in src/boot/rendezvous.c (README.md, "Open findings"), kept out of the corpus.
    "../crashers/rendezvous-batch-duplicate-rank": bytes([0 | AUTH, 0]) + rdv(2, 4, 1, 0, 2) + peer(3) + peer(3),
    "wire/root-subroot-hello": bytes([0 | AUTH, 0]) + rdv(1, 4, 2, 1, 1) + peer(3),
    "wire/root-stranger": bytes([0, 0]) + b"GET / HTTP/1.0\r\n\r\n",
    # wire, mode 1: a rank joining through a hostile root
    "wire/join-table": bytes([1 | AUTH | FIX, 2]) + rdv(3, 3, 0, 0, 3) + peer(0) + peer(1) + peer(2),
    "wire/join-error": bytes([1 | AUTH, 0]) + rdv(4, 0, 0, 0, 26) + b"ranks never arrived: 1 2 3",
    "wire/join-wrong-secret": bytes([1, 0]) + struct.pack("<II", MAGIC, 3) + b"\x01" * 32 + bytes(76),
    # wire, mode 2: the bootstrap ring (shape 0: nranks 2, rank 0, 1-byte blocks)
    "wire/ring-neighbour": bytes([2 | AUTH | FIX, 0]) + hello + traffic,
    "wire/ring-stranger": bytes([2, 0]) + bytes(40) + traffic,
    "wire/ring-out-of-step": bytes([2 | AUTH | FIX, 1]) + hello + struct.pack("<II", 7, 1) + b"\x01",
    # unique ids: 128 bytes each, then the shape byte (nranks - 1 in the low bits)
    "unique_id/ipv4": uid(0, sockaddr_in("127.0.0.1", 29500)) + bytes([1]),
    "unique_id/hosted-by-rank0": uid(1, sockaddr_in("127.0.0.1", 29500)) + bytes([0]),
    "unique_id/ipv6": uid(0, sockaddr_in6("::1", 29500)) + bytes([3]),
    "unique_id/zero": bytes(129),
    "unique_id/scalable-two-roots": uid(0, sockaddr_in("127.0.0.1", 29500))
    + uid(0, sockaddr_in("127.0.0.1", 29501)) + bytes([3]),
    # environment: selector byte, then the value(s), NUL-separated
    "env/int-decimal": b"\x0042",
    "env/int-hex-suffix": b"\x000x10K",
    "env/int-min": b"\x00-9223372036854775808",
    "env/debug-info": b"\x01INFO\x00INIT,NET\x00weft.%h.%p.log",
    "env/debug-negate": b"\x01WARN\x00^COLL,ENV",
    "env/ifname-exclude": b"\x02^docker,lo",
    "env/ifname-exact": b"\x02=lo\x00AF_INET",
    "env/ifname-prefix": b"\x02eth,ib\x00AF_INET6",
    "env/algo-list": b"\x03ring,oneshot",
    "env/algo-negate": b"\x03^oneshot",
    "env/algo-per-coll": b"\x03allreduce:ring;broadcast:chain",
    "env/tune-file": b"\x04# measured by weft-calibrate\nintra 0.42 6.10\ninter 28.5 1.15\n",
    "env/comm-id-v4": b"\x05127.0.0.1:29500",
    "env/comm-id-v6": b"\x05[::1]:29500",
    "net_ib/hca-list": b"\x00mlx5_0:1,mlx5_2",
    "net_ib/hca-exclude-exact": b"\x00^=mlx5_1:2",
    "net_ib/conn-ib-sender": b"\x01" + ib_conn([0x11, 0x12], 1, bytes(16), 0x7F1234567000, 0xDEADBEEF),
    "net_ib/conn-roce-receiver": b"\x01" + ib_conn([0x200], 2, bytes(10) + b"\xff\xff\x0a\x00\x00\x01"),
}

for name, data in seeds.items():
    path = os.path.join(here, "corpus", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
