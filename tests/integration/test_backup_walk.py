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
import urllib.request

from bkworld import BK, FINAL, NS, World, find_file
from cairntest import case, main, wait_for, CheckFailed


def world(t, extra=()):
    """kubesim (with extra flags), cairn's CRDs, an fs location; (World, root)."""
    w = World(t, sim=t.kubesim(extra=list(extra)))
    root = t.mkdir("store")
    w.fs_location(root)
    return w, root


def run_backup(w, srv, name, spec, timeout=120, on_status=None):
    """Create a Backup and poll it to a final phase; on_status sees each status."""
    w.create_backup(name, spec)

    def done():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        b = w.backup(name)
        st = b.get("status", {})
        if on_status is not None:
            on_status(st)
        return b if st.get("phase") in ("Completed", "PartiallyFailed", "Failed",
                                        "FailedValidation") else None
    return wait_for(done, timeout, "backup %s" % name, interval=0.05)


def watch_statuses(sim, name, timeout=120):
    """Every status Backup name is written with, from a watch opened now
    (a poll can miss a phase that lasts a few milliseconds); returns
    (thread, statuses): the thread ends at the first final phase."""
    sts, ready = [], threading.Event()
    path = "%s?watch=1&fieldSelector=metadata.name%%3D%s&timeoutSeconds=%d" % (BK, name, timeout)

    def run():
        req = urllib.request.Request(sim.url + path,
                                     headers={"Authorization": "Bearer " + sim.token})
        with urllib.request.urlopen(req, context=sim._ctx, timeout=timeout + 10) as r:
            ready.set()
            for line in r:
                if not line.strip():
                    continue
                st = json.loads(line)["object"].get("status", {})
                sts.append(st)
                if st.get("phase") in FINAL:
                    return
    th = threading.Thread(target=run, daemon=True)
    th.start()
    if not ready.wait(10):
        raise CheckFailed("the watch of backup %s did not open" % name)
    return th, sts


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
    w, root = world(t)
    sim = w.sim
    for n in ("app", "big-a", "big-b"):
        w.namespace(n)
    for n in ("big-a", "big-b"):
        sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 50000,
                 name="cm-{i:06d}", namespace=n)
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 120,
             name="cm-{i:04d}", namespace="app")
    sim.bulk({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}}, 7,
             name="s-{i:02d}", namespace="app")
    srv = w.server()
    wait_for(lambda: sim.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/cairn-s1" % "cairn-system")[0]
             == 200, 20, "the server's Lease")
    seq = sim.requests()[-1]["seq"]
    th, sts = watch_statuses(sim, "app-only")
    t0 = time.monotonic()
    b = run_backup(w, srv, "app-only", {"includedNamespaces": ["app"]})
    took = time.monotonic() - t0
    th.join(10)
    totals = [st["progress"].get("totalItems") for st in sts
              if st.get("phase") == "InProgress" and "progress" in st]
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
    mine = re.compile(r"^/(api|apis/[^/]+)/[^/]+/namespaces/(cairn-system|app)(/|$)")
    disc = re.compile(r"^/(api|apis)(/[^/]+){0,2}$")
    other = [(q["method"], q["path"], q["query"]) for q in sim.requests()
             if q["seq"] > seq and not q["path"].startswith("/_sim") and
             not mine.match(q["path"]) and not disc.match(q["path"])]
    t.eq(other, [], "requests outside namespace app (and discovery and cairn's own)")
    app = [q for q in sim.requests() if q["seq"] > seq and "/namespaces/app/" in q["path"]]
    t.check(app, "no request for namespace app")
    print("# backup %.2fs, %d requests for namespace app; totals seen: %s" %
          (took, len(app), sorted(set(totals))))


def crd(sim, group, plural, kind, version, scope="Namespaced"):
    sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, group)},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": plural, "singular": plural[:-1], "kind": kind,
                           "listKind": kind + "List"},
                 "versions": [{"name": version, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}})
    wait_for(lambda: sim.get("/apis/%s/%s/%s" % (group, version, plural))[0] == 200, 10,
             "CRD %s.%s served" % (plural, group))


def backupable(sim, failed=()):
    """What a complete backup holds, from the API alone: client-go's
    ServerPreferredResources (each resource in its group's preferred
    version, else the first version serving it), resources with list,
    create, get and delete (Velero), core events for both events groups.
    {legacy tarball path: object}."""
    groups = [{"name": "", "versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}]
    groups += sim.ok("GET", "/apis")["groups"]
    chosen = {}
    for g in groups:
        pref = g["preferredVersion"]["version"]
        for v in g["versions"]:
            gv = "%s/%s" % (g["name"], v["version"]) if g["name"] else v["version"]
            if gv in failed:
                continue
            rl = sim.ok("GET", "/apis/" + gv if g["name"] else "/api/v1")
            for r in rl["resources"]:
                if "/" in r["name"]:
                    continue
                key = (g["name"], r["name"])
                if key not in chosen or v["version"] == pref:
                    chosen[key] = (v["version"], r)
    want = {}
    for (g, res), (v, r) in chosen.items():
        if not {"list", "create", "get", "delete"} <= set(r["verbs"]):
            continue
        if (g, res) == ("events.k8s.io", "events"):
            continue
        items = sim.ok("GET", "/apis/%s/%s/%s" % (g, v, res) if g else "/api/v1/" + res)["items"]
        for o in items:
            md = o["metadata"]
            if md.get("deletionTimestamp"):
                continue
            base = "resources/%s%s/" % (res, "." + g if g else "")
            path = base + ("namespaces/%s/%s.json" % (md["namespace"], md["name"])
                           if r["namespaced"] else "cluster/%s.json" % md["name"])
            want[path] = o
    return want


def same_object(got, api):
    """The tarball's item is the API's object (kind/apiVersion aside: real
    API servers leave them out of list items)."""
    a = {k: v for k, v in api.items() if k not in ("kind", "apiVersion")}
    g = {k: v for k, v in got.items() if k not in ("kind", "apiVersion")}
    return a == g


def check_entry_by_entry(t, items, want, changing=("backups.cairn.io", "leases.coordination")):
    t.eq(sorted(set(items) - set(want)), [], "in the backup, not backup-able from the API")
    t.eq(sorted(set(want) - set(items)), [], "backup-able from the API, not in the backup")
    for path, obj in want.items():
        if any(c in path for c in changing):
            continue	# written while the backup ran
        t.check(same_object(items[path], obj), "%s differs from the API's:\n%s\n%s" %
                (path, json.dumps(items[path])[:600], json.dumps(obj)[:600]))


@case
def every_backupable_object_once(t):
    """A non-preferred-only kind, metrics.k8s.io (list-only), both events
    groups, componentstatuses, an API group answering 503: every object a
    backup can restore is in it once, entry by entry as the API serves it;
    the skipped ones are named; the unavailable group makes it
    PartiallyFailed, named (Completed before the group went down)."""
    w, root = world(t)
    sim = w.sim
    w.namespace("shop")
    sim.ok("POST", "/api/v1/namespaces/shop/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}})
    sim.ok("POST", "/api/v1/namespaces/shop/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    sim.ok("POST", "/api/v1/namespaces/shop/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "shop"},
        "reason": "Started", "message": "started", "type": "Normal"})
    # one group, two versions: gateways in v1 (preferred), envoyfilters only in v1alpha3
    crd(sim, "mesh.example.io", "gateways", "Gateway", "v1")
    crd(sim, "mesh.example.io", "envoyfilters", "EnvoyFilter", "v1alpha3")
    sim.ok("POST", "/apis/mesh.example.io/v1/namespaces/shop/gateways", {
        "apiVersion": "mesh.example.io/v1", "kind": "Gateway", "metadata": {"name": "gw"}})
    sim.ok("POST", "/apis/mesh.example.io/v1alpha3/namespaces/shop/envoyfilters", {
        "apiVersion": "mesh.example.io/v1alpha3", "kind": "EnvoyFilter", "metadata": {"name": "ef"}})
    # a group whose API service will go down
    crd(sim, "custom.metrics.example.io", "widgets", "Widget", "v1")
    sim.ok("POST", "/apis/custom.metrics.example.io/v1/namespaces/shop/widgets", {
        "apiVersion": "custom.metrics.example.io/v1", "kind": "Widget", "metadata": {"name": "w"}})
    srv = w.server()

    b = run_backup(w, srv, "whole", {})
    t.eq(b["status"]["phase"], "Completed", "phase with every group up (%s)" %
         b["status"].get("conditions"))
    items = tar_items(root, "whole")
    check_entry_by_entry(t, items, backupable(sim))
    t.check("resources/envoyfilters.mesh.example.io/namespaces/shop/ef.json" in items,
            "the kind served only in v1alpha3")
    with tarfile.open(find_file(root, "whole.tar.gz"), "r:gz") as tf:
        names = tf.getnames()
    t.check("resources/envoyfilters.mesh.example.io/v1alpha3-preferredversion/namespaces/shop/ef.json"
            in names, "its version folder")
    t.check("resources/events/namespaces/shop/web.1.json" in items, "the event, once (core)")
    t.check(not [k for k in items if "metrics.k8s.io" in k or "componentstatuses" in k or
                 "events.events.k8s.io" in k], "list-only types and the events twin")
    log = backup_log(root, "whole")
    t.check(re.search(r"not backed up: .*componentstatuses \(list get\).*pods\.metrics\.k8s\.io "
                      r"\(list get\).*list, create, get and delete", log),
            "log names the list-only types: %s" % log[-3000:])
    t.check("events.events.k8s.io (the same objects as events)" in log, "log names the twin")
    # restores resolve the kind the same way: the EnvoyFilter comes back
    sim.ok("DELETE", "/apis/mesh.example.io/v1alpha3/namespaces/shop/envoyfilters/ef")
    w.create_restore("back", "whole", {"includedResources": ["envoyfilters"]})
    r = w.wait_restore("back", srv=srv)
    t.eq(r["status"]["phase"], "Completed", "restore of the v1alpha3-only kind (%s)" % r["status"])
    t.eq(sim.get("/apis/mesh.example.io/v1alpha3/namespaces/shop/envoyfilters/ef")[0], 200,
         "the EnvoyFilter restored")

    # The aggregated API's service goes down: its group-version answers 503.
    sim.faults({"groupVersion": "custom.metrics.example.io/v1", "status": 503})
    t0 = time.monotonic()
    b = run_backup(w, srv, "degraded", {})
    took = time.monotonic() - t0
    st = b["status"]
    t.eq(st["phase"], "PartiallyFailed", "phase with a group down")
    ready = [c for c in st.get("conditions", []) if c["type"] == "Ready"][0]
    t.check("custom.metrics.example.io/v1" in ready["message"], "Ready names the group: %s" % ready)
    t.check(st.get("warnings", 0) >= 1 and st.get("errors", 0) >= 1, "counts: %s" % st)
    res = results(root, "degraded")
    t.check(any("custom.metrics.example.io/v1" in w for w in res["warnings"]["velero"]),
            "warning: %s" % res["warnings"])
    t.check("custom.metrics.example.io/v1 is unavailable" in backup_log(root, "degraded"),
            "log names the group")
    items = tar_items(root, "degraded")
    check_entry_by_entry(t, items, backupable(sim, failed={"custom.metrics.example.io/v1"}))
    print("# the degraded backup took %.2fs" % took)


class Churn:
    """Creates and deletes ConfigMaps of a namespace on a thread while a
    backup runs: new names fall between the existing ones (key order),
    deleted ones are picked across the whole range."""

    def __init__(self, sim, ns, names, period=0.03):
        self.sim, self.ns, self.names, self.period = sim, ns, list(names), period
        self.created, self.deleted = set(), set()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        while not self.stop.is_set():
            name = "%s-new" % self.names[(i * 37) % len(self.names)]
            victim = self.names[(i * 53 + 11) % len(self.names)]
            self.sim.request("POST", "/api/v1/namespaces/%s/configmaps" % self.ns, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                "data": {"k": "new"}})
            self.created.add(name)
            if victim not in self.deleted:
                self.sim.request("DELETE", "/api/v1/namespaces/%s/configmaps/%s" % (self.ns, victim))
                self.deleted.add(victim)
            i += 1
            self.stop.wait(self.period)

    def __enter__(self):
        self.th.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.th.join()


def check_churned(t, items, ns, initial, churn):
    """Every object that existed throughout is in the backup once, and
    nothing is there that never existed."""
    got = {k.rsplit("/", 1)[1][:-5] for k in items
           if k.startswith("resources/configmaps/namespaces/%s/" % ns)}
    throughout = set(initial) - churn.deleted
    t.eq(sorted(throughout - got), [], "objects that existed throughout, missing")
    t.eq(sorted(got - set(initial) - churn.created), [], "objects that never existed")
    t.check(len(churn.deleted) > 20 and len(churn.created) > 20,
            "churn during the backup: %d created, %d deleted" % (len(churn.created),
                                                                 len(churn.deleted)))


@case
def lists_slower_than_the_token_lifetime(t):
    """Continue tokens live 1 s and every list page takes 0.5 s while
    ConfigMaps come and go: the lists go on past each 410, nothing that
    existed throughout is lost, nothing is there twice."""
    w, root = world(t, extra=["--continue-ttl", "1"])
    sim = w.sim
    w.namespace("bulk")
    n = 4000
    initial = ["cm-%06d" % i for i in range(n)]
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, n,
             name="cm-{i:06d}", namespace="bulk")
    sim.faults({"method": "GET", "path": "^/api/v1/namespaces/bulk/configmaps$",
                "query": "limit=500", "delay": 0.5, "count": 1000})
    srv = w.server()
    seq = sim.requests()[-1]["seq"]
    with Churn(sim, "bulk", initial) as churn:
        b = run_backup(w, srv, "slow", {"includedNamespaces": ["bulk"]}, timeout=120)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("conditions"))
    items = tar_items(root, "slow")	# fails on an entry written twice
    check_churned(t, items, "bulk", initial, churn)
    gone = [q for q in sim.requests() if q["seq"] > seq and q["status"] == 410 and
            "configmaps" in q["path"]]
    t.check(gone, "no continue token expired: the case tests nothing")
    log = backup_log(root, "slow")
    t.check("expired" in log and "nothing is lost or written twice" in log, "log: %s" % log[-2000:])
    print("# %d tokens expired; %d created and %d deleted during the backup" %
          (len(gone), len(churn.created), len(churn.deleted)))



@case
def names_that_match_nothing_warn(t):
    """includedNamespaces naming a namespace that does not exist, a pattern
    matching none, includedResources naming no served resource: the backup
    says so in status, results and log instead of being silently empty."""
    w, root = world(t)
    sim = w.sim
    w.namespace("shop")
    sim.ok("POST", "/api/v1/namespaces/shop/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}})
    srv = w.server()
    b = run_backup(w, srv, "typos", {"includedNamespaces": ["shop", "shoop", "prod-*"],
                                          "includedResources": ["configmaps", "namespaces",
                                                                "confgimaps"]})
    st = b["status"]
    t.eq(st["phase"], "Completed", "phase")
    t.eq(st.get("warnings"), 3, "warnings (%s)" % st)
    warns = results(root, "typos")["warnings"]["velero"]
    for want in ('namespace "shoop" does not exist', 'pattern "prod-*" matches no namespace',
                 'entry "confgimaps" names no resource'):
        t.check(any(want in w for w in warns), "warning %r: %s" % (want, warns))
        # the log's msg= is a JSON string: quotes escaped
        t.check(json.dumps(want)[1:-1] in backup_log(root, "typos"), "log line %r" % want)
    items = tar_items(root, "typos")
    t.eq(sorted(items), ["resources/configmaps/namespaces/shop/cfg.json",
                         "resources/namespaces/cluster/shop.json"], "items")


@case
def server_watches_back_off_and_resume(t):
    """The server's watches of Backups ask for bookmarks, start again at the
    last resourceVersion, and back off after ERROR events (a 500 of the
    watch cache) instead of reconnecting at once."""
    w, root = world(t)
    sim = w.sim
    sim.faults({"watchError": 500, "path": "/backups$", "count": 1000})
    seq = sim.requests()[-1]["seq"]
    srv = w.server()
    time.sleep(4)
    watches = [q for q in sim.requests() if q["seq"] > seq and q.get("watch") and
               q["path"].endswith("/backups")]
    t.check(2 <= len(watches) <= 12, "watches of Backups in 4 s with an ERROR each: %d" %
            len(watches))
    t.check(all("allowWatchBookmarks=true" in q["query"] for q in watches),
            "bookmarks asked: %s" % [q["query"] for q in watches])
    # once the API server is well again, a new Backup is still picked up
    sim.clear_faults()
    b = run_backup(w, srv, "after", {"includedNamespaces": ["cairn-system"]}, timeout=60)
    t.eq(b["status"]["phase"], "Completed", "phase")



@case
def streamed_page_cut_while_objects_change(t):
    """Pages over 4 MiB are fetched once and read as they arrive. The second page is cut
    after 50 items (kubesim's cutAfterItems fault: the connection closes
    mid-body) and, before it is fetched again, an object it had already
    given is deleted, or a new one is created among them: skipping the
    retried page by count would lose one object or write one twice; by key
    every object that existed throughout is there once."""
    w, root = world(t)
    sim = w.sim
    w.namespace("bulk")
    n = 1200
    initial = ["cm-%06d" % i for i in range(n)]
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "x" * 10240}}, n,
             name="cm-{i:06d}", namespace="bulk")
    srv = w.server()
    path = "^/api/v1/namespaces/bulk/configmaps$"
    for case_name, change in (("deleted", ("DELETE", "cm-000520")),
                              ("inserted", ("POST", "cm-000520x"))):
        sim.clear_faults()
        sim.faults([{"method": "GET", "path": path, "query": "continue", "cutAfterItems": 50,
                     "count": 1},
                    {"method": "GET", "path": path, "query": "continue", "delay": 1.5,
                     "count": 1}])
        seq = sim.requests()[-1]["seq"]
        done = {}

        def act(st):
            if done:
                return
            cut = [q for q in sim.requests() if q["seq"] > seq and q.get("dropped") and
                   "continue" in q["query"]]
            if cut:
                if change[0] == "DELETE":
                    sim.ok("DELETE", "/api/v1/namespaces/bulk/configmaps/" + change[1])
                else:
                    sim.ok("POST", "/api/v1/namespaces/bulk/configmaps", {
                        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": change[1]}})
                done["at"] = time.monotonic()
        name = "cut-" + case_name
        b = run_backup(w, srv, name, {"includedNamespaces": ["bulk"],
                                           "includedResources": ["configmaps"]}, on_status=act)
        t.eq(b["status"]["phase"], "Completed", "%s: phase" % case_name)
        t.check(done, "%s: the page was never cut" % case_name)
        firsts = [q for q in sim.requests() if q["seq"] > seq and re.match(path, q["path"]) and
                  "continue" not in q["query"] and "limit=500" in q["query"]]
        t.eq(len(firsts), 1, "%s: the first page (over 4 MiB) fetched once (issue 27)" % case_name)
        got = {k.rsplit("/", 1)[1][:-5] for k in tar_items(root, name)}   # fails on a duplicate
        changed = {change[1]}
        t.eq(sorted(set(initial) - changed - got), [], "%s: objects missing" % case_name)
        t.eq(sorted(got - set(initial) - changed), [], "%s: objects that never existed" % case_name)
        initial = [x for x in initial if x not in changed]


@case
def tarball_same_at_any_concurrency(t):
    """Issue 27: the tarball is byte for byte the same whatever the list
    concurrency and the compression threads: one server lists one request
    at a time and compresses on one thread, the other 8 lists at once on 3
    threads, both back up real-cluster-shaped objects (several kinds,
    namespaces, managedFields) into parts of just over 1 MiB. Each
    Backup's startTimestamp (the tar entries' mtime) is set before it is
    claimed, so nothing but the settings differs. Per namespace
    (includedNamespaces) and across the cluster (excludedNamespaces)."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
    from realistic import populate, namespaces
    w, root = world(t)
    populate(w.sim, 700, seed=27)
    populate(w.sim, 700, seed=27, start=2000)
    nss = namespaces(700) + namespaces(700, start=2000)
    t.eq(len(nss), 2, "namespaces of the objects")
    start = "2026-01-02T03:04:05Z"
    specs = {"per-ns": {"includedNamespaces": nss},
             "cluster": {"excludedNamespaces": [NS], "includeClusterResources": False}}
    for kind, spec in specs.items():
        for cfg in ("serial", "concurrent"):
            name = "%s-%s" % (kind, cfg)
            w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                  "metadata": {"name": name, "namespace": NS,
                                               "labels": {"cfg": cfg}},
                                  "spec": spec})
            w.sim.ok("PATCH", "%s/%s/status" % (BK, name), {"status": {"startTimestamp": start}},
                     content_type="application/merge-patch+json")
    part = (1 << 20) + 1
    srv = [w.server("serial", part_size=part, extra=[
               "--shard-selector", "cfg=serial", "--list-concurrency", "1",
               "--compression-threads", "1"]),
           w.server("concurrent", part_size=part, extra=[
               "--shard-selector", "cfg=concurrent", "--list-concurrency", "8",
               "--compression-threads", "3"])]
    for kind in specs:
        data, parts = {}, {}
        for i, cfg in enumerate(("serial", "concurrent")):
            name = "%s-%s" % (kind, cfg)
            b = w.wait_backup(name, srv=srv[i], timeout=180)
            t.eq(b["status"]["phase"], "Completed", "%s phase" % name)
            t.eq(b["status"]["startTimestamp"], start, "%s startTimestamp" % name)
            parts[cfg] = [(p["bytes"], p["items"], p["lastItem"])
                          for p in b["status"]["checkpoint"]["parts"]]
            with open(find_file(root, name + ".tar.gz"), "rb") as f:
                data[cfg] = f.read()
        items = tar_items(root, kind + "-serial")
        t.check(len(items) >= 1400, "%s: %d items backed up" % (kind, len(items)))
        t.check(len(parts["serial"]) >= 3, "%s: %d parts" % (kind, len(parts["serial"])))
        t.eq(parts["concurrent"], parts["serial"], "%s: parts (bytes, items, last item)" % kind)
        t.check(data["concurrent"] == data["serial"],
                "%s: tarballs differ (%d and %d bytes)" % (kind, len(data["serial"]),
                                                          len(data["concurrent"])))


main()
