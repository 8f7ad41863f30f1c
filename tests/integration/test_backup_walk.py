"""Backups that are complete on real clusters (issue 17): what the walk lists,
how it asks, and what it does when lists expire or break.

Each case runs `cairn server` against kubesim, makes a backup and checks
the tarball entry by entry against what the API serves; kubesim's request
log shows what the server asked for.
"""
import gzip
import json
import os
import re
import tarfile
import threading
import time

from cairntest import BIN, case, main, wait_for, CheckFailed

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def world(t, extra=()):
    sim = t.kubesim(extra=list(extra))
    sim.install_crds(NS)
    root = t.mkdir("store")
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"}, "config": {"path": root},
                 "default": True}})
    return sim, root


def server(t, sim, extra=()):
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                    "--server-id", "s1", "--journal", t.path("journal.db"),
                    "--retry-period", "200ms", "--log-level", "info"] + list(extra),
                   name="server")


def ns(sim, name):
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name}})


def run_backup(t, sim, srv, name, spec, timeout=120, on_status=None):
    """Create a Backup and poll it to a final phase; on_status sees each status."""
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name, "namespace": NS}, "spec": spec})

    def done():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        b = sim.ok("GET", "%s/%s" % (BK, name))
        st = b.get("status", {})
        if on_status is not None:
            on_status(st)
        return b if st.get("phase") in FINAL else None
    return wait_for(done, timeout, "backup %s" % name, interval=0.05)


def find_file(root, fname):
    for d, _, files in os.walk(root):
        if fname in files and ".cairn-uploads" not in d:
            return os.path.join(d, fname)
    raise CheckFailed("%s not found under %s" % (fname, root))


def tar_items(root, name):
    """{legacy path: parsed JSON} of the tarball; fails on a duplicate entry."""
    out, seen = {}, set()
    with tarfile.open(find_file(root, name + ".tar.gz"), "r:gz") as tf:
        for m in tf.getmembers():
            if m.name in seen:
                raise CheckFailed("entry twice in the tarball: %s" % m.name)
            seen.add(m.name)
            if m.name.startswith("resources/") and "-preferredversion/" not in m.name:
                out[m.name] = json.loads(tf.extractfile(m).read())
    return out


def backup_log(root, name):
    with gzip.open(find_file(root, name + "-logs.gz")) as f:
        return f.read().decode()


def results(root, name):
    with gzip.open(find_file(root, name + "-results.gz")) as f:
        return json.load(f)


@case
def one_namespace_asks_only_about_it(t):
    """100k ConfigMaps elsewhere: a backup of namespace app lists only app,
    and its progress total is its item count from the first write on."""
    sim, root = world(t)
    for n in ("app", "big-a", "big-b"):
        ns(sim, n)
    for n in ("big-a", "big-b"):
        sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 50000,
                 name="cm-{i:06d}", namespace=n)
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 120,
             name="cm-{i:04d}", namespace="app")
    sim.bulk({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}}, 7,
             name="s-{i:02d}", namespace="app")
    srv = server(t, sim)
    wait_for(lambda: sim.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/cairn-s1" % NS)[0]
             == 200, 20, "the server's Lease")
    seq = sim.requests()[-1]["seq"]
    totals = []

    def seen(st):
        if st.get("phase") == "InProgress" and "progress" in st:
            totals.append(st["progress"].get("totalItems"))
    t0 = time.monotonic()
    b = run_backup(t, sim, srv, "app-only", {"includedNamespaces": ["app"]}, on_status=seen)
    took = time.monotonic() - t0
    t.eq(b["status"]["phase"], "Completed", "phase")
    items = tar_items(root, "app-only")
    cms = [k for k in items if k.startswith("resources/configmaps/namespaces/app/")]
    t.eq(len(cms), 120, "ConfigMaps of app")
    t.check("resources/namespaces/cluster/app.json" in items, "the Namespace object")
    t.check(not [k for k in items if "/big-" in k], "items of other namespaces")
    n = b["status"]["progress"]["itemsBackedUp"]
    t.eq(n, len(items), "itemsBackedUp is the tarball's item count")
    t.eq(b["status"]["progress"]["totalItems"], n, "final totalItems")
    t.check(totals, "no InProgress status with progress was seen")
    t.eq(sorted(set(totals)), [n], "totalItems while InProgress (always the item count)")
    # What the server asked: discovery, its own objects, and app.
    mine = re.compile(r"^/(api|apis/[^/]+)/[^/]+/namespaces/(%s|app)(/|$)" % NS)
    disc = re.compile(r"^/(api|apis)(/[^/]+){0,2}$")
    other = [(q["method"], q["path"], q["query"]) for q in sim.requests()
             if q["seq"] > seq and not q["path"].startswith("/_sim") and
             not mine.match(q["path"]) and not disc.match(q["path"])]
    t.eq(other, [], "requests outside namespace app (and discovery and cairn's own)")
    app = [q for q in sim.requests() if q["seq"] > seq and "/namespaces/app/" in q["path"]]
    t.check(app, "no request for namespace app")
    print("# backup %.2fs, %d requests for namespace app; totals seen: %s" %
          (took, len(app), sorted(set(totals))))


main()
