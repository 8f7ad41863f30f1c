"""How long the backup CLI takes to list and show backups, against kubectl
reading the same objects from the same kubesim (baseline measured here).
Prints figures only."""
import os
import subprocess
import time

from cairntest import Case, BIN, SRCDIR, wait_for

NS = "cairn-system"
N = int(os.environ.get("CAIRN_BENCH_BACKUPS", "2000"))


def best_of(argv, n=3):
    best = None
    for _ in range(n):
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, timeout=300)
        dt = time.monotonic() - t0
        if r.returncode != 0:
            raise SystemExit("%s failed: %s" % (" ".join(argv), r.stderr[-500:]))
        best = dt if best is None else min(best, dt)
    return best, r.stdout.count(b"\n")


def main():
    t = Case("bench_cli_backup")
    try:
        sim = t.kubesim()
        sim.install_crds(NS)
        wait_for(lambda: sim.get("/apis/cairn.io/v1/namespaces/%s/backups" % NS)[0] == 200, 10, "CRDs")
        for c in range(0, N, 250):
            sim.ok("POST", "/_sim/bulk", {"items": [
                {"apiVersion": "cairn.io/v1", "kind": "Backup",
                 "metadata": {"name": "b-%06d" % i, "namespace": NS},
                 "spec": {"ttl": "720h", "includedNamespaces": ["shop"]}}
                for i in range(c, min(N, c + 250))]})
        kc = ["--kubeconfig", sim.kubeconfig]
        base, _ = best_of(["kubectl", "--cache-dir", sim.cache_dir] + kc +
                          ["get", "backups.cairn.io", "-n", NS])
        print("kubectl get backups.cairn.io      %6d backups: %.3f s (baseline)" % (N, base))
        for args in (["backup", "get"], ["backup", "get", "-o", "json"],
                     ["backup", "get", "-o", "yaml"], ["backup", "describe", "b-000042"]):
            dt, lines = best_of([BIN] + args + kc)
            print("cairn %-28s %6d backups: %.3f s (%.2fx kubectl), %d lines" % (
                " ".join(args), N, dt, dt / base, lines))
    finally:
        t.finish()


if __name__ == "__main__":
    main()
