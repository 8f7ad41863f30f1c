"""One view of the cluster's work on every server (issue #20), in Chromium.

Two `cairn server --listen`, each taking its own shard of the work
(--shard-selector), run two backups, a backup with a hostPath volume (its
VolumePluginBackup) and a restore at once. Both servers' /status pages
list the same running work, each item with the server and worker that
holds it, whichever server holds it; while the work runs, every number a
page shows (items, totals, bytes, errors, warnings) equals the object's
status and the CLI's `get -o json` at the same moment; once finished,
both pages show every item's final counts and sizes, equal to the
objects', the CLI's and the tarball's and volume copy's sizes in storage;
the servers table shows both servers, their Leases valid and how many
items each holds; the header names the server that answered.
"""
import json
import os
import time

from bkworld import BK, NS, RS, World
from cairntest import CheckFailed, cairn, case, free_port, main, wait_for
from cdp import CHROMIUM, Chromium
from webcheck import get, save_artifact

VPB = "/apis/cairn.io/v1/namespaces/%s/volumepluginbackups" % NS

# What a page shows: every card, result row and server row, with the exact
# numbers the page keeps in data-* attributes.
PAGE_JS = """(function () {
  function nums(e) {
    var o = {};
    ["items", "total", "bytes", "errors", "warnings", "running"].forEach(function (k) {
      var v = e.getAttribute("data-" + k);
      if (v !== null) o[k] = Number(v);
    });
    return o;
  }
  var out = { answeredBy: (document.querySelector("#server .server-id b") || {}).textContent,
              updates: window.cairnUpdates || 0, running: {}, recent: {}, volumesDone: {},
              servers: {}, holders: {} };
  document.querySelectorAll(".op").forEach(function (c) {
    var key = c.getAttribute("data-kind") + "/" + c.getAttribute("data-name");
    out.running[key] = nums(c);
    var h = c.querySelectorAll(".holder");
    out.holders[key] = Array.prototype.map.call(h, function (x) { return x.textContent; });
  });
  document.querySelectorAll("#recent tr.result").forEach(function (r) {
    out.recent[r.getAttribute("data-kind") + "/" + r.getAttribute("data-name")] = nums(r);
  });
  document.querySelectorAll("#volumes-done tr.volume-result").forEach(function (r) {
    out.volumesDone[r.getAttribute("data-name")] = nums(r);
  });
  document.querySelectorAll("#servers tr.server").forEach(function (r) {
    out.servers[r.getAttribute("data-name")] = {
      running: Number(r.getAttribute("data-running")),
      valid: r.textContent.indexOf("valid") >= 0 };
  });
  return out;
})()"""


def numbers(kind, obj):
    """What the page shows of an object, from its status."""
    st = obj.get("status", {})
    p = st.get("progress", {})
    if kind == "volume-backup":
        return {"bytes": p.get("bytesDone", 0)}
    done = p.get("itemsRestored" if kind == "restore" else "itemsBackedUp", 0)
    out = {"items": done, "bytes": p.get("bytesDone", 0),
           "errors": st.get("errors", 0), "warnings": st.get("warnings", 0)}
    if "totalItems" in p:
        out["total"] = p["totalItems"]
    return out


def cluster(w):
    """{kind/name: (phase, holder, worker, numbers)} of every object."""
    out = {}
    for path, kind in ((BK, "backup"), (RS, "restore"), (VPB, "volume-backup")):
        for o in w.sim.ok("GET", path)["items"]:
            st = o.get("status", {})
            claim = st.get("claim", {})
            out["%s/%s" % (kind, o["metadata"]["name"])] = (
                st.get("phase", "New"), claim.get("holder"), claim.get("worker"), numbers(kind, o))
    return out


FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def running_of(objs):
    """What the pages list as running: claimed backups and restores, and
    every volume operation not finished (a New one is its backup's work)."""
    return {k: v for k, v in objs.items()
            if v[0] not in FINAL and (v[0] != "New" or k.startswith("volume"))}


def cli_numbers(w, key):
    kind, name = key.split("/", 1)
    r = cairn(kind, "get", name, "-o", "json", "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    if r.returncode != 0:
        raise CheckFailed("cairn %s get %s: %s" % (kind, name, r.stderr))
    return numbers(kind, json.loads(r.stdout))


@case
def both_servers_show_the_whole_clusters_work(t):
    if not os.path.exists(CHROMIUM):
        t.skip("chromium not installed")
    w = World(t)
    root = t.mkdir("store")
    w.fs_location(root)
    # a small namespace, backed up first: the restore reads it back
    w.namespace("small")
    w.sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": "v"}},
               40, namespace="small")
    # big namespaces whose lists are slow: backups that run for a while
    for ns in ("big-a", "big-b"):
        w.namespace(ns)
        w.sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {},
                    "data": {"a": "x" * 200}}, 2000, namespace=ns)
    # a namespace with a hostPath volume: its backup copies the data
    w.namespace("shop")
    data = t.mkdir("vol-shop")
    for i in range(12):
        with open(os.path.join(data, "blob-%02d" % i), "wb") as f:
            f.write(os.urandom(2 << 20))
    w.sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-shop"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": data},
                 "claimRef": {"namespace": "shop", "name": "data"}}})
    w.sim.ok("POST", "/api/v1/namespaces/shop/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"volumeName": "pv-shop", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})

    ports = {"s1": free_port(), "s2": free_port()}
    srv = {}
    for sid, shard in (("s1", "shard=a"), ("s2", "shard=b")):
        srv[sid] = w.server(sid=sid, part_size=64 << 10, extra=[
            "--listen", "127.0.0.1:%d" % ports[sid], "--shard-selector", shard,
            "--workers", "2"])
    for sid in srv:
        wait_for(lambda: get(ports[sid], "/healthz", timeout=2)[0] == 200, 20, "%s /healthz" % sid)

    def create(path, kind, name, spec, shard):
        w.sim.ok("POST", path, {"apiVersion": "cairn.io/v1", "kind": kind,
                                "metadata": {"name": name, "namespace": NS,
                                             "labels": {"shard": shard}},
                                "spec": spec})
    create(BK, "Backup", "base", {"includedNamespaces": ["small"]}, "a")
    base = w.wait_backup("base")
    t.eq(base["status"]["phase"], "Completed", "base backup")

    br = Chromium(t.mkdir("browser"))
    t.on_cleanup(br.close)
    pages = {}
    for sid, port in ports.items():
        pages[sid] = br.page()
        pages[sid].viewport(1280, 900)
        pages[sid].navigate("http://127.0.0.1:%d/status" % port)
        pages[sid].wait_js("window.cairnUpdates >= 1", 15, "first update of %s's page" % sid)
        t.eq(pages[sid].evaluate(PAGE_JS)["answeredBy"], sid, "the page names the server answering")
    # A server reads the Leases every 2 s (its probe): one that started
    # just before the other may not list it yet on its first page.
    for sid in pages:
        wait_for(lambda: (lambda r: set(r) >= {"s1", "s2"} and all(v["valid"] for v in r.values()))(
            pages[sid].evaluate(PAGE_JS)["servers"]), 30, "%s's servers table to list both servers" % sid)

    # Slow the work down: pages of the big lists, creates of the restore.
    w.sim.faults([
        {"method": "GET", "path": "^/api/v1/namespaces/big-[ab]/configmaps$", "delay": 2.0,
         "count": 1000},
        {"method": "POST", "path": "^/api/v1/namespaces/small-copy/configmaps$", "delay": 2.5,
         "count": 1000}])
    create(BK, "Backup", "bk-a", {"includedNamespaces": ["big-a"]}, "a")
    create(BK, "Backup", "bk-b", {"includedNamespaces": ["big-b"]}, "b")
    create(BK, "Backup", "bk-shop", {"includedNamespaces": ["shop"]}, "a")
    create(RS, "Restore", "rs-small", {"backupName": "base",
                                       "namespaceMapping": {"small": "small-copy"}}, "b")

    # While the backups and the restore run: the same work on both pages,
    # each item with its holder, and the numbers of that moment.
    last = [None]

    def same_moment():
        before = cluster(w)
        seen = {sid: pages[sid].evaluate(PAGE_JS) for sid in pages}
        after = cluster(w)
        run = running_of(before)
        if before != after or not {"backup/bk-a", "backup/bk-b", "restore/rs-small"} <= set(run):
            last[0] = "objects moved or not all running yet: %s" % sorted(run)
            return None
        for sid, page in seen.items():
            shown = page["running"]
            want = {k: v[3] for k, v in run.items()}
            if set(shown) != set(want):
                last[0] = "%s's page lists %s, the cluster runs %s" % (sid, sorted(shown), sorted(want))
                return None
            for k in want:
                if shown[k] != want[k]:
                    last[0] = "%s's page shows %s %s, its status %s" % (sid, k, shown[k], want[k])
                    return None
                holder, worker = run[k][1], run[k][2]
                if page["holders"][k][:2] != [holder or "–"] + ([worker] if worker else []):
                    last[0] = "%s's page: %s held by %s, status says %s %s" % (
                        sid, k, page["holders"][k], holder, worker)
                    return None
        return before, seen
    end = time.monotonic() + 90
    got = None
    while got is None and time.monotonic() < end:
        got = same_moment()
        if got is None:
            time.sleep(0.3)
    if got is None:
        raise CheckFailed("the pages never matched the cluster at one moment: %s" % last[0])
    objs, seen = got
    holders = {v[1] for v in running_of(objs).values()}
    t.check({"s1", "s2"} <= holders, "both servers hold work: %s" % holders)
    t.eq(seen["s1"]["running"], seen["s2"]["running"], "both pages list the same running work")
    # The CLI says the same as the object: the item may move on while the
    # CLI runs, so compare only a reading the object held on both sides of.
    for k in ("backup/bk-a", "restore/rs-small"):
        for _ in range(20):
            before = cluster(w)[k][3]
            cli = cli_numbers(w, k)
            if cluster(w)[k][3] == before:
                break
        t.eq(cli, before, "%s: the CLI and the object" % k)
    for sid in pages:
        srv_rows = seen[sid]["servers"]
        t.check(set(srv_rows) >= {"s1", "s2"} and all(r["valid"] for r in srv_rows.values()),
                "%s's servers table: %s" % (sid, srv_rows))
    save_artifact(t, pages["s1"], "web-cluster-running.png")

    # Everything finishes; both pages show the final numbers.
    w.sim.clear_faults()
    for name in ("bk-a", "bk-b", "bk-shop"):
        t.eq(w.wait_backup(name, timeout=180)["status"]["phase"], "Completed", name)
    t.eq(w.wait_restore("rs-small", timeout=180)["status"]["phase"], "Completed", "rs-small")
    final = cluster(w)
    keys = ["backup/base", "backup/bk-a", "backup/bk-b", "backup/bk-shop", "restore/rs-small"]

    def finished_shown(sid):
        page = pages[sid].evaluate(PAGE_JS)
        return page if set(keys) <= set(page["recent"]) and page["volumesDone"] and \
            not page["running"] else None
    for sid in pages:
        page = wait_for(lambda: finished_shown(sid), 30, "%s's page to show the results" % sid)
        for k in keys:
            t.eq(page["recent"][k], final[k][3], "%s's page: %s" % (sid, k))
            t.eq(cli_numbers(w, k), final[k][3], "the CLI: %s" % k)
        vpb = [v for k, v in final.items() if k.startswith("volume-backup/")]
        t.eq(len(vpb), 1, "one volume operation")
        vname = [k for k in final if k.startswith("volume-backup/")][0].split("/", 1)[1]
        t.eq(page["volumesDone"].get(vname, {}).get("bytes"), vpb[0][3]["bytes"],
             "%s's page: the volume copy's bytes" % sid)
        t.eq(page["servers"]["s1"]["running"] + page["servers"]["s2"]["running"], 0,
             "%s's page: nothing running" % sid)
    for name in ("base", "bk-a", "bk-b", "bk-shop"):
        size = os.path.getsize(os.path.join(root, "backups", name, name + ".tar.gz"))
        t.eq(final["backup/" + name][3]["bytes"], size, "%s: bytesDone is the tarball's size" % name)
        t.eq(final["backup/" + name][3]["items"], final["backup/" + name][3]["total"],
             "%s: items == total" % name)
    vpb = [o for o in w.sim.ok("GET", VPB)["items"]][0]
    t.eq(vpb["status"]["progress"]["bytesDone"], 24 << 20, "the volume's bytes")
    save_artifact(t, pages["s2"], "web-cluster-finished.png")


main()
