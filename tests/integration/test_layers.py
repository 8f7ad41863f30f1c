"""The module rules of docs/architecture.md hold (scripts/check-layers.py):
which folder may include which, no include cycle between folders nor
inside engine/, no function over 120 lines in engine/. The checker is
run on the source tree, and on small trees that break each rule, to show
it can fail and says where."""
import os
import subprocess
import sys

from cairntest import SRCDIR, case, main

CHECK = os.path.join(SRCDIR, "scripts", "check-layers.py")


def run(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True,
                          timeout=60)


def tree(t, name, files):
    """A source tree under the case's directory: {path: text}."""
    root = t.mkdir(name)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    return root


def inc(*paths):
    return "".join('#include "%s"\n' % p for p in paths)


@case
def source_tree_follows_the_layers(t):
    r = run(SRCDIR)
    t.eq(r.returncode, 0, "module rules broken:\n%s%s" % (r.stdout, r.stderr))
    t.check(r.stdout.startswith("ok: "), r.stdout)


@case
def forbidden_includes_are_named(t):
    root = tree(t, "bad", {
        "engine/status.c": '#include "config.h"\n' + inc("engine/status.h", "web/web.h"),
        "engine/status.h": inc("base/err.h"),
        "web/web.c": "\n\n" + inc("web/web.h", "engine/status.h"),
        "web/web.h": "",
        "storage/store.c": inc("engine/bsl.h"),
        "journal/journal.c": inc("engine/claim.h"),
        "base/err.h": "",
        "base/log.c": inc("kube/kube.h"),
    })
    r = run(root)
    t.eq(r.returncode, 1, "a tree with forbidden includes: %s" % r.stdout)
    for line in ("engine/status.c:3: includes web/web.h",
                 "web/web.c:4: includes engine/status.h",
                 "storage/store.c:1: includes engine/bsl.h",
                 "journal/journal.c:1: includes engine/claim.h",
                 "base/log.c:1: includes kube/kube.h"):
        t.check(line in r.stdout, "%r reported: %s" % (line, r.stdout))
    t.check("engine/ may include only base/, engine/, journal/, kube/, storage/"
            in r.stdout, r.stdout)


@case
def include_cycles_are_found(t):
    # gc -> volumes -> sync -> gc inside engine/ (issue 24's cycle); a
    # cycle inside another folder is that folder's business.
    root = tree(t, "cycle", {
        "engine/gc.c": inc("engine/gc.h", "engine/volumes.h"),
        "engine/gc.h": "",
        "engine/volumes.c": inc("engine/volumes.h", "engine/sync.h"),
        "engine/volumes.h": "",
        "engine/sync.c": inc("engine/sync.h", "engine/gc.h"),
        "engine/sync.h": "",
        "kube/kube.c": inc("kube/kube.h", "kube/internal.h"),
        "kube/internal.h": inc("kube/kube.h"),
        "kube/kube.h": "",
        "base/a.c": inc("base/a.h", "base/b.h"),
        "base/a.h": "",
        "base/b.c": inc("base/b.h", "base/a.h"),
        "base/b.h": "",
    })
    r = run(root)
    t.eq(r.returncode, 1, "a tree with an engine cycle: %s" % r.stdout)
    t.check("include cycle among engine/gc, engine/sync, engine/volumes" in r.stdout, r.stdout)
    t.check("engine/gc.c:2 -> engine/volumes" in r.stdout, "the edges are named: %s" % r.stdout)
    t.check("kube/" not in r.stdout and "base/" not in r.stdout,
            "a private header and a cycle inside base/ are not reported: %s" % r.stdout)
    t.eq(len(r.stdout.strip().splitlines()), 2, "one cycle, one summary: %s" % r.stdout)


@case
def long_functions_in_engine_are_refused(t):
    body = "".join("\tx += %d;\n" % i for i in range(119))
    ok = "int\nshort_enough(int x)\n{\n%s}\n" % body            # 121 lines with the braces
    long = "static int\ntoo_long(int x,\n    int y)\n{\n%s\tx++;\n}\n" % body   # 122
    root = tree(t, "long", {
        "engine/a.c": ok.replace("{\n\tx += 0;\n", "{\n"),       # 120
        "engine/b.c": "/* b */\n" + long,
        "cmd/c.c": long,                                         # not engine/
    })
    r = run(root)
    t.eq(r.returncode, 1, "a 122-line function in engine/: %s" % r.stdout)
    t.check("engine/b.c:5: function too_long is 122 lines long (at most 120 in engine/)"
            in r.stdout, r.stdout)
    t.check("short_enough" not in r.stdout and "cmd/c.c" not in r.stdout, r.stdout)


main()
