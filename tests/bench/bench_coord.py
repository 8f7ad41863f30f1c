"""bench_coord.py: issue 8's numbers (prints figures, never fails).

1. Takeover latency: two servers (lease 3s, renew deadline 2s, retry
   500ms, as the tests use), a backup mid-way on server A, kill -9 of A;
   measured from the kill to B's takeover claim (status.claim.holder = B)
   and to B's first progress (a new checkpointed part). Goal (issue 8):
   within lease duration + 2 x retry period = 4.0 s. Repeated
   $CAIRN_BENCH_COORD_TRIALS times (default 5).
2. Claim throughput: 5 servers x 4 workers contending for 500 small
   backups created at once ($CAIRN_BENCH_COORD_BACKUPS); prints time to
   all claimed and all Completed, claims/s, lost claim races (409 on the
   claiming write, from the servers' logs and kubesim's request log) and
   the spread over servers.
"""
import os
import re
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cairntest import BIN, Case, Kubesim, wait_for  # noqa: E402

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
TIMINGS = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"]
TRIALS = int(os.environ.get("CAIRN_BENCH_COORD_TRIALS", "5"))
NBACKUPS = int(os.environ.get("CAIRN_BENCH_COORD_BACKUPS", "500"))
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def start_sim(t, name, ids):
    tokens = {"admin": "admin-token"}
    tokens.update({i: "tok-" + i for i in ids})
    sim = Kubesim(t, name=name, tokens=tokens)
    sim.install_crds(NS)
    root = t.mkdir(name + "-store")
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"}, "config": {"path": root},
                 "default": True}})
    return sim


def server(t, sim, sid, workers=1, part_size=4096):
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--context", "kubesim-" + sid,
                    "--namespace", NS, "--server-id", sid, "--journal", t.path("j-%s.db" % sid),
                    "--workers", str(workers), "--part-size", str(part_size),
                    "--log-level", "info"] + TIMINGS, name="server-" + sid)


def status(sim, name):
    return sim.ok("GET", "%s/%s" % (BK, name)).get("status", {})


def takeover(t):
    ids = []
    for i in range(TRIALS):
        ids += ["a%d" % i, "b%d" % i]
    sim = start_sim(t, "kubesim-takeover", ids)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"payload": os.urandom(60).hex()}},
             2500, name="cm-{i:06d}", namespace="bulk")
    sim.faults({"method": "GET", "path": "^/api/v1/(namespaces/[^/]+/)?configmaps$", "delay": 0.25,
                "count": 10000000})
    claims, resumes = [], []
    for i in range(TRIALS):
        a = server(t, sim, "a%d" % i)
        name = "tk%d" % i
        time.sleep(0.8)
        sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                            "metadata": {"name": name, "namespace": NS},
                            "spec": {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]}})
        wait_for(lambda: status(sim, name).get("claim", {}).get("holder") == "a%d" % i, 30, "claim")
        b = server(t, sim, "b%d" % i)
        wait_for(lambda: len(status(sim, name).get("checkpoint", {}).get("parts", [])) >= 2, 60, "parts")
        time.sleep(0.1 + 0.5 * (i / max(1, TRIALS)))  # kill at varying points of the renew cycle
        a.kill9()
        t0 = time.monotonic()
        nparts = len(status(sim, name)["checkpoint"]["parts"])
        wait_for(lambda: status(sim, name).get("claim", {}).get("holder") == "b%d" % i, 30,
                 "takeover", interval=0.01)
        claims.append(time.monotonic() - t0)
        wait_for(lambda: len(status(sim, name).get("checkpoint", {}).get("parts", [])) > nparts, 30,
                 "progress", interval=0.01)
        resumes.append(time.monotonic() - t0)
        # let b finish so the next trial's servers have nothing older to take
        wait_for(lambda: status(sim, name).get("phase") in FINAL, 120, "finish")
        b.stop()
    sim.proc.stop()
    print("takeover (lease 3s, renew deadline 2s, retry 500ms; goal <= lease + 2 x retry = 4.0s), "
          "%d trials:" % TRIALS)
    print("  kill -9 -> takeover claim:    min %.2fs median %.2fs max %.2fs" % (
        min(claims), statistics.median(claims), max(claims)))
    print("  kill -9 -> resumed progress:  min %.2fs median %.2fs max %.2fs" % (
        min(resumes), statistics.median(resumes), max(resumes)))


def throughput(t):
    ids = ["s%d" % i for i in range(5)]
    sim = start_sim(t, "kubesim-claims", ids)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "tiny"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 3, name="cm-{i}",
             namespace="tiny")
    procs = [server(t, sim, s, workers=4) for s in ids]
    wait_for(lambda: len(sim.ok("GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS)
                         ["items"]) == 5, 30, "5 Leases")
    sim.ok("DELETE", "/_sim/requests")
    spec = {"includedNamespaces": ["tiny"], "includedResources": ["configmaps"]}
    names = ["c%04d" % i for i in range(NBACKUPS)]
    t0 = time.monotonic()

    def create(chunk):
        for n in chunk:
            sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                "metadata": {"name": n, "namespace": NS}, "spec": spec})
    ths = [threading.Thread(target=create, args=(names[i::8],)) for i in range(8)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    t_created = time.monotonic() - t0
    claimed_at = final_at = None
    while time.monotonic() - t0 < 600:
        items = sim.ok("GET", BK)["items"]
        nclaimed = sum(1 for b in items if b.get("status", {}).get("claim"))
        nfinal = sum(1 for b in items if b.get("status", {}).get("phase") in FINAL)
        if claimed_at is None and nclaimed >= NBACKUPS:
            claimed_at = time.monotonic() - t0
        if nfinal >= NBACKUPS:
            final_at = time.monotonic() - t0
            break
        time.sleep(0.2)
    items = sim.ok("GET", BK)["items"]
    per = {}
    for b in items:
        h = b.get("status", {}).get("claim", {}).get("holder", "?")
        per[h] = per.get(h, 0) + 1
    logs = [p.output() for p in procs]
    won = sum(len(re.findall(r"backup \S+: claimed by s\d/\d", o)) for o in logs)
    lost = sum(len(re.findall(r"claimed by someone else first", o)) for o in logs)
    reqs = sim.requests()
    st409 = sum(1 for r in reqs if r["path"].endswith("/status") and r["status"] == 409)
    puts = sum(1 for r in reqs if r["path"].endswith("/status") and r["method"] == "PUT")
    attempts = sorted({b.get("status", {}).get("claim", {}).get("attempt") for b in items})
    for p in procs:
        p.stop()
    sim.proc.stop()
    print("claim throughput: 5 servers x 4 workers, %d small backups created in %.1fs:" % (
        NBACKUPS, t_created))
    if claimed_at:
        print("  all claimed after %.1fs (%.0f claims/s from the first creation)" % (
            claimed_at, NBACKUPS / claimed_at))
    if final_at:
        print("  all final after %.1fs (%.0f backups/s)" % (final_at, NBACKUPS / final_at))
    print("  claims won %d (want %d), claim races lost %d; status PUTs %d of which 409: %d; "
          "attempts seen %s" % (won, NBACKUPS, lost, puts, st409, attempts))
    print("  per server: %s" % sorted(per.items()))
    print("  (load average now %.1f)" % os.getloadavg()[0])


def main():
    t = Case("bench_coord")
    try:
        takeover(t)
        throughput(t)
    finally:
        t.finish()


if __name__ == "__main__":
    main()
