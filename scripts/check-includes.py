#!/usr/bin/env python3
"""check-includes.py — holds every folder to the include rules its README states.

Each folder README.md may carry one line

    May include: src/base/, algorithms/schedule.h, include/

naming the folders (a trailing /) and single headers that the C, C++ and CUDA
files of that folder may include with #include "...". A file may always
include the headers of its own folder and of the folders below it; system
headers (#include <...>) are not checked. A folder without such a line takes
the rule of the nearest folder above it that has one.

A quoted include is resolved the way the compiler resolves it: beside the
including file first, then by its name among the headers of the tree (names
of library headers are unique; see --check-unique).

It also holds the library's layers (LAYERS below) to one direction: a
module (a .c file and the .h of the same name beside it) may reach, by
including or, with --objects naming a build's object folder, by calling
(nm's defined and undefined symbols), only modules of its own layer or of
lower ones. Circles of modules inside a layer are listed by --report.

Some rooms are sealed from others whatever a README says (SEALED below):
src/core and src/boot include no header of src/cuda, and no CUDA header
of the system either (<cuda.h>, <cuda_runtime.h>, <nvml.h>, ...: SEALED_SYSTEM);
they reach CUDA through the seam src/core/placement.h, which src/cuda
implements.

Usage:
  check-includes.py                 check the rules and circles, exit 1 on a violation
  check-includes.py --objects DIR   also build the call graph from DIR's .o files
  check-includes.py --report        print files per folder, circles, the longest include chain
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_EXT = ('.c', '.h', '.cu', '.cuh', '.cpp')
SKIP_DIRS = {'.git', 'build', 'build-asan', 'build-tsan', 'build-fuzz', '.gpu-carry', 'corpus', 'crashers',
             '__pycache__'}
# The layers of libweft and their heights: code may include and call only
# its own layer and the layers below it, so dependencies run one way.
# A circle of modules inside a layer is reported only (the core's rooms
# call each other: the engine runs CUDA batches, the CUDA path runs the
# engine); one across layers cannot happen without an upward edge.
LAYERS = {  # layer: (height, rooms)
    'base': (0, ['src/base']),
    'arith': (1, ['src/arith', 'src/kernels']),
    'algorithms': (2, ['algorithms']),
    'topology': (2, ['topology']),
    'transports': (2, ['transports']),
    'plugins': (3, ['plugins']),
    'core': (4, ['src/boot', 'src/core', 'src/cuda', 'src/ras']),
}
# Rooms whose headers a room may never include, whatever its README says.
SEALED = {  # room: rooms it may not include
    'src/core': ['src/cuda'],
    'src/boot': ['src/cuda'],
}
# Rooms that may include no system header of these libraries (CUDA's own).
SEALED_SYSTEM = {'src/core': 'CUDA', 'src/boot': 'CUDA'}
CUDA_SYSTEM_RE = re.compile(r'^(cuda|cupti|nvml|nvrtc|nvtx|cublas|curand|cufft|cusparse|cudnn|nccl_device|crt/|'
                            r'device_|driver_types|vector_types|host_defines|library_types)', re.I)
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SYSTEM_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')
RULE_RE = re.compile(r'^May include:\s*(.*)$')


def rel(path):
    return os.path.relpath(path, ROOT)


def tree_files():
    out = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith('.'))
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                out.append(rel(os.path.join(d, f)))
    return out


def read_includes(path):
    incs = []
    with open(os.path.join(ROOT, path), encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if m:
                incs.append((n, m.group(1)))
    return incs


def cuda_system_includes(path):
    """(line, header) for each CUDA system header path includes with #include <...>."""
    out = []
    with open(os.path.join(ROOT, path), encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            m = SYSTEM_INCLUDE_RE.match(line)
            if m and CUDA_SYSTEM_RE.match(m.group(1)):
                out.append((n, m.group(1)))
    return out


def resolve(path, name, by_name):
    """The tree path an #include "name" in `path` reaches, or None (a generated or outside header)."""
    beside = os.path.normpath(os.path.join(os.path.dirname(path), name))
    if os.path.isfile(os.path.join(ROOT, beside)):
        return beside
    if '/' in name:  # a path from an include root: match it at the end of a tree path
        cands = [p for p in by_name.get(os.path.basename(name), []) if p.endswith('/' + name) or p == name]
    else:
        cands = by_name.get(name, [])
    if len(cands) == 1:
        return cands[0]
    # Several headers share the name: prefer the one nearest to the includer.
    best = sorted(cands, key=lambda c: -len(os.path.commonprefix([c, path])))
    return best[0] if best else None


def folder_rules():
    """{folder: [allowed prefixes]} from every README.md's 'May include:' line."""
    rules = {}
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith('.')]
        if 'README.md' not in files:
            continue
        with open(os.path.join(d, 'README.md'), encoding='utf-8') as f:
            for line in f:
                m = RULE_RE.match(line.strip())
                if m:
                    items = [x.strip().strip('.').strip('`').strip() for x in m.group(1).split(',')]
                    rules[rel(d)] = [x.split()[0] for x in items if x and x.lower() != 'nothing']
                    break
    return rules


def rule_for(path, rules):
    d = os.path.dirname(path)
    while True:
        if d in rules:
            return d, rules[d]
        if d in ('', '.'):
            return None, None
        d = os.path.dirname(d)


def allowed(path, target, rules):
    folder = os.path.dirname(path)
    if target.startswith(folder + '/') or os.path.dirname(target) == folder:
        return True
    rdir, allow = rule_for(path, rules)
    if allow is None:
        return True
    if target.startswith(rdir + '/'):  # the rule's own folder and the folders below it
        return True
    for a in allow:
        if a.endswith('/') and target.startswith(a):
            return True
        if target == a:
            return True
    return False


def sealed(path, target):
    """The sealed room that target lies in for path's room, or None."""
    for room in SEALED.get(room_of(path), ()):
        if target.startswith(room + '/'):
            return room
    return None


def module_of(path):
    return os.path.splitext(path)[0]


def layer_of(path):
    for layer, (_, rooms) in LAYERS.items():
        for room in rooms:
            if path == room or path.startswith(room + '/'):
                return layer
    return None


def room_of(path):
    for _, rooms in LAYERS.values():
        for room in rooms:
            if path.startswith(room + '/'):
                return room
    return None


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def call_edges(objdir):
    """Module -> modules it calls, from the defined and undefined symbols of objdir's objects."""
    module = {}
    for d, _, files in os.walk(objdir):
        for f in files:
            if not f.endswith('.o'):
                continue
            obj = os.path.join(d, f)
            src = module_of(os.path.relpath(obj, objdir))
            if layer_of(src) is None or not os.path.isfile(os.path.join(ROOT, src + '.c')):
                continue  # not the library's, or left behind by a source that moved
            module[obj] = src
    defs, undefs = {}, defaultdict(set)
    if module:
        # One nm for every object: "object: symbol type [value size]" per global symbol.
        nm = subprocess.run(['nm', '-A', '-g', '--format=posix'] + sorted(module),
                            capture_output=True, text=True, check=True).stdout
        for line in nm.splitlines():
            obj, _, rest = line.partition(': ')
            parts = rest.split()
            if obj not in module or len(parts) < 2:
                continue
            if parts[1] in ('U', 'w', 'v'):  # undefined, strong or weak
                undefs[module[obj]].add(parts[0])
            else:
                defs[parts[0]] = module[obj]
    edges = defaultdict(set)
    for m, syms in undefs.items():
        for s in syms:
            t = defs.get(s)
            if t is not None and t != m:
                edges[m].add(t)
    return edges


def longest_chain(files, inc):
    """The longest chain of includes from a source file through headers (a header is entered once)."""
    memo = {}

    def walk(f, seen):
        if f in memo:
            return memo[f]
        best = [f]
        for t in sorted(inc.get(f, ())):
            if t in seen:
                continue
            c = walk(t, seen | {t})
            if len(c) + 1 > len(best):
                best = [f] + c
        memo[f] = best
        return best

    chains = [walk(f, {f}) for f in files if f.endswith(('.c', '.cu', '.cpp'))]
    return max(chains, key=len) if chains else []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--objects', help="a build's object folder (build/obj): check calls too")
    ap.add_argument('--report', action='store_true', help='print the tree\'s shape instead of checking')
    args = ap.parse_args()

    files = tree_files()
    by_name = defaultdict(list)
    for f in files:
        if f.endswith(('.h', '.cuh', '.c')):
            by_name[os.path.basename(f)].append(f)
    rules = folder_rules()
    inc = defaultdict(set)
    violations = []
    for f in files:
        if room_of(f) in SEALED_SYSTEM:
            for n, name in cuda_system_includes(f):
                violations.append(f'{f}:{n}: includes <{name}>, a CUDA header: {room_of(f)} reaches CUDA only '
                                  'through src/core/placement.h')
        for n, name in read_includes(f):
            t = resolve(f, name, by_name)
            if t is None:
                continue
            inc[f].add(t)
            if not allowed(f, t, rules):
                rdir, _ = rule_for(f, rules)
                violations.append(f'{f}:{n}: includes {t}, which {rdir}/README.md does not allow')
            if sealed(f, t):
                violations.append(f'{f}:{n}: includes {t}: {room_of(f)} reaches {sealed(f, t)} only through '
                                  'src/core/placement.h')

    lib = [f for f in files if layer_of(f) is not None]
    modules = {module_of(f) for f in lib}
    mod_edges = defaultdict(set)
    for f in lib:
        for t in inc[f]:
            if layer_of(t) is not None and module_of(t) != module_of(f):
                mod_edges[module_of(f)].add(module_of(t))
    graphs = [('includes', mod_edges)]
    if args.objects:
        graphs.append(('calls', call_edges(args.objects)))
        merged = defaultdict(set)
        for _, g in graphs:
            for k, v in g.items():
                merged[k] |= v
        graphs.append(('includes and calls', merged))

    if args.report:
        per = defaultdict(int)
        for f in files:
            per[os.path.dirname(f)] += 1
        print('files per folder (C, C++ and CUDA sources and headers):')
        for d in sorted(per):
            print(f'  {d + "/":40s} {per[d]:4d}')
        for what, g in graphs:
            comps = sccs(modules | set(g), g)
            print(f'circles of modules through {what}: {len(comps)}')
            for c in comps:
                rooms = sorted({room_of(m) for m in c})
                print(f'  {len(c)} modules, layers {sorted({layer_of(m) for m in c})}, rooms {rooms}: {" ".join(c)}')
        chain = longest_chain(lib, inc)
        print(f'longest include chain in the library ({len(chain)} files): {" -> ".join(chain)}')
        return 0

    for what, g in graphs[:2]:
        for m in sorted(g):
            for t in sorted(g[m]):
                lm, lt = layer_of(m), layer_of(t)
                if lm != lt and LAYERS[lm][0] <= LAYERS[lt][0]:
                    violations.append(f'{m} ({lm}) reaches {t} ({lt}) through {what}: layers depend downward only')
        for c in sccs(modules | set(g), g):
            layers = sorted({layer_of(m) for m in c})
            if len(layers) > 1:
                violations.append(f'a circle of {what} spans {", ".join(layers)}: {" ".join(c)}')
    dup = {n: p for n, p in by_name.items() if n.endswith('.h') and len([x for x in p if layer_of(x)]) > 1}
    for n, p in sorted(dup.items()):
        violations.append(f'header name {n} is not unique in the library: {" ".join(p)}')
    for v in violations:
        print(v)
    checked = len(files)
    if violations:
        print(f'check-includes: {len(violations)} violation(s) in {checked} files')
        return 1
    print(f'check-includes: {checked} files follow their folders\' rules; no circle spans two layers')
    return 0


if __name__ == '__main__':
    sys.exit(main())
