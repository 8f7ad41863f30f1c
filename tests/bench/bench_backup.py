"""bench_backup: backups by `cairn server` (default flags, fs storage)
against the plain paged list of the same objects (issues 26, 27). Prints
figures and same-run ratios, never fails.

Sets ($CAIRN_BENCH_BACKUP_SETS, default "configmaps:10000,100000
realistic:10000,100000 latency:10000"; "configmaps:1000000" is the heavy
one, ~10 min, not in the default):
  - configmaps: tiny identical ConfigMaps (the best case of a backup);
  - realistic: objects shaped like a real cluster's (tests/lib/realistic.py:
    Secrets 1-50 KiB, Pods, ReplicaSets, Deployments... with managedFields
    and last-applied annotations, ~5.3 KB of JSON each);
  - latency: realistic objects through tests/lib/latencyproxy.py adding
    $CAIRN_BENCH_LATENCY_MS (default 0,5,20) per round trip, backup against
    the minimal (serial) list through the same proxy (issue 27: <= 1.2x).
For each set and size, $CAIRN_BENCH_REPS rounds (default 5), interleaved:
  - the minimal list (tests/helpers/minilist: one keep-alive connection,
    limit=500, gzip, continue tokens read without parsing items) of the
    same collections, cluster-wide: what any lister must do;
  - a backup by this build, and by $CAIRN_BENCH_BASE_BIN when set (the
    build to compare with), each in a fresh server: wall time from the
    Backup's creation to its final phase, server CPU (user+sys) per object
    (CPU-seconds per 1k objects, us per object),
    peak RSS (VmHWM), kubesim's CPU;
then medians, the ratio backup/list (goal <= 1.5 realistic, 1.3-1.5
ConfigMaps), CPU per object this/base, RSS growth between the sizes (goal
< 20%), and the physical limits measured on the same bytes: `gzip -1` and
`gzip -6` (one thread, CPU seconds) of the backup's tar stream.
For every backup the request log says what the server asked while it ran
(kubesim's /_sim/requests, its user agent): requests, the most list
requests in flight at once, and the bytes of its list replies, as JSON and
as sent, against the minimal list's (issue 27: at most 5% over), and
where the wall time went: before the first list, listing (and how much of
it with no list in flight), after the last page.
First (issue 17; $CAIRN_BENCH_ONE_NS=0 skips it): a backup of one
namespace of $CAIRN_BENCH_ONE_NS ConfigMaps (default 2000) on a cluster
with $CAIRN_BENCH_ELSEWHERE (default 100000) in other namespaces, next to
the minimal list of that namespace, with the requests about anything else.
Instruction counts (repeatable on a loaded machine, unlike seconds): with
valgrind, one backup per build of the first size of each set runs under
callgrind, counted from the Backup's creation to its final phase
($CAIRN_BENCH_CALLGRIND=0 skips it; $CAIRN_BENCH_CALLGRIND_KEEP=DIR keeps
the dumps there for callgrind_annotate).
"""
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cairntest import BIN, BUILDDIR, Case, Kubesim, vmhwm_kib  # noqa: E402
import realistic  # noqa: E402
from latencyproxy import LatencyProxy  # noqa: E402

NS = "cairn-system"
SETS = os.environ.get("CAIRN_BENCH_BACKUP_SETS",
                      "configmaps:10000,100000 realistic:10000,100000 latency:10000")
DELAYS = [int(x) for x in os.environ.get("CAIRN_BENCH_LATENCY_MS", "0,5,20").split(",")]
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "5")))
BASE_BIN = os.environ.get("CAIRN_BENCH_BASE_BIN")
CALLGRIND = os.environ.get("CAIRN_BENCH_CALLGRIND", "1") != "0" and shutil.which("valgrind")
KEEP = os.environ.get("CAIRN_BENCH_CALLGRIND_KEEP")
MINILIST = os.path.join(BUILDDIR, "tests", "helpers", "minilist")
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
CM_PATHS = ["/api/v1/configmaps"]
BULK_STEP = 50000
PLURAL = {"Endpoints": "endpoints", "PodDisruptionBudget": "poddisruptionbudgets",
          "Ingress": "ingresses", "PersistentVolumeClaim": "persistentvolumeclaims"}


def kind_path(kind):
    api = realistic.API[kind]
    plural = PLURAL.get(kind, kind.lower() + "s")
    return ("/api/%s/%s" if "/" not in api else "/apis/%s/%s") % (api, plural)


REALISTIC_PATHS = sorted({kind_path(k) for k, _ in realistic.MIX})


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def med(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(v) if v else None


def minilist(sim, paths, url=None):
    """The minimal list of paths; -> {wall, cpu, sim_cpu, wire, bytes}."""
    s0 = cpu_s(sim.proc.pid)
    t0 = time.monotonic()
    p = subprocess.Popen([MINILIST, "--server", url or sim.url, "--token", sim.token, "--insecure",
                          "--limit", "500"] + paths, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.stdout.close()
    if status != 0:
        raise SystemExit("minilist failed: %s" % out)
    kv = dict(x.split("=", 1) for x in out.split())
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "sim_cpu": cpu_s(sim.proc.pid) - s0,
            "wire": int(kv["wire"]), "bytes": int(kv["bytes"]), "pages": int(kv["pages"])}


DATA_LIST = re.compile(r"^/(api|apis/[^/]+)/[^/]+/(namespaces/[^/]+/)?[^/]+$")


def inflight(reqs):
    """The most requests of reqs in flight at once (from time, duration)."""
    ev = sorted([(q["time"], 1) for q in reqs] + [(q["time"] + q.get("duration", 0), -1) for q in reqs])
    cur = most = 0
    for _, d in ev:
        cur += d
        most = max(most, cur)
    return most


def phases(lists, t0, wall):
    """Where a backup's wall time went, from its list requests (kubesim's
    log: start time and duration; t0 the Backup's POST): ms before the
    first list, listing (first start to the end of the last page holding
    items), of that the time with no list in flight, and after the last
    page (the walk catching up, the last part, metadata files, final
    status)."""
    # the walk's pages: a list whose reply holds no item (the related
    # PersistentVolumes, listed after the walk) would stretch the listing
    # over the walk's tail
    full = [q for q in lists if q.get("bytes", 0) > 1024] or lists
    spans = sorted((q["time"], q["time"] + q.get("duration", 0)) for q in full)
    if not spans:
        return {}
    first, last = spans[0][0], max(e for _, e in spans)
    idle, reach = 0.0, first
    for a, e in spans:
        idle += max(0.0, a - reach)
        reach = max(reach, e)
    return {"pre_ms": 1e3 * (first - t0), "list_ms": 1e3 * (last - first), "idle_ms": 1e3 * idle,
            "after_ms": 1e3 * (t0 + wall - last)}


def server_requests(sim, seq, t_end):
    """What cairn asked after seq until t_end, and its data lists: (all, lists)."""
    log = sim.ok("GET", "/_sim/requests?since=%d" % seq)
    mine = [q for q in log if (q.get("userAgent") or "").startswith("cairn") and q["time"] <= t_end]
    lists = [q for q in mine if q["method"] == "GET" and "limit=" in (q.get("query") or "") and
             DATA_LIST.match(q["path"]) and "/cairn.io/" not in q["path"] and
             "/coordination.k8s.io/" not in q["path"]]
    return mine, lists


def watch_final(sim, name, rv):
    """Watch Backups from rv until name is final; the object, or None."""
    u = urllib.parse.urlparse(sim.url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=3600)
        conn.request("GET", "/apis/cairn.io/v1/namespaces/%s/backups?watch=1&resourceVersion=%s"
                     % (NS, rv), headers={"Authorization": "Bearer " + sim.token})
        resp = conn.getresponse()
        while resp.status == 200:
            line = resp.readline()
            if not line:
                return None
            o = json.loads(line).get("object", {})
            if o.get("metadata", {}).get("name") == name and o.get("status", {}).get("phase") in FINAL:
                conn.close()
                return o
    except (OSError, ValueError, http.client.HTTPException):
        pass
    return None


def callgrind_out(path):
    """Instructions (Ir) in a callgrind dump, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def backup(t, sim, binary, name, spec, cg=False, kubeconfig=None):
    """One backup by a fresh server; -> figures."""
    argv = [binary, "server", "--kubeconfig", kubeconfig or sim.kubeconfig, "--namespace", NS,
            "--server-id", "bench",
            "--journal", t.path("j-%s.db" % name), "--log-level", "warn"]
    cgdir = None
    if cg:
        cgdir = tempfile.mkdtemp(dir=t.dir, prefix="cg-")
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/cg" % cgdir] + argv
    srv = t.spawn(argv, name="server-%s" % name)
    time.sleep(8 if cg else 0.5)  # started, first scan done
    if cg:
        subprocess.run(["callgrind_control", "-z", str(srv.pid)], capture_output=True)
    cpu0, sim0 = cpu_s(srv.pid), cpu_s(sim.proc.pid)
    seq0 = sim.requests()[-1]["seq"] if not cg else None
    t0, t0_epoch = time.monotonic(), time.time()
    created = sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": name, "namespace": NS},
        "spec": spec})
    b = watch_final(sim, name, created["metadata"]["resourceVersion"])
    wall = time.monotonic() - t0
    r = {"wall": wall, "cpu": cpu_s(srv.pid) - cpu0, "sim_cpu": cpu_s(sim.proc.pid) - sim0,
         "rss": vmhwm_kib(srv.pid), "phase": (b or {}).get("status", {}).get("phase"),
         "items": (b or {}).get("status", {}).get("progress", {}).get("itemsBackedUp")}
    if seq0 is not None:
        mine, lists = server_requests(sim, seq0, time.time())
        r.update({"requests": len(mine), "inflight": inflight(lists), "list_bytes":
                  sum(q.get("bytes", 0) for q in lists), "list_wire": sum(q.get("wire", 0) for q in lists),
                  "log": mine})
        r.update(phases(lists, t0_epoch, wall))
    if cg:
        subprocess.run(["callgrind_control", "-d", str(srv.pid)], capture_output=True)
        dumps = [os.path.join(cgdir, f) for f in os.listdir(cgdir) if re.match(r"cg\.\d+$", f)]
        r["insn"] = sum(callgrind_out(p) or 0 for p in dumps) or None
        r["cgdir"] = cgdir
    srv.stop()
    return r


def tar_stream(root, name):
    """The backup's tarball, inflated, as a file; its path, or None."""
    for d, _, files in os.walk(root):
        if name + ".tar.gz" in files:
            out = os.path.join(os.path.dirname(root), "stream-%s.tar" % name)
            with open(out, "wb") as f:
                subprocess.run(["gzip", "-dc", os.path.join(d, name + ".tar.gz")], stdout=f, check=True)
            return out
    return None


def gzip_cpu(path, level):
    """CPU seconds of one-thread `gzip -LEVEL` of the file (best of 3)."""
    best = None
    for _ in range(3):
        p = subprocess.Popen(["gzip", "-%d" % level, "-c", path], stdout=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        c = ru.ru_utime + ru.ru_stime
        best = c if best is None else min(best, c)
    return best


def run_size(t, sim, kind, n, bins, root):
    spec = {"includedNamespaces": ["bench-*"], "includeClusterResources": False}
    if kind == "configmaps":
        spec["includedResources"] = ["configmaps"]
    paths = CM_PATHS if kind == "configmaps" else REALISTIC_PATHS
    lists, runs = [], {label: [] for label, _ in bins}
    last = {}
    for rep in range(REPS):
        order = bins if rep % 2 == 0 else list(reversed(bins))
        for label, binary in order:
            lst = minilist(sim, paths)
            lists.append(lst)
            name = "b-%s-%d-%d-%s" % (kind[:2], n, rep, label)
            r = backup(t, sim, binary, name, spec)
            r["ratio"] = r["wall"] / lst["wall"]
            runs[label].append(r)
            last[label] = name
            if rep < REPS - 1:
                shutil.rmtree(os.path.join(root, "backups"), ignore_errors=True)
    print("%s, %d objects, medians of %d rounds (load average %.1f)" % (kind, n, REPS, os.getloadavg()[0]))
    ml = lists[-1]
    print("  minimal list (minilist, %d collections): %.2f s, client CPU %.2f s, kubesim CPU %.2f s, "
          "%d pages, %.1f MB JSON, %.1f MB on the wire" % (
              len(paths), med(lists, "wall"), med(lists, "cpu"), med(lists, "sim_cpu"), ml["pages"],
              ml["bytes"] / 1e6, ml["wire"] / 1e6))
    out = {}
    for label, _ in bins:
        rs = runs[label]
        # per object of the cluster's n, whatever each build counts as an
        # item (at 10k realistic the base build reports 12905 items)
        items = n
        print("  %-5s %s items=%s: backup %.2f s = %.2fx the list (runs %s)" % (
            label, rs[-1]["phase"], rs[-1]["items"], med(rs, "wall"), med(rs, "ratio"),
            " ".join("%.2f" % r["ratio"] for r in rs)))
        print("        server CPU %.2f s = %.3f CPU-s per 1k objects = %.1f us/object (%.1f MB JSON per "
              "CPU-second; runs %s), kubesim CPU %.2f s" % (
                  med(rs, "cpu"), 1e3 * med(rs, "cpu") / items, 1e6 * med(rs, "cpu") / items,
                  ml["bytes"] / 1e6 / max(med(rs, "cpu"), 1e-9), " ".join("%.2f" % r["cpu"] for r in rs),
                  med(rs, "sim_cpu")))
        print("        peak RSS %.1f MiB (runs %s; goal < 32 at 100k realistic)" % (
            med(rs, "rss") / 1024.0, " ".join("%.1f" % (r["rss"] / 1024.0) for r in rs)))
        print_requests(rs, ml)
        out[label] = {"rss": med(rs, "rss"), "cpu_obj": med(rs, "cpu") / items}
    if len(bins) == 2:
        print("  this/base: wall %.2f, CPU per object %.2f (issue 26: halved, <= 0.50; medians of this "
              "run)" % (med(runs["this"], "wall") / med(runs["base"], "wall"),
                        out["this"]["cpu_obj"] / out["base"]["cpu_obj"]))
    stream = tar_stream(root, last["this"])
    if stream:
        sz = os.path.getsize(stream)
        g1, g6 = gzip_cpu(stream, 1), gzip_cpu(stream, 6)
        print("  physical limits on the same bytes: tar stream %.1f MB; gzip -1 %.2f CPU s, gzip -6 %.2f "
              "CPU s (one thread); the list's client %.2f CPU s" % (sz / 1e6, g1, g6, med(lists, "cpu")))
        os.unlink(stream)
    shutil.rmtree(os.path.join(root, "backups"), ignore_errors=True)
    sys.stdout.flush()
    return out


def print_requests(rs, ml):
    """The server's requests against the minimal list (medians)."""
    if med(rs, "list_bytes") is None:
        return
    print("        %d requests, at most %d list requests in flight; list replies %.1f MB JSON (%+.1f%% "
          "vs the minimal list), %.1f MB as sent (%+.1f%%; goal <= +5%%)" % (
              med(rs, "requests"), med(rs, "inflight"), med(rs, "list_bytes") / 1e6,
              100.0 * (med(rs, "list_bytes") - ml["bytes"]) / ml["bytes"], med(rs, "list_wire") / 1e6,
              100.0 * (med(rs, "list_wire") - ml["wire"]) / ml["wire"]))
    if med(rs, "list_ms") is not None:
        print("        time: %.0f ms before the first list, %.0f ms listing (%.0f ms of it with no list in "
              "flight), %.0f ms after the last page (medians)" % (
                  med(rs, "pre_ms"), med(rs, "list_ms"), med(rs, "idle_ms"), med(rs, "after_ms")))


def run_latency(t, sim, n, bins, root):
    """Backups and the minimal list through a proxy adding each delay."""
    spec = {"includedNamespaces": ["bench-*"], "includeClusterResources": False}
    port = int(sim.url.rsplit(":", 1)[1])
    print("realistic objects through a latency proxy (tests/lib/latencyproxy.py), %d objects, medians of "
          "%d rounds" % (n, REPS))
    for delay in DELAYS:
        proxy = LatencyProxy(t, port, delay, name="latency-%d" % delay)
        kc = proxy.kubeconfig(sim.kubeconfig)
        url = "https://127.0.0.1:%d" % proxy.port
        lists, runs = [], {label: [] for label, _ in bins}
        for rep in range(REPS):
            for label, binary in (bins if rep % 2 == 0 else list(reversed(bins))):
                lst = minilist(sim, REALISTIC_PATHS, url)
                lists.append(lst)
                r = backup(t, sim, binary, "lat-%d-%d-%s" % (delay, rep, label), spec, kubeconfig=kc)
                r["ratio"] = r["wall"] / lst["wall"]
                runs[label].append(r)
                shutil.rmtree(os.path.join(root, "backups"), ignore_errors=True)
        print("  +%2d ms per round trip: minimal serial list %.2f s; %s" % (delay, med(lists, "wall"), "; ".join(
            "%s backup %.2f s = %.2fx (goal <= 1.2; runs %s; %d requests, at most %d lists in flight)" % (
                label, med(runs[label], "wall"), med(runs[label], "ratio"),
                " ".join("%.2f" % r["ratio"] for r in runs[label]), med(runs[label], "requests"),
                med(runs[label], "inflight"))
            for label, _ in bins)))
        proxy.proc.stop()
    sys.stdout.flush()


def run_callgrind(t, sim, kind, n, bins, root):
    spec = {"includedNamespaces": ["bench-*"], "includeClusterResources": False}
    if kind == "configmaps":
        spec["includedResources"] = ["configmaps"]
    for label, binary in bins:
        r = backup(t, sim, binary, "cg-%s-%d-%s" % (kind[:2], n, label), spec, cg=True)
        items = r["items"] or n
        print("  callgrind %-5s: %s, %.2fG instructions = %.0f per object (from the Backup's creation "
              "to its final phase, all threads)" % (label, r["phase"], (r["insn"] or 0) / 1e9,
                                                   (r["insn"] or 0) / items))
        shutil.rmtree(os.path.join(root, "backups"), ignore_errors=True)
        if KEEP:
            os.makedirs(KEEP, exist_ok=True)
            for f in os.listdir(r["cgdir"]):
                if re.match(r"cg\.\d+$", f):
                    shutil.copy(os.path.join(r["cgdir"], f), os.path.join(
                        KEEP, "callgrind.%s-%d-%s.%s" % (kind, n, label, f.split(".")[1])))
        shutil.rmtree(r["cgdir"], ignore_errors=True)
    sys.stdout.flush()


def one_set(t, kind, sizes, bins):
    sim = Kubesim(t, name="kubesim-%s" % kind)
    sim.install_crds(NS)
    root = t.mkdir("store-%s" % kind)
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"}, "config": {"path": root},
                 "default": True}})
    have, res = 0, []
    for n in sizes:
        t0 = time.monotonic()
        if kind == "configmaps":
            for ns in ("bench-a", "bench-b"):
                if have == 0:
                    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": ns}})
                # in steps: one /_sim/bulk of 500k outlasts the client's timeout
                for lo in range(have // 2, n // 2, BULK_STEP):
                    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"labels": {"app": "bench", "tier": "web"}},
                              "data": {"config.yaml": "server:\n  port: 8080\n  replicas: 3\n" * 4}},
                             min(BULK_STEP, n // 2 - lo), name="cm-{i:07d}", namespace=ns, start=lo)
        else:
            realistic.populate(sim, n - have, seed=1, start=have)
        have = n
        print("(%s: %d objects in kubesim after %.0f s of setup)" % (kind, n, time.monotonic() - t0),
              flush=True)
        if kind == "latency":
            run_latency(t, sim, n, bins, root)
            continue
        if CALLGRIND and n == sizes[0]:
            run_callgrind(t, sim, kind, n, bins, root)
        res.append((n, run_size(t, sim, kind, n, bins, root)))
    sim.proc.stop()
    if len(res) >= 2:
        for label, _ in bins:
            a, b = res[0][1][label]["rss"], res[-1][1][label]["rss"]
            print("%s %-5s: peak RSS %d -> %d objects: %.1f -> %.1f MiB, %+.1f%% (goal < 20%%)" % (
                kind, label, res[0][0], res[-1][0], a / 1024.0, b / 1024.0, 100.0 * (b - a) / a))
    sys.stdout.flush()


ONE_NS = int(os.environ.get("CAIRN_BENCH_ONE_NS", "2000"))
ELSEWHERE = int(os.environ.get("CAIRN_BENCH_ELSEWHERE", "100000"))


def one_namespace(t, bins):
    """Issue 17: a backup of one namespace (ONE_NS ConfigMaps) on a cluster
    with ELSEWHERE ConfigMaps in other namespaces, next to the minimal list
    of that namespace; the request log says whether anything else was asked."""
    sim = Kubesim(t, name="kubesim-one-ns")
    sim.install_crds(NS)
    root = t.mkdir("store-one-ns")
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"}, "config": {"path": root},
                 "default": True}})
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
    for rep in range(REPS):
        for label, binary in (bins if rep % 2 == 0 else list(reversed(bins))):
            lists.append(minilist(sim, ["/api/v1/namespaces/app/configmaps"]))
            r = backup(t, sim, binary, "one-%d-%s" % (rep, label), spec)
            r["ratio"] = r["wall"] / lists[-1]["wall"]
            r["outside"] = len([q for q in r["log"] if q["method"] == "GET" and
                                ("/namespaces/other-" in q["path"] or
                                 re.match(r"^/api/v1/(configmaps|secrets|pods)$", q["path"]))])
            runs[label].append(r)
            shutil.rmtree(os.path.join(root, "backups"), ignore_errors=True)
    sim.proc.stop()
    print("one namespace of %d ConfigMaps, %d ConfigMaps elsewhere, medians of %d rounds" %
          (ONE_NS, ELSEWHERE, REPS))
    print("  minimal list of the namespace (minilist): %.3f s" % med(lists, "wall"))
    for label, _ in bins:
        rs = runs[label]
        print("  %-5s %s items=%s: backup %.3f s = %.2fx the list; %d requests, %d of them about other "
              "namespaces or the whole cluster (runs %s)" % (
                  label, rs[-1]["phase"], rs[-1]["items"], med(rs, "wall"), med(rs, "ratio"),
                  med(rs, "requests"), max(r["outside"] for r in rs),
                  " ".join("%.3f" % r["wall"] for r in rs)))
    sys.stdout.flush()


def main():
    if not os.path.exists(MINILIST):
        print("tests/helpers/minilist not built (make check builds it)")
        return
    t = Case("bench_backup")
    bins = [("this", BIN)]
    if BASE_BIN:
        bins = [("base", BASE_BIN), ("this", BIN)]
    try:
        if os.environ.get("CAIRN_BENCH_ONE_NS", "1") != "0":
            one_namespace(t, bins)
        for spec in SETS.split():
            kind, _, sizes = spec.partition(":")
            one_set(t, kind, sorted(int(x) for x in sizes.split(",")), bins)
    finally:
        t.finish()


if __name__ == "__main__":
    main()
