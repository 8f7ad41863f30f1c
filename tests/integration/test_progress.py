"""Numbers that are right and never go backwards (issue #20).

- A backup followed from start to end (status polled every 20 ms, the
  /status.json document and the CLI too): items, bytes and totals never
  decrease; at the end items == total == the objects the backup holds,
  and bytesDone == the tarball's size in storage, the same in the status,
  the CLI's `backup get -o json`, /status.json and the journal's numbers
  on /metrics.
- /metrics after a known set of backups and a restore: counts by schedule
  label (cairn.io/schedule-name), items, tarball sizes, bytes, warnings,
  duration histograms, the restore's schedule (its backup's).
- `tar tzf` of a backup whose item paths are over 250 characters prints
  no warning (the pax headers carry no hdrcharset keyword).
"""
import json
import os
import subprocess
import tarfile
import threading
import time
import urllib.request

from bkworld import BK, NS, RS, World
from cairntest import case, cairn, free_port, main, wait_for
from webcheck import scrape, value

SCHED = "cairn.io/schedule-name"


def listen_server(w, sid="s1", part_size=64 << 10):
    port = free_port()
    srv = w.server(sid=sid, part_size=part_size,
                   extra=["--listen", "127.0.0.1:%d" % port])
    wait_for(lambda: urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port,
                                            timeout=2).status == 200, 20, "/healthz")
    return srv, port


def status_json(port):
    return json.loads(urllib.request.urlopen("http://127.0.0.1:%d/status.json" % port,
                                             timeout=5).read())


def configmaps(w, ns, n, size=300):
    w.namespace(ns)
    w.sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {},
                "data": {"a": "x" * size}}, n, namespace=ns)


def tarball(root, name):
    return os.path.join(root, "backups", name, name + ".tar.gz")


def items_in(path):
    """Items in a tarball: its legacy resource entries (each item is
    written twice, legacy and -preferredversion)."""
    with tarfile.open(path) as tf:
        return sum(1 for n in tf.getnames()
                   if n.startswith("resources/") and "-preferredversion/" not in n)


def monotonic(samples, key):
    bad = [(a, b) for a, b in zip(samples, samples[1:]) if b[key] < a[key]]
    return bad


@case
def backup_progress_never_goes_back(t):
    w = World(t)
    root = t.mkdir("store")
    w.fs_location(root)
    configmaps(w, "app", 6000)
    srv, port = listen_server(w)
    # Lists slow enough that the status is seen many times on the way.
    w.sim.faults([{"method": "GET", "path": "^/api/v1/namespaces/app/configmaps$",
                   "delay": 0.3, "count": 1000}])
    status, page = [], []
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            st, b, _ = w.sim.get("%s/b1" % BK)
            if st == 200 and "progress" in b.get("status", {}):
                p = b["status"]["progress"]
                status.append({"items": p.get("itemsBackedUp", 0),
                               "total": p.get("totalItems", 0),
                               "bytes": p.get("bytesDone", 0),
                               "phase": b["status"].get("phase")})
            try:
                doc = status_json(port)
                for op in doc["backups"]:
                    if op["name"] == "b1":
                        pr = op["progress"]
                        page.append({"items": pr["itemsDone"],
                                     "total": pr["totalItems"] or 0,
                                     "bytes": pr["bytesDone"]})
            except OSError:
                pass
            time.sleep(0.02)
    th = threading.Thread(target=poll)
    th.start()
    try:
        w.create_backup("b1", {"includedNamespaces": ["app"]})
        b = w.wait_backup("b1", srv=srv, timeout=180)
    finally:
        stop.set()
        th.join()
    t.eq(b["status"]["phase"], "Completed", "phase")
    running = [s for s in status if s["phase"] == "InProgress"]
    t.check(len(running) >= 5, "the running backup was seen %d times" % len(running))
    for key in ("items", "total", "bytes"):
        t.eq(monotonic(status, key), [], "status.progress.%s went down" % key)
        t.eq(monotonic(page, key), [], "/status.json progress.%s went down" % key)
    # Every total seen was the final one: the namespace's items are counted
    # before they are listed.
    items = items_in(tarball(root, "b1"))
    t.eq(items, 6001, "items in the tarball (6000 ConfigMaps, the Namespace)")
    t.eq(sorted({s["total"] for s in status}), [items], "totals seen in status")
    p = b["status"]["progress"]
    size = os.path.getsize(tarball(root, "b1"))
    t.eq((p["itemsBackedUp"], p["totalItems"], p["bytesDone"]), (items, items, size),
         "final status: items, total, bytes == tarball")
    t.eq(sum(x["bytes"] for x in b["status"]["checkpoint"]["parts"]), size,
         "parts' bytes add up to the tarball")
    t.check(len(b["status"]["checkpoint"]["parts"]) > 3, "several parts")
    # The CLI and the server's page say the same.
    r = cairn("backup", "get", "b1", "-o", "json", "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.eq(json.loads(r.stdout)["status"]["progress"], p, "backup get -o json")
    r = cairn("backup", "get", "b1", "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.check("%d/%d" % (items, items) in r.stdout, "backup get table: %s" % r.stdout)

    def recent():
        for x in status_json(port)["recent"]:
            if x["name"] == "b1":
                return x
        return None
    rec = wait_for(recent, 10, "b1 in recent results")
    t.eq((rec["itemsDone"], rec["totalItems"], rec["bytesDone"], rec["errors"], rec["warnings"]),
         (items, items, size, 0, 0), "/status.json recent result")


@case
def totals_after_filters_never_drop(t):
    """excludedNamespaces alone: the items of the excluded namespaces are
    not in the total at any time (no estimate that shrinks at the end)."""
    w = World(t)
    root = t.mkdir("store")
    w.fs_location(root)
    configmaps(w, "keep", 1500, size=50)
    configmaps(w, "drop", 1500, size=50)
    srv = w.server(part_size=32 << 10)
    w.sim.faults([{"method": "GET", "path": "/configmaps$", "delay": 0.4, "count": 1000}])
    seen, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            st, b, _ = w.sim.get("%s/bx" % BK)
            p = b.get("status", {}).get("progress") if st == 200 else None
            if p and (not seen or seen[-1] != p):
                seen.append(p)
            time.sleep(0.02)
    th = threading.Thread(target=poll)
    th.start()
    try:
        w.create_backup("bx", {"excludedNamespaces": ["drop"]})
        b = w.wait_backup("bx", srv=srv, timeout=120)
    finally:
        stop.set()
        th.join()
    t.eq(b["status"]["phase"], "Completed", "phase")
    totals = [p.get("totalItems", 0) for p in seen]
    t.check(len(seen) >= 3, "progress seen %d times" % len(seen))
    t.eq([(a, c) for a, c in zip(totals, totals[1:]) if c < a], [], "totals that went down")
    items = items_in(tarball(root, "bx"))
    t.eq(b["status"]["progress"]["totalItems"], items, "final total == items in the tarball")
    t.check(totals[0] <= items, "the first total (%d) counted no excluded item (%d in the "
            "backup)" % (totals[0], items))


@case
def metrics_after_known_backups(t):
    w = World(t)
    root = t.mkdir("store")
    w.fs_location(root)
    configmaps(w, "app", 30)
    configmaps(w, "web", 12)
    srv, port = listen_server(w, part_size=5 << 20)

    def backup(name, spec, sched=None):
        body = {"apiVersion": "cairn.io/v1", "kind": "Backup",
                "metadata": {"name": name, "namespace": NS}, "spec": spec}
        if sched:
            body["metadata"]["labels"] = {SCHED: sched}
        w.sim.ok("POST", BK, body)
        return w.wait_backup(name, srv=srv)

    n1 = backup("nightly-1", {"includedNamespaces": ["app"]}, "nightly")
    n2 = backup("nightly-2", {"includedNamespaces": ["app", "web"]}, "nightly")
    # A warning: a namespace that does not exist.
    m1 = backup("manual-1", {"includedNamespaces": ["web", "ghost"]})
    v1 = backup("manual-bad", {"storageLocation": "nowhere"})
    phases = [x["status"]["phase"] for x in (n1, n2, m1, v1)]
    t.eq(phases, ["Completed", "Completed", "Completed", "FailedValidation"], "phases")
    t.eq(m1["status"]["warnings"], 1, "manual-1 warnings")
    # A restore of nightly-2 into existing objects: a warning per object
    # that exists and differs is not what this checks; its schedule is.
    w.create_restore("r1", "nightly-2", {"namespaceMapping": {"app": "app2", "web": "web2"}})
    r1 = w.wait_restore("r1", srv=srv)
    t.eq(r1["status"]["phase"], "Completed", "restore phase")

    size = {n: os.path.getsize(tarball(root, n)) for n in ("nightly-1", "nightly-2", "manual-1")}
    t.eq([n1["status"]["progress"]["bytesDone"], n2["status"]["progress"]["bytesDone"],
          m1["status"]["progress"]["bytesDone"]],
         [size["nightly-1"], size["nightly-2"], size["manual-1"]], "bytesDone == tarball size")

    def ready():
        f = scrape(port)
        return f if value(f, "cairn_restore_success_total", {"schedule": "nightly"}) == 1 else None
    f = wait_for(ready, 15, "the restore counted in /metrics")
    want = {
        ("cairn_backup_attempt_total", "nightly"): 2,
        ("cairn_backup_success_total", "nightly"): 2,
        ("cairn_backup_attempt_total", ""): 1,
        ("cairn_backup_success_total", ""): 1,
        ("cairn_backup_validation_failure_total", ""): 1,
        ("cairn_backup_failure_total", ""): 0,
        ("cairn_backup_partial_failure_total", "nightly"): 0,
        ("cairn_backup_warning_total", ""): 1,
        ("cairn_backup_warning_total", "nightly"): 0,
        # gauges: the last backup of each schedule
        ("cairn_backup_items_total", "nightly"): n2["status"]["progress"]["totalItems"],
        ("cairn_backup_items_total", ""): m1["status"]["progress"]["totalItems"],
        ("cairn_backup_tarball_size_bytes", "nightly"): size["nightly-2"],
        ("cairn_backup_tarball_size_bytes", ""): size["manual-1"],
        ("cairn_backup_items_errors", "nightly"): 0,
        ("cairn_backup_last_status", "nightly"): 1,
        ("cairn_backup_duration_seconds_count", "nightly"): 2,
        ("cairn_backup_duration_seconds_count", ""): 1,
        ("cairn_restore_attempt_total", "nightly"): 1,
        ("cairn_restore_success_total", "nightly"): 1,
        ("cairn_restore_items_total", "nightly"): r1["status"]["progress"]["itemsRestored"],
        ("cairn_restore_duration_seconds_count", "nightly"): 1,
    }
    got = {k: value(f, k[0], {"schedule": k[1]}) for k in want}
    t.eq(got, want, "metrics by schedule")
    t.eq(n2["status"]["progress"]["totalItems"], 30 + 12 + 2, "nightly-2 items")
    t.eq(value(f, "cairn_backup_bytes_total"), sum(size.values()), "bytes of every tarball")
    t.eq(value(f, "cairn_backup_total"), 4, "backups that exist")
    # The journal's numbers on /status.json are the objects' numbers.
    doc = status_json(port)
    rec = {x["name"]: x for x in doc["recent"]}
    for b in (n1, n2, m1):
        name = b["metadata"]["name"]
        st = b["status"]
        t.eq((rec[name]["itemsDone"], rec[name]["totalItems"], rec[name]["bytesDone"],
              rec[name]["warnings"], rec[name]["errors"]),
             (st["progress"]["itemsBackedUp"], st["progress"]["totalItems"],
              st["progress"]["bytesDone"], st.get("warnings", 0), st.get("errors", 0)),
             "%s on /status.json" % name)

    # A restore over objects that changed since: a warning each, the same
    # on /status.json as in its status.
    for cm in w.sim.ok("GET", "/api/v1/namespaces/app/configmaps?limit=2")["items"]:
        w.sim.ok("PATCH", "/api/v1/namespaces/app/configmaps/%s" % cm["metadata"]["name"],
                 {"data": {"a": "changed"}}, content_type="application/merge-patch+json")
    w.create_restore("r2", "nightly-1")
    r2 = w.wait_restore("r2", srv=srv)
    t.eq((r2["status"]["phase"], r2["status"]["warnings"]), ("Completed", 2),
         "a restore over 2 changed objects")

    def r2_shown():
        x = [r for r in status_json(port)["recent"] if r["name"] == "r2"]
        return x[0] if x else None
    rec2 = wait_for(r2_shown, 15, "r2 on /status.json")
    t.eq((rec2["warnings"], rec2["itemsDone"], rec2["totalItems"]),
         (2, r2["status"]["progress"]["itemsRestored"], r2["status"]["progress"]["totalItems"]),
         "r2 on /status.json")
    # A deletion (kubectl delete: the server's collector cleans storage).
    w.sim.ok("DELETE", "%s/nightly-1" % BK)
    wait_for(lambda: w.sim.get("%s/nightly-1" % BK)[0] == 404, 60, "nightly-1 deleted")
    f2 = wait_for(lambda: (lambda x: x if value(x, "cairn_backup_deletion_success_total",
                                                {"schedule": "nightly"}) == 1 else None)(scrape(port)),
                  15, "the deletion counted")
    t.eq((value(f2, "cairn_backup_deletion_attempt_total", {"schedule": "nightly"}),
          value(f2, "cairn_backup_deletion_failure_total", {"schedule": "nightly"})), (1, 0),
         "deletion attempts and failures")
    t.check(not os.path.exists(os.path.join(root, "backups", "nightly-1")), "its files are gone")

@case
def tar_reads_long_paths_without_warning(t):
    w = World(t)
    root = t.mkdir("store")
    w.fs_location(root)
    w.namespace("app")
    names = ["cm-%s-%03d" % ("x" * 206, i) for i in range(3)]
    for n in names:
        w.sim.ok("POST", "/api/v1/namespaces/app/configmaps",
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n},
                  "data": {"k": "v"}})
    srv = w.server()
    w.create_backup("long", {"includedNamespaces": ["app"]})
    b = w.wait_backup("long", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "phase")
    r = subprocess.run(["tar", "tzf", tarball(root, "long")], capture_output=True, text=True)
    t.eq(r.returncode, 0, "tar exit code")
    t.eq(r.stderr, "", "tar's warnings")
    paths = r.stdout.split()
    longest = max(len(p) for p in paths)
    t.check(longest >= 250, "longest path is %d characters" % longest)
    for n in names:
        t.check("resources/configmaps/namespaces/app/%s.json" % n in paths, "%s listed" % n)
        t.check("resources/configmaps/v1-preferredversion/namespaces/app/%s.json" % n in paths,
                "%s (preferred version) listed" % n)


main()
