"""bench_backup.py: issue 7's backup numbers (prints figures, never fails).

For N ConfigMaps in kubesim (N = 10k and 100k, or $CAIRN_BENCH_BACKUP_SIZES):
  - cairn backup wall time (Backup created -> Completed, fs storage, default
    8 MiB parts), as a ratio to a plain paged list of the same objects
    through the same client (tests/helpers/kube_tool list, limit 500), to
    the same list with the prefetch backups use (kube_list_opts.prefetch),
    and to `kubectl get configmaps -A -o json | gzip > file`;
  - the server's peak RSS (VmHWM) after each backup, each backup in a fresh
    server process;
  - CPU seconds of the cairn process and of kubesim for the list and for the
    backup, and user-space instructions (`perf stat`, when it works here):
    instruction counts hardly move with the load of a shared machine.
Goals (issue 7): ratio to the plain list <= 1.3, at least 3x faster than
kubectl | gzip, peak RSS under 32 MiB and growing less than 20% from 10k
to 100k.

First (issue 17; $CAIRN_BENCH_ONE_NS=0 skips it): a backup of one
namespace of $CAIRN_BENCH_ONE_NS ConfigMaps (default 2000) on a cluster
with $CAIRN_BENCH_ELSEWHERE (default 100k) in other namespaces, next to a
plain list of that namespace, with the count of requests about anything
else.

The machine is shared, so each figure is the median of
$CAIRN_BENCH_REPS runs (default 3), and each backup is paired with a plain
list measured right before it. To compare two builds in the same run, set
$CAIRN_BENCH_BASE_BIN to the other build's cairn binary: every repetition
then runs a backup with it and one with $CAIRN_BIN, interleaved.
$CAIRN_BENCH_KUBECTL=0 skips the (slow) kubectl baseline.
"""
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import ssl
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from bkworld import World  # noqa: E402
from cairntest import BIN, BUILDDIR, Case, Kubesim, wait_for, vmhwm_kib  # noqa: E402

NS = "cairn-system"
SIZES = [int(x) for x in os.environ.get("CAIRN_BENCH_BACKUP_SIZES", "10000,100000").split(",")]
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "3")))
BASE_BIN = os.environ.get("CAIRN_BENCH_BASE_BIN")
KUBECTL = os.environ.get("CAIRN_BENCH_KUBECTL", "1") != "0"
TOOL = os.path.join(BUILDDIR, "tests", "helpers", "kube_tool")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def perf_works():
    if shutil.which("perf") is None:
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "--", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "instructions" in r.stderr and "<not" not in r.stderr


PERF = perf_works()


def perf_read(path):
    """Instructions from a `perf stat -x,` output file, or None."""
    try:
        with open(path) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[2].startswith("instructions") and parts[0].isdigit():
                    return int(parts[0])
    except OSError:
        pass
    return None


def plain_list(t, sim, tag, prefetch=False, ns="-"):
    """The baseline: the same paged list through the same client."""
    argv = [TOOL, "--kubeconfig", sim.kubeconfig, "list", "core", "v1", "configmaps", ns,
            "limit=500"] + (["prefetch"] if prefetch else [])
    pf = t.path("perf-list-%s.txt" % tag)
    if PERF:
        argv = ["perf", "stat", "-x,", "-e", "instructions:u", "-o", pf, "--"] + argv
    sim_cpu0 = cpu_s(sim.proc.pid)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    _, ru = os.wait4(p.pid, 0)[1:]
    wall = time.monotonic() - t0
    out = p.stdout.read()
    p.stdout.close()
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "sim_cpu": cpu_s(sim.proc.pid) - sim_cpu0,
            "insn": perf_read(pf) if PERF else None, "out": out.strip()}


FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def watch_final(sim, name, rv):
    """Watch Backups from rv until name reaches a final phase; None if the watch fails."""
    u = urllib.parse.urlparse(sim.url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=1800)
        conn.request("GET", "/apis/cairn.io/v1/namespaces/%s/backups?watch=1&resourceVersion=%s"
                     % (NS, rv), headers={"Authorization": "Bearer " + sim.token})
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        while True:
            line = resp.readline()
            if not line:
                return None
            ev = json.loads(line)
            o = ev.get("object", {})
            if (o.get("metadata", {}).get("name") == name and
                    o.get("status", {}).get("phase") in FINAL):
                conn.close()
                return o
    except (OSError, ValueError, http.client.HTTPException):
        return None


BULK_SPEC = {"includedResources": ["configmaps"], "includeClusterResources": False,
             "includedNamespaces": ["bench-*"]}


def backup(t, sim, binary, name, spec=None):
    """One backup by a fresh server: wall time Backup created -> final phase."""
    srv = t.spawn([binary, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "bench", "--journal", t.path("j-%s.db" % name),
                   "--retry-period", "100ms",
                   "--log-level", os.environ.get("CAIRN_BENCH_LOG", "warn")],
                  name="server-%s" % name)
    time.sleep(0.5)  # let the server start and do its first scan
    perf = None
    pf = t.path("perf-%s.txt" % name)
    if PERF:
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "instructions:u", "-o", pf,
                                 "-p", str(srv.pid)], stderr=subprocess.DEVNULL)
        time.sleep(0.2)
    cpu0 = cpu_s(srv.pid)
    sim_cpu0 = cpu_s(sim.proc.pid)
    t0 = time.monotonic()
    created = sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": name, "namespace": NS},
        "spec": spec or BULK_SPEC})
    # A watch sees the final phase at once and puts no polling load on kubesim.
    b = watch_final(sim, name, created["metadata"]["resourceVersion"])
    if b is None:
        def done():
            o = sim.ok("GET", "/apis/cairn.io/v1/namespaces/%s/backups/%s" % (NS, name))
            return o if o.get("status", {}).get("phase") in FINAL else None
        b = wait_for(done, 1800, "backup %s" % name, interval=0.02)
    wall = time.monotonic() - t0
    insn = None
    if perf is not None:
        perf.send_signal(signal.SIGINT)
        perf.wait()
        insn = perf_read(pf)
    r = {"wall": wall, "cpu": cpu_s(srv.pid) - cpu0, "sim_cpu": cpu_s(sim.proc.pid) - sim_cpu0,
         "rss": vmhwm_kib(srv.pid), "insn": insn, "phase": b["status"]["phase"],
         "items": b["status"].get("progress", {}).get("itemsBackedUp"),
         "parts": len(b["status"].get("checkpoint", {}).get("parts", []))}
    srv.stop()
    return r


def fs_world(t, sim, store):
    """cairn's CRDs and a default fs location in directory store; its path."""
    w = World(t, sim=sim)
    root = t.mkdir(store)
    w.fs_location(root)
    return root


def med(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(v) if v else None


def fmt_insn(x):
    return "-" if x is None else "%.2fG" % (x / 1e9)


def one(t, n, bins):
    sim = Kubesim(t, name="kubesim-%d" % n)
    root = fs_world(t, sim, "store-%d" % n)
    for ns in ("bench-a", "bench-b"):
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})
        sim.bulk({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"labels": {"app": "bench", "tier": "web"}},
                  "data": {"config.yaml": "server:\n  port: 8080\n  replicas: 3\n" * 4}},
                 n // 2, name="cm-{i:07d}", namespace=ns)

    t_kubectl = None
    if KUBECTL:
        out = t.path("kubectl-%d.json.gz" % n)
        t0 = time.monotonic()
        subprocess.run("kubectl --kubeconfig %s --cache-dir %s get configmaps -A -o json | gzip > %s" %
                       (sim.kubeconfig, t.path("kc-cache-%d" % n), out), shell=True, check=True)
        t_kubectl = time.monotonic() - t0

    lists, pflists = [], []
    runs = {label: [] for label, _ in bins}
    for rep in range(REPS):
        for label, binary in bins:
            # A plain list right before each backup: the pair sees the same load.
            lst = plain_list(t, sim, "%d-%d-%s" % (n, rep, label))
            lists.append(lst)
            pf = plain_list(t, sim, "%d-%d-%s-pf" % (n, rep, label), prefetch=True)
            pflists.append(pf)
            r = backup(t, sim, binary, "b%d-%d-%s" % (n, rep, label))
            r["ratio"] = r["wall"] / lst["wall"]
            r["pf_ratio"] = r["wall"] / pf["wall"]
            if r["insn"] is not None and lst["insn"]:
                r["insn_ratio"] = r["insn"] / lst["insn"]
            runs[label].append(r)
            # Old backups' objects stay in kubesim; storage files are removed.
            shutil.rmtree(os.path.join(root, "bk"), ignore_errors=True)
    sim.proc.stop()

    print("objects=%d, medians of %d runs%s" % (n, REPS, " (perf stat: user-space instructions)"
                                                 if PERF else ""))
    print("  plain paged list (kube_tool): %.2fs, client CPU %.2fs, kubesim CPU %.2fs, %s insn  [%s]" % (
        med(lists, "wall"), med(lists, "cpu"), med(lists, "sim_cpu"), fmt_insn(med(lists, "insn")),
        lists[-1]["out"]))
    print("  the same list with prefetch (the next page fetched while one is processed, as "
          "backups list): %.2fs, client CPU %.2fs" % (med(pflists, "wall"), med(pflists, "cpu")))
    if t_kubectl is not None:
        print("  kubectl get -A -o json | gzip: %.2fs" % t_kubectl)
    for label, _ in bins:
        rs = runs[label]
        w = med(rs, "wall")
        print("  %s: phase=%s items=%s parts=%d" % (label, rs[-1]["phase"], rs[-1]["items"],
                                                    rs[-1]["parts"]))
        print("    backup %.2fs  ratio to list %.2f (goal <= 1.3), to the prefetching list %.2f%s" % (
            w, med(rs, "ratio"), med(rs, "pf_ratio"),
            ", kubectl/cairn %.2f (goal >= 3)" % (t_kubectl / w) if t_kubectl else ""))
        print("    server CPU %.2fs, kubesim CPU %.2fs, server %s insn (%s x the list's)" % (
            med(rs, "cpu"), med(rs, "sim_cpu"), fmt_insn(med(rs, "insn")),
            "-" if med(rs, "insn_ratio") is None else "%.2f" % med(rs, "insn_ratio")))
        print("    peak RSS (VmHWM) %.1f MiB (goal < 32)" % (med(rs, "rss") / 1024.0))
        print("    runs: %s" % " ".join("%.2fs/%.2fx" % (r["wall"], r["ratio"]) for r in rs))
    print("  (load average now %.1f: wall-clock ratios are only meaningful on an idle machine)" %
          os.getloadavg()[0])
    return {label: med(runs[label], "rss") for label, _ in bins}


ONE_NS = int(os.environ.get("CAIRN_BENCH_ONE_NS", "2000"))
ELSEWHERE = int(os.environ.get("CAIRN_BENCH_ELSEWHERE", "100000"))


def one_namespace(t, bins):
    """Issue 17: a backup of one namespace (ONE_NS ConfigMaps) on a cluster
    with ELSEWHERE ConfigMaps in other namespaces, next to a plain list of
    that namespace; the request log says whether anything else was asked."""
    sim = Kubesim(t, name="kubesim-one-ns")
    root = fs_world(t, sim, "store-one-ns")
    for ns in ("app", "other-a", "other-b"):
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})
    tmpl = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"app": "bench"}},
            "data": {"config.yaml": "server:\n  port: 8080\n  replicas: 3\n" * 4}}
    for ns in ("other-a", "other-b"):
        sim.bulk(tmpl, ELSEWHERE // 2, name="cm-{i:07d}", namespace=ns)
    sim.bulk(tmpl, ONE_NS, name="cm-{i:07d}", namespace="app")
    spec = {"includedNamespaces": ["app"]}
    lists, runs = [], {label: [] for label, _ in bins}
    outside = {}
    for rep in range(REPS):
        for label, binary in bins:
            lists.append(plain_list(t, sim, "one-%d-%s" % (rep, label), ns="app"))
            seq = sim.requests()[-1]["seq"]
            r = backup(t, sim, binary, "one-%d-%s" % (rep, label), spec)
            r["ratio"] = r["wall"] / lists[-1]["wall"]
            r["requests"] = [q for q in sim.requests() if q["seq"] > seq and
                             not q["path"].startswith("/_sim")]
            outside[label] = len([q for q in r["requests"] if q["method"] == "GET" and
                                  "/namespaces/other-" in q["path"] or
                                  re.match(r"^/api/v1/(configmaps|secrets|pods)$", q["path"])])
            runs[label].append(r)
            shutil.rmtree(os.path.join(root, "bk"), ignore_errors=True)
    sim.proc.stop()
    print("one namespace of %d ConfigMaps, %d ConfigMaps elsewhere, medians of %d runs" %
          (ONE_NS, ELSEWHERE, REPS))
    print("  plain paged list of the namespace (kube_tool): %.3fs" % med(lists, "wall"))
    for label, _ in bins:
        rs = runs[label]
        print("  %s: phase=%s items=%s: backup %.3fs, ratio to the list %.2f, %d requests, "
              "%d of them about other namespaces or the whole cluster" % (
                  label, rs[-1]["phase"], rs[-1]["items"], med(rs, "wall"), med(rs, "ratio"),
                  len(rs[-1]["requests"]), outside[label]))
        print("    runs: %s" % " ".join("%.3fs" % r["wall"] for r in rs))


def main():
    t = Case("bench_backup")
    bins = [("cairn", BIN)]
    if BASE_BIN:
        bins = [("base", BASE_BIN), ("cairn", BIN)]
    rss = []
    try:
        if os.environ.get("CAIRN_BENCH_ONE_NS", "1") != "0":
            one_namespace(t, bins)
        for n in SIZES:
            rss.append((n, one(t, n, bins)))
    finally:
        t.finish()
    if len(rss) >= 2:
        for label, _ in bins:
            a, b = rss[0][1][label], rss[-1][1][label]
            if a:
                print("%s: peak RSS growth %d -> %d objects: %+.1f%% (goal < 20%%)" % (
                    label, rss[0][0], rss[-1][0], 100.0 * (b - a) / a))


main()
