"""bench_encryption.py: what client-side encryption costs a backup (issue 22).

N ConfigMaps in kubesim (N = $CAIRN_BENCH_ENC_SIZE, default 100000) backed up
to two local-directory locations in the same run: one plain, one with
spec.encryption. Each repetition runs one backup of each, interleaved, each
by a fresh `cairn server`, so both see the same load. Prints the median wall
time (Backup created -> Completed) of each, the ratio encrypted / plain
(goal: under 1.10), server CPU seconds, and the server's peak RSS (VmHWM)
of each (flat: encryption holds one 64 KiB chunk per stream). Then
`cairn backup verify` of the encrypted backup (time and RSS), which reads,
decrypts and checks every byte.

Figures, never pass/fail. The machine is shared: medians of
$CAIRN_BENCH_REPS runs (default 3).
"""
import base64
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cairntest import BIN, Case, Kubesim, wait_for, vmhwm_kib  # noqa: E402

NS = "cairn-system"
N = int(os.environ.get("CAIRN_BENCH_ENC_SIZE", "100000"))
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "3")))
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backup(t, sim, location, name):
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "bench", "--journal", t.path("j-%s.db" % name),
                   "--retry-period", "100ms", "--log-level", "warn"], name="server-" + name)
    time.sleep(0.5)
    cpu0 = cpu_s(srv.pid)
    t0 = time.monotonic()
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": name, "namespace": NS},
        "spec": {"storageLocation": location, "includedResources": ["configmaps"],
                 "includeClusterResources": False, "includedNamespaces": ["bench"]}})

    def done():
        o = sim.ok("GET", "/apis/cairn.io/v1/namespaces/%s/backups/%s" % (NS, name))
        return o if o.get("status", {}).get("phase") in FINAL else None
    b = wait_for(done, 1800, "backup %s" % name, interval=0.05)
    r = {"wall": time.monotonic() - t0, "cpu": cpu_s(srv.pid) - cpu0, "rss": vmhwm_kib(srv.pid),
         "phase": b["status"]["phase"], "items": b["status"]["progress"]["itemsBackedUp"],
         "parts": len(b["status"]["checkpoint"]["parts"])}
    srv.stop()
    return r


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    t = Case("bench_encryption")
    try:
        sim = Kubesim(t)
        sim.install_crds(NS)
        key = os.urandom(32)
        sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys"},
            "data": {"k1": base64.b64encode(key).decode()}})
        roots = {}
        for loc in ("plain", "enc"):
            roots[loc] = t.mkdir("store-" + loc)
            spec = {"provider": "fs", "objectStorage": {"bucket": "bk"},
                    "config": {"path": roots[loc]}}
            if loc == "enc":
                spec["encryption"] = {"keyID": "k1", "secretRef": {"name": "keys"}}
            sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
                "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                "metadata": {"name": loc, "namespace": NS}, "spec": spec})
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": "bench"}})
        sim.bulk({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"labels": {"app": "bench", "tier": "web"}},
                  "data": {"config.yaml": "server:\n  port: 8080\n  replicas: 3\n" * 4}},
                 N, name="cm-{i:07d}", namespace="bench")
        runs = {"plain": [], "enc": []}
        for rep in range(REPS):
            order = ("plain", "enc") if rep % 2 == 0 else ("enc", "plain")
            for loc in order:
                runs[loc].append(backup(t, sim, loc, "%s-%d" % (loc, rep)))
                if rep < REPS - 1:
                    shutil.rmtree(os.path.join(roots[loc], "backups"), ignore_errors=True)
        print("objects=%d, medians of %d runs (interleaved, a fresh server each)" % (N, REPS))
        for loc, label in (("plain", "plain location"), ("enc", "encrypted location")):
            rs = runs[loc]
            print("  %-19s backup %.2fs  server CPU %.2fs  peak RSS %.1f MiB  (%s, %s items, "
                  "%d parts; runs %s)" % (label, med(rs, "wall"), med(rs, "cpu"),
                                          med(rs, "rss") / 1024.0, rs[-1]["phase"],
                                          rs[-1]["items"], rs[-1]["parts"],
                                          " ".join("%.2f" % r["wall"] for r in rs)))
        ratio = statistics.median(e["wall"] / p["wall"] for p, e in zip(runs["plain"], runs["enc"]))
        print("  encrypted / plain: wall %.3f (goal < 1.10), CPU %.3f, peak RSS %+.1f MiB" % (
            ratio, med(runs["enc"], "cpu") / med(runs["plain"], "cpu"),
            (med(runs["enc"], "rss") - med(runs["plain"], "rss")) / 1024.0))
        # verify reads every stored byte back, decrypting and checking it
        name = "enc-%d" % (REPS - 1)
        t0 = time.monotonic()
        with open(t.path("verify.out"), "w+") as out:
            p = subprocess.Popen([BIN, "backup", "verify", name, "--kubeconfig", sim.kubeconfig,
                                  "-n", NS], stdout=out, stderr=subprocess.DEVNULL)
            _, status, ru = os.wait4(p.pid, 0)
            out.seek(0)
            text = out.read().strip()
        print("  cairn backup verify of the encrypted backup: %.2fs, peak RSS %.1f MiB, exit %d: %s" % (
            time.monotonic() - t0, ru.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status),
            text[:200]))
        print("  (load average now %.1f: the machine is shared; the ratio is of pairs measured "
              "side by side)" % os.getloadavg()[0])
    finally:
        t.finish()


main()
