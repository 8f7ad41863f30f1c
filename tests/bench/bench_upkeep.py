"""bench_upkeep.py: what the upkeep loop (schedules, location health, sync,
GC) costs an idle cluster (prints figures, never fails).

One `cairn server` against kubesim holding N finished Backups (N = 200 and
2000, or $CAIRN_BENCH_UPKEEP_SIZES) and 20 Schedules due in an hour:
  - API requests per second the idle server makes (kubesim's request log
    over 10 s), by resource;
  - the server's RSS (VmHWM) while idle, which backs the 24Mi memory
    request `cairn install` gives each replica.
"""
import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cairntest import BIN, Case, vmhwm_kib  # noqa: E402

NS = "cairn-system"
SIZES = [int(x) for x in os.environ.get("CAIRN_BENCH_UPKEEP_SIZES", "200,2000").split(",")]
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS


def run(n):
    t = Case("upkeep-%d" % n)
    try:
        sim = t.kubesim()
        sim.install_crds(NS)
        sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
            "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "default"},
            "spec": {"provider": "fs", "objectStorage": {"bucket": "b"},
                     "config": {"path": t.mkdir("store")}, "default": True}})
        items = []
        for i in range(n):
            items.append({"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": "b-%05d" % i, "namespace": NS,
                                       "finalizers": ["cairn.io/backup-cleanup"]},
                          "spec": {}})
        sim.ok("POST", "/_sim/bulk", {"items": items})
        for i in range(n):		# finished, so the server only looks at them
            path = BK + "/b-%05d/status" % i
            b = sim.get(BK + "/b-%05d" % i)[1]
            b["status"] = {"phase": "Completed", "expiration": "2099-01-01T00:00:00Z"}
            sim.ok("PUT", path, b)
        for i in range(20):
            sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/schedules" % NS, {
                "apiVersion": "cairn.io/v1", "kind": "Schedule",
                "metadata": {"name": "s-%02d" % i},
                "spec": {"schedule": "@every 1h", "skipImmediately": True, "template": {}}})
        p = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                     "--server-id", "s1", "--journal", t.path("j.db")], name="server")
        time.sleep(5)		# schedules enabled and skipped, locations checked
        seq = sim.requests()[-1]["seq"]
        time.sleep(10)
        reqs = [r for r in sim.requests() if r["seq"] > seq]
        by = collections.Counter("%s %s" % (r["method"], r["path"].rsplit("/", 1)[-1])
                                 for r in reqs)
        print("N=%d backups, 20 schedules: %.1f requests/s idle (%s); VmHWM %d KiB" % (
            n, len(reqs) / 10.0, ", ".join("%s %.1f/s" % (k, v / 10.0)
                                           for k, v in sorted(by.items())),
            vmhwm_kib(p.pid)))
    finally:
        t.finish()


for n in SIZES:
    run(n)
