"""bench_restore: restores by `cairn server` with its default flags against
`kubectl create -f` and `kubectl apply --server-side -f` of the very same
objects, each into a fresh kubesim, in the same run (issue 26):

  - secrets: N Secrets in one namespace (default 31,000: the shape of
    Velero issue #6845, 52 minutes there);
  - mixed: a namespace of M objects as a user restores them (default 5,000:
    ConfigMaps, Secrets of 1-50 KiB, ServiceAccounts, Deployments,
    StatefulSets, Services, Roles, RoleBindings, Ingresses, PDBs from
    tests/lib/realistic.py, with last-applied annotations);
  - latency: the mixed namespace again through tests/lib/latencyproxy.py
    adding $CAIRN_BENCH_RESTORE_DELAY_MS (default 5) to every round trip,
    for cairn and both kubectl commands alike: an API server that is not on
    loopback, or that waits for etcd to commit each write, as a real one
    does (the loopback runs above are capped by kubesim, one Python
    process: see "the ceiling");
  - pushback: the mixed namespace again while kubesim answers 429 with
    Retry-After to a share of the creates: the restore must complete with no
    error and no request sent before its Retry-After (tests/lib/reqlog.py);
    printed as PASS or FAIL.

The ceiling is measured too: a fresh kubesim fed the same creates over 8
keep-alive connections by a client that costs next to nothing (kubesim is
one Python process: no client can restore faster than that).
Each measurement is repeated $CAIRN_BENCH_REPS times (default 5),
interleaved, and medians printed with the ratios kubectl/cairn (goal: >= 3).
$CAIRN_BENCH_BASE_BIN (another build's cairn) also runs, in the first
$CAIRN_BENCH_BASE_REPS rounds (default 1: an old build with a 300/s client
limit needs ~2 min for 31k Secrets), for a before/after in the same run.
$CAIRN_BENCH_SECRETS, $CAIRN_BENCH_MIXED set the sizes;
$CAIRN_BENCH_RESTORE_SETS (default "secrets,mixed,latency,pushback") picks
scenarios.
The machine may be shared: read the ratios, not the seconds.
"""
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import urllib.parse

from cairntest import BIN, Case, SRCDIR

sys.path.insert(0, os.path.join(SRCDIR, "tests", "helpers"))
import restore_tarball as rt  # noqa: E402
import realistic  # noqa: E402
from latencyproxy import LatencyProxy  # noqa: E402
import reqlog  # noqa: E402
import rawhttp  # noqa: E402

NS = "cairn-system"
N_SECRETS = int(os.environ.get("CAIRN_BENCH_SECRETS", "31000"))
N_MIXED = int(os.environ.get("CAIRN_BENCH_MIXED", "5000"))
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "5")))
BASE_BIN = os.environ.get("CAIRN_BENCH_BASE_BIN")
BASE_REPS = int(os.environ.get("CAIRN_BENCH_BASE_REPS", "1"))
SETS = os.environ.get("CAIRN_BENCH_RESTORE_SETS", "secrets,mixed,latency,pushback").split(",")
DELAY_MS = float(os.environ.get("CAIRN_BENCH_RESTORE_DELAY_MS", "5"))
WORKERS = 8     # restore workers, and the ceiling's connections
MIXED_KINDS = [k for k in realistic.RESTORABLE if k not in ("PersistentVolumeClaim", "Job")]
EXTRA_RESOURCES = [("batch", "v1", "jobs", True), ("networking.k8s.io", "v1", "ingresses", True),
                   ("policy", "v1", "poddisruptionbudgets", True)]


CPU = []     # (server, kubesim) CPU seconds of each cairn restore


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def watch_restore(sim, name, rv, timeout=3600):
    """Wait on a watch until Restore name is final; -> the object."""
    u = sim.url.split("://", 1)[1]
    host, port = u.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    conn.request("GET", "/apis/cairn.io/v1/namespaces/%s/restores?watch=1&resourceVersion=%s" % (NS, rv))
    resp = conn.getresponse()
    while True:
        line = resp.readline()
        if not line:
            raise RuntimeError("restore watch ended")
        o = json.loads(line).get("object", {})
        if o.get("metadata", {}).get("name") == name and o.get("status", {}).get("phase") in rt.FINAL:
            conn.close()
            return o


def through(t, sim, tag, delay_ms):
    """sim's kubeconfig, or with delay_ms a copy through a latency proxy
    (stopped with the case) -> (kubeconfig, proxy or None)"""
    if not delay_ms:
        return sim.kubeconfig, None
    p = LatencyProxy(t, int(sim.url.rsplit(":", 1)[1]), delay_ms, name="%s-latency" % tag)
    return p.kubeconfig(sim.kubeconfig), p


def cairn_restore(t, tag, tb, count_path, n, binary=BIN, faults=None, delay_ms=0):
    """Restore the tarball by a fresh `cairn server` (default flags) into a
    fresh kubesim. -> (seconds, restore object, kubesim request log or None)."""
    a = t.kubesim(name="%s-target" % tag, tls=False)
    a.install_crds(NS)
    store = t.mkdir("%s-store" % tag)
    rt.install_backup(a, store, "b", tb)
    kc, proxy = through(t, a, tag, delay_ms)
    srv = t.spawn([binary, "server", "--kubeconfig", kc, "--namespace", NS,
                   "--journal", t.path("%s-journal.db" % tag), "--server-id", "bench",
                   "--log-level", "warn"], name="%s-server" % tag)
    time.sleep(0.5)     # started, first scan done
    if faults:
        a.ok("DELETE", "/_sim/requests")
        a.faults(faults)
    cpu0, sim0 = cpu_s(srv.pid), cpu_s(a.proc.pid)
    start = time.monotonic()
    created = rt.create_restore(a, "r", {"backupName": "b"})
    r = watch_restore(a, "r", created["metadata"]["resourceVersion"])
    secs = time.monotonic() - start
    CPU.append((cpu_s(srv.pid) - cpu0, cpu_s(a.proc.pid) - sim0))
    log = a.requests() if faults else None
    got = len(a.ok("GET", count_path)["items"])
    if r["status"]["phase"] != "Completed" or got != n:
        print("  %s: phase %s, %d of %d objects present, errors %s" % (
            tag, r["status"]["phase"], got, n, r["status"].get("errors")), flush=True)
    srv.stop()
    if proxy:
        proxy.proc.stop()
    a.proc.stop()
    return secs, r, log


def kubectl(t, tag, path, verb, count_path, n, namespace, delay_ms=0):
    """kubectl create -f / apply --server-side -f into a fresh kubesim. -> seconds"""
    b = t.kubesim(name="%s-target" % tag, tls=False)
    b.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": namespace}})
    kc, proxy = through(t, b, tag, delay_ms)
    args = ["create", "-f", path] if verb == "create" else \
        ["apply", "--server-side", "--field-manager", "bench", "-f", path]
    start = time.monotonic()
    p = subprocess.run(["kubectl", "--kubeconfig", kc, "--cache-dir", t.path("kcache")] +
                       args + ["--validate=false", "-o", "name"], capture_output=True, text=True)
    secs = time.monotonic() - start
    got = len(b.ok("GET", count_path)["items"])
    if p.returncode != 0 or got != n:
        print("  %s: exit %d, %d of %d present: %s" % (tag, p.returncode, got, n, p.stderr[-300:]),
              flush=True)
    if proxy:
        proxy.proc.stop()
    b.proc.stop()
    return secs


def kubesim_alone(t, tag, objs, namespace):
    """The ceiling: a fresh kubesim fed the same creates by WORKERS keep-alive
    connections from a client that costs next to nothing (pre-encoded
    requests over raw sockets, one process each). -> seconds"""
    k = t.kubesim(name="%s-target" % tag, tls=False)
    k.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": namespace}})
    u = urllib.parse.urlsplit(k.url)
    hostport = "%s:%d" % (u.hostname, u.port)
    reqs = []
    for o in objs:
        g, _, v = o["apiVersion"].rpartition("/")
        path = "/api%s/%s/namespaces/%s/%s" % ("s/" + g if g else "", v, namespace, rt_plural(o["kind"]))
        body = json.dumps(rt.normalize(o), separators=(",", ":")).encode()
        reqs.append(b"POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: bench\r\n"
                    b"Content-Type: application/json\r\nAccept: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (path.encode(), hostport.encode(), len(body), body))
    shards = [(u.hostname, u.port, reqs[j::WORKERS], b"201") for j in range(WORKERS)]
    with multiprocessing.Pool(WORKERS) as pool:
        start = time.monotonic()
        bad = sum(pool.map(rawhttp.send_all, shards))
        secs = time.monotonic() - start
    if bad:
        print("  %s: %d creates not 201" % (tag, bad), flush=True)
    k.proc.stop()
    return secs


def rt_plural(kind):
    return {"Endpoints": "endpoints", "Ingress": "ingresses", "PodDisruptionBudget": "poddisruptionbudgets",
            "PersistentVolumeClaim": "persistentvolumeclaims"}.get(kind, kind.lower() + "s")


def prepare(t, name, namespace, fill, resources):
    """Source objects -> (tarball bytes, kubectl file, items, count path)."""
    src = t.kubesim(name="%s-source" % name, tls=False)
    src.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": namespace}})
    fill(src)
    # what the target makes by itself (default ServiceAccount, root CA)
    items = [x for x in rt.dump(src, resources) if x[3]["metadata"]["name"] not in
             ("default", "kube-root-ca.crt")]
    src.proc.stop()
    objs = [o for g, v, p, o in items if p != "namespaces"]
    tb = rt.tar_bytes(rt.entries_for(items))
    path = t.path("%s.json" % name)
    with open(path, "w") as f:
        for o in objs:
            f.write(json.dumps(rt.normalize(o)) + "\n")
    return tb, path, objs


def scenario(t, name, namespace, prepared, count_path, count, delay_ms=0):
    """cairn, both kubectl commands and (on loopback) the ceiling, REPS
    interleaved rounds; with delay_ms all but the ceiling go through a
    latency proxy adding it to every round trip."""
    tb, path, objs = prepared
    n = count(objs)
    print("%s: %d objects in namespace %s (tarball %.1f MiB)%s; %d rounds, medians" % (
        name, len(objs), namespace, len(tb) / 2**20,
        ", +%g ms per round trip" % delay_ms if delay_ms else "", REPS), flush=True)
    res = {"cairn": [], "create": [], "apply": [], "base": [], "cpu": [], "alone": []}
    for i in range(REPS):
        if BASE_BIN and i < BASE_REPS:
            res["base"].append(cairn_restore(t, "%s-base-%d" % (name, i), tb, count_path, n,
                                             binary=BASE_BIN, delay_ms=delay_ms)[0])
        res["cairn"].append(cairn_restore(t, "%s-cairn-%d" % (name, i), tb, count_path, n,
                                          delay_ms=delay_ms)[0])
        res["cpu"].append(CPU[-1])
        res["create"].append(kubectl(t, "%s-create-%d" % (name, i), path, "create", count_path, n,
                                     namespace, delay_ms))
        res["apply"].append(kubectl(t, "%s-apply-%d" % (name, i), path, "apply", count_path, n,
                                    namespace, delay_ms))
        if not delay_ms:
            res["alone"].append(kubesim_alone(t, "%s-alone-%d" % (name, i), objs, namespace))
        print("  round %d: cairn %.1f s, kubectl create %.1f s, kubectl apply --server-side %.1f s%s%s" % (
            i + 1, res["cairn"][-1], res["create"][-1], res["apply"][-1],
            ", kubesim alone %.1f s" % res["alone"][-1] if res["alone"] else "",
            ", base build %.1f s" % res["base"][-1] if BASE_BIN and i < BASE_REPS else ""), flush=True)
    c, k, a = med(res["cairn"]), med(res["create"]), med(res["apply"])
    print("  cairn server (default flags)    %6.1f s  %6.0f objects/s (CPU: server %.1f s, kubesim %.1f s)" % (
        c, len(objs) / c, med([x[0] for x in res["cpu"]]), med([x[1] for x in res["cpu"]])))
    print("  kubectl create -f               %6.1f s  %6.0f objects/s  kubectl/cairn %.2fx (goal >= 3)" % (
        k, len(objs) / k, k / c))
    print("  kubectl apply --server-side -f  %6.1f s  %6.0f objects/s  kubectl/cairn %.2fx (goal >= 3)" % (
        a, len(objs) / a, a / c))
    if res["alone"]:
        al = med(res["alone"])
        print("  the ceiling: kubesim alone fed by %d raw connections %.1f s (%.0f creates/s): "
              "kubectl/ceiling %.2fx, cairn/ceiling %.2fx" % (WORKERS, al, len(objs) / al, k / al, c / al))
    if res["base"]:
        b = med(res["base"])
        print("  base build (%s), %d round(s)   %6.1f s  %6.0f objects/s  base/this %.2fx" % (
            BASE_BIN, len(res["base"]), b, len(objs) / b, b / c))
    sys.stdout.flush()


def fill_secrets(sim):
    sim.bulk({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"labels": {"app": "bench"}},
              "data": {"token": "c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA=", "ca.crt": "Y2VydA=="}},
             N_SECRETS, name="secret-{i:05d}", namespace="bench")


def fill_mixed(sim):
    objs = list(realistic.objects(N_MIXED, seed=26, kinds=MIXED_KINDS, namespace="shop"))
    for i in range(0, len(objs), 400):
        sim.ok("POST", "/_sim/bulk", {"items": objs[i:i + 400], "raw": True}, timeout=300)


def pushback(t, tb, n):
    """The mixed restore while 2% of creates get 429 with Retry-After 1."""
    faults = [{"method": "POST", "path": "^/api/v1/namespaces/shop/", "status": 429,
               "retryAfter": 1, "probability": 0.02, "seed": 26, "count": 20}]
    secs, r, log = cairn_restore(t, "pushback", tb, "/api/v1/namespaces/shop/configmaps", n,
                                 faults=faults)
    seen, problems = reqlog.retry_after(log)
    st = r["status"]
    ok = st["phase"] == "Completed" and not st.get("errors") and seen > 0 and not problems
    print("pushback: mixed namespace, 2%% of creates (at most 20) answered 429 Retry-After 1 s: "
          "%s in %.1f s, phase %s, errors %s, %d 429s, %d sent before their Retry-After: %s" % (
              "PASS" if ok else "FAIL", secs, st["phase"], st.get("errors", 0), seen, len(problems),
              "; ".join(problems[:3]) or "none"), flush=True)


def main():
    t = Case("bench_restore")
    try:
        if "secrets" in SETS:
            scenario(t, "secrets", "bench", prepare(t, "secrets", "bench", fill_secrets, [
                ("", "v1", "namespaces", False), ("", "v1", "secrets", True)]),
                "/api/v1/namespaces/bench/secrets", len)
        if {"mixed", "latency", "pushback"} & set(SETS):
            mixed = prepare(t, "mixed", "shop", fill_mixed, rt.RESOURCES + EXTRA_RESOURCES)
            cms = "/api/v1/namespaces/shop/configmaps"

            def n_cm(objs):
                return sum(1 for o in objs if o["kind"] == "ConfigMap")
            if "mixed" in SETS:
                scenario(t, "mixed", "shop", mixed, cms, n_cm)
            if "latency" in SETS:
                scenario(t, "mixed-latency", "shop", mixed, cms, n_cm, delay_ms=DELAY_MS)
            if "pushback" in SETS:
                pushback(t, mixed[0], n_cm(mixed[2]))
        print("(load average %.1f: the machine may be shared; ratios are within one run)" %
              os.getloadavg()[0])
    finally:
        t.finish()


main()
