"""bench_backup.py: issue 7's backup numbers (prints figures, never fails).

For N ConfigMaps in kubesim (N = 10k and 100k, or $CAIRN_BENCH_BACKUP_SIZES):
  - cairn backup wall time (Backup created -> Completed, fs storage, default
    8 MiB parts), as a ratio to a plain paged list of the same objects
    through the same client (tests/helpers/kube_tool list, limit 500), and to
    `kubectl get configmaps -A -o json | gzip > file`;
  - the server's peak RSS (VmHWM) after each backup, each size in a fresh
    server process.
Goals (issue 7): ratio to the plain list <= 1.3, at least 3x faster than
kubectl | gzip, peak RSS under 32 MiB and growing less than 20% from 10k
to 100k.
"""
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cairntest import BIN, BUILDDIR, Case, Kubesim, wait_for  # noqa: E402

NS = "cairn-system"
SIZES = [int(x) for x in os.environ.get("CAIRN_BENCH_BACKUP_SIZES", "10000,100000").split(",")]


def vmhwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(t, n):
    sim = Kubesim(t, name="kubesim-%d" % n)
    sim.install_crds(NS)
    root = t.mkdir("store-%d" % n)
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"}, "config": {"path": root},
                 "default": True}})
    for ns in ("bench-a", "bench-b"):
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})
        sim.bulk({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"labels": {"app": "bench", "tier": "web"}},
                  "data": {"config.yaml": "server:\n  port: 8080\n  replicas: 3\n" * 4}},
                 n // 2, name="cm-{i:07d}", namespace=ns)

    # Baseline 1: the same paged list through the same client.
    tool = os.path.join(BUILDDIR, "tests", "helpers", "kube_tool")
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run([tool, "--kubeconfig", sim.kubeconfig, "list", "core", "v1", "configmaps",
                        "-", "limit=500"], capture_output=True, text=True)
    t_list = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    list_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    # Baseline 2: kubectl get -A -o json | gzip.
    out = t.path("kubectl-%d.json.gz" % n)
    t0 = time.monotonic()
    subprocess.run("kubectl --kubeconfig %s --cache-dir %s get configmaps -A -o json | gzip > %s" %
                   (sim.kubeconfig, t.path("kc-cache-%d" % n), out), shell=True, check=True)
    t_kubectl = time.monotonic() - t0

    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "bench", "--journal", t.path("j-%d.db" % n),
                   "--retry-period", "100ms", "--log-level", os.environ.get("CAIRN_BENCH_LOG", "warn")], name="server-%d" % n)
    time.sleep(0.5)  # let the server start and do its first scan
    t0 = time.monotonic()
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": "b%d" % n, "namespace": NS},
        "spec": {"includedResources": ["configmaps"], "includeClusterResources": False,
                 "includedNamespaces": ["bench-*"]}})

    def done():
        b = sim.ok("GET", "/apis/cairn.io/v1/namespaces/%s/backups/b%d" % (NS, n))
        return b if b.get("status", {}).get("phase") in ("Completed", "PartiallyFailed", "Failed",
                                                           "FailedValidation") else None
    b = wait_for(done, 1800, "backup of %d objects" % n, interval=0.05)
    t_backup = time.monotonic() - t0
    rss = vmhwm_kib(srv.pid)
    cpu = cpu_s(srv.pid)
    parts = len(b["status"].get("checkpoint", {}).get("parts", []))
    srv.stop()
    sim.proc.stop()
    print("objects=%d phase=%s items=%s parts=%d" % (n, b["status"]["phase"],
          b["status"].get("progress", {}).get("itemsBackedUp"), parts))
    print("  plain paged list (kube_tool): %.2fs, client CPU %.2fs  [%s]" % (t_list, list_cpu,
                                                                          r.stdout.strip()))
    print("  kubectl get -A -o json | gzip: %.2fs" % t_kubectl)
    print("  cairn backup: %.2fs  ratio to list %.2f (goal <= 1.3), kubectl/cairn %.2f (goal >= 3)" %
          (t_backup, t_backup / t_list, t_kubectl / t_backup))
    print("  server peak RSS (VmHWM): %.1f MiB (goal < 32); server CPU %.2fs (%.2fx the list's)" % (
        rss / 1024.0, cpu, cpu / list_cpu if list_cpu > 0 else 0.0))
    print("  (load average now %.1f: wall-clock ratios are only meaningful on an idle machine)" %
          os.getloadavg()[0])
    return rss


def main():
    t = Case("bench_backup")
    rss = []
    try:
        for n in SIZES:
            rss.append((n, one(t, n)))
    finally:
        t.finish()
    if len(rss) >= 2 and rss[0][1] > 0:
        print("peak RSS growth %d -> %d objects: %+.1f%% (goal < 20%%)" % (
            rss[0][0], rss[-1][0], 100.0 * (rss[-1][1] - rss[0][1]) / rss[0][1]))


main()
