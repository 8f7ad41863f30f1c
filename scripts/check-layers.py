#!/usr/bin/env python3
"""check-layers.py: the module rules of docs/architecture.md, checked on
the C sources (run by tests/integration/test_layers.py; by hand:
`python3 scripts/check-layers.py [SRCDIR]`).

1. A folder includes only the folders the table LAYERS allows
   ("#include "dir/file.h"" lines; <system> headers and config.h are not
   modules). engine/ never includes web/, web/ never engine/, storage/,
   journal/ and kube/ never engine/, base/ nothing but base/.
2. No include cycle between files of different folders, and none at all
   among the files of engine/ (its controllers form layers too: claim.h
   at the bottom, server.c at the top). A file and the header of the same
   name are one module; a header with no .c of its own (a folder's
   private header such as kube/internal.h) belongs to the modules that
   include it.
3. No function in engine/ longer than MAX_FUNCTION_LINES lines (from the
   line with its opening brace to the line with its closing brace, the
   style of the tree: name at column 0, braces alone at column 0).

Prints one line per violation, "file:line: what", and exits 1 if there
is any, else prints a summary and exits 0. Python 3 standard library.
"""
import os
import re
import sys

# folder -> folders it may include (besides itself)
LAYERS = {
    "base": set(),
    "journal": {"base"},
    "storage": {"base"},
    "kube": {"base"},
    "web": {"base"},
    "engine": {"kube", "storage", "journal", "base"},
    "cmd": {"engine", "web", "kube", "storage", "journal", "base", "schema"},
    "plugins": {"base"},        # separate programs: no engine, no credentials
}
NO_CYCLES_WITHIN = {"engine"}
MAX_FUNCTION_LINES = 120
LENGTH_CHECKED = {"engine"}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FUNC_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\(")


def sources(root):
    """(relative path, lines) of every .c/.h/.def file of the checked folders."""
    out = []
    for folder in sorted(LAYERS):
        d = os.path.join(root, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h", ".def")):
                with open(os.path.join(d, name), errors="replace") as f:
                    out.append(("%s/%s" % (folder, name), f.read().split("\n")))
    return out


def includes(files):
    """[(file, line number, included path)] of the module includes."""
    out = []
    for rel, lines in files:
        for n, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if m and "/" in m.group(1):
                out.append((rel, n, m.group(1)))
    return out


def check_layers(incs):
    bad = []
    for rel, n, target in incs:
        src, dst = rel.split("/")[0], target.split("/")[0]
        if dst != src and dst not in LAYERS[src]:
            allowed = ", ".join("%s/" % x for x in sorted(LAYERS[src] | {src}))
            bad.append("%s:%d: includes %s: %s/ may include only %s "
                       "(docs/architecture.md)" % (rel, n, target, src, allowed))
    return bad


def module_graph(files, incs):
    """Module (path without extension) -> {module: (file, line)} it includes."""
    have_c = {rel[:-2] for rel, _ in files if rel.endswith(".c")}
    graph = {}
    for rel, n, target in incs:
        a = rel.rsplit(".", 1)[0]
        b = target.rsplit(".", 1)[0]
        if a != b and target.endswith(".h"):
            graph.setdefault(a, {}).setdefault(b, (rel, n))
    # A header-only module (no .c of its own) is folded into its includers.
    for h in [m for m in graph if m not in have_c]:
        for a in list(graph):
            if h in graph[a] and a != h:
                for b, where in graph.get(h, {}).items():
                    if b != a:
                        graph[a].setdefault(b, graph[a][h])
    for a in list(graph):
        for h in [b for b in graph[a] if b not in have_c and b in graph]:
            del graph[a][h]
    return graph


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_cycles(graph):
    bad = []
    for comp in cycles(graph):
        folders = {m.split("/")[0] for m in comp}
        if len(folders) == 1 and not folders & NO_CYCLES_WITHIN:
            continue
        edges = ["%s:%d -> %s" % (graph[a][b][0], graph[a][b][1], b)
                 for a in comp for b in sorted(graph.get(a, {})) if b in comp]
        bad.append("%s: include cycle among %s (%s)" % (
            edges[0].split(" ")[0], ", ".join(comp), "; ".join(edges)))
    return bad


def functions(lines):
    """(name, first line, length) of each function defined in a file."""
    out, name, start = [], None, 0
    for n, line in enumerate(lines, 1):
        if FUNC_NAME_RE.match(line):
            name = line.split("(")[0]
        elif line == "{" and name is not None:
            start = n
        elif line == "}" and start:
            out.append((name, start, n - start + 1))
            name, start = None, 0
    return out


def check_lengths(files):
    bad, count = [], 0
    for rel, lines in files:
        if rel.split("/")[0] not in LENGTH_CHECKED or not rel.endswith(".c"):
            continue
        for name, start, length in functions(lines):
            count += 1
            if length > MAX_FUNCTION_LINES:
                bad.append("%s:%d: function %s is %d lines long (at most %d "
                           "in %s/)" % (rel, start, name, length,
                                        MAX_FUNCTION_LINES, rel.split("/")[0]))
    return bad, count


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    files = sources(root)
    incs = includes(files)
    graph = module_graph(files, incs)
    bad = check_layers(incs) + check_cycles(graph)
    longs, nfunc = check_lengths(files)
    bad += longs
    for line in bad:
        print(line)
    if bad:
        print("%d violation(s) of the module rules" % len(bad))
        return 1
    print("ok: %d files, %d module includes, %d modules, %d functions in %s"
          % (len(files), len(incs), len(graph), nfunc,
             ", ".join("%s/" % x for x in sorted(LENGTH_CHECKED))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
