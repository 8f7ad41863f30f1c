"""bench_restore: restore of N Secrets (default 31,000: the shape of Velero
issue #6845, 52 minutes there) by cairn's restore controller, against
`kubectl create -f` of the very same objects, both into a fresh kubesim, in
the same run; and the ceiling: creates/s of kubesim alone, fed the same
Secrets by WORKERS keep-alive connections from a client that costs next to
nothing (pre-encoded requests over raw sockets). Each measurement is repeated
RUNS times (interleaved) and the medians are printed. Never passes or fails.

    CAIRN_BENCH_SECRETS=31000 CAIRN_BENCH_RESTORE_WORKERS=8 CAIRN_BENCH_RUNS=3 \
        make bench BENCH_FILTER=restore

CAIRN_BENCH_BASELINE_RUNNER=/path/to/an/older/restore_runner also runs that
build of the restore controller in each round, interleaved, and prints its
medians and the ratio to this build (a before/after of one change, in one
run on one machine).
"""
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

from cairntest import Case, wait_for, BUILDDIR, SRCDIR

sys.path.insert(0, os.path.join(SRCDIR, "tests", "helpers"))
import restore_tarball as rt  # noqa: E402

N = int(os.environ.get("CAIRN_BENCH_SECRETS", "31000"))
WORKERS = int(os.environ.get("CAIRN_BENCH_RESTORE_WORKERS", "8"))
RUNS = max(1, int(os.environ.get("CAIRN_BENCH_RUNS", "3")))
RUNNER = os.path.join(BUILDDIR, "tests", "helpers", "restore_runner")
BASELINE = os.environ.get("CAIRN_BENCH_BASELINE_RUNNER")


def main():
    t = Case("bench_restore")
    try:
        run(t)
    finally:
        t.finish()


def run(t):
    src = t.kubesim(name="source", tls=False)
    src.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "bench"}})
    src.bulk({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"labels": {"app": "bench"}},
              "data": {"token": "c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA=", "ca.crt": "Y2VydA=="}},
             N, name="secret-{i:05d}", namespace="bench")
    items = rt.dump(src, [("", "v1", "namespaces", False), ("", "v1", "secrets", True)])
    src.proc.stop()
    secrets = [o for g, v, p, o in items if p == "secrets"]
    print("objects: %d Secrets in namespace bench; %d runs" % (len(secrets), RUNS), flush=True)
    tb = rt.tar_bytes(rt.entries_for(items))
    path = t.path("secrets.json")
    with open(path, "w") as f:
        for o in secrets:
            f.write(json.dumps(rt.normalize(o)) + "\n")

    res = {"cairn": [], "kubectl": [], "alone": [], "baseline": []}
    for i in range(RUNS):
        if BASELINE:
            b = cairn_restore(t, i, tb, len(secrets), runner_bin=BASELINE, tag="baseline")
            res["baseline"].append(b)
            print("run %d: baseline restore_runner %.1f s" % (i + 1, b), flush=True)
        c = cairn_restore(t, i, tb, len(secrets))
        k = kubectl_create(t, i, path, len(secrets))
        a = kubesim_alone(t, i, secrets)
        res["cairn"].append(c)
        res["kubectl"].append(k)
        res["alone"].append(a)
        print("run %d: cairn %.1f s, kubectl %.1f s, ratio %.2fx; kubesim alone %.0f creates/s" % (
            i + 1, c, k, k / c, len(secrets) / a), flush=True)
    c, k, a = (statistics.median(res[x]) for x in ("cairn", "kubectl", "alone"))
    print("median of %d: cairn restore %.1f s (%.0f objects/s, %d restore workers, tarball %.1f MiB)" % (
        RUNS, c, len(secrets) / c, WORKERS, len(tb) / 2**20), flush=True)
    print("median of %d: kubectl create -f %.1f s (%.0f objects/s)" % (RUNS, k, len(secrets) / k), flush=True)
    print("median of %d: kubesim alone %.1f s (%.0f creates/s over %d connections)" % (
        RUNS, a, len(secrets) / a, WORKERS), flush=True)
    if BASELINE:
        b = statistics.median(res["baseline"])
        print("median of %d: baseline build %.1f s (%.0f objects/s); this build / baseline: %.2f "
              "(runs: %s)" % (RUNS, b, len(secrets) / b, c / b,
                              ", ".join("%.2f" % (x / y) for x, y in zip(res["cairn"], res["baseline"]))),
              flush=True)
    print("ratio: cairn is %.1fx faster than kubectl create -f (goal: >= 3x); "
          "Velero #6845: 52 min for 31k Secrets" % (k / c), flush=True)


def cairn_restore(t, i, tb, n, runner_bin=RUNNER, tag="cairn"):
    """Velero-layout tarball, restore controller, fresh kubesim. -> seconds"""
    a = t.kubesim(name="%s-target-%d" % (tag, i), tls=False)
    a.install_crds("cairn-system")
    store = t.mkdir("%s-store-%d" % (tag, i))
    rt.install_backup(a, store, "b", tb)
    runner = t.spawn([runner_bin, "--kubeconfig", a.kubeconfig, "--namespace", "cairn-system",
                      "--journal", t.path("%s-journal-%d.db" % (tag, i)), "--server-id", "bench",
                      "--restore-workers", WORKERS, "--period-ms", 50], name="%s-runner-%d" % (tag, i))
    start = time.monotonic()
    rt.create_restore(a, "r", {"backupName": "b"})

    def done():
        r = rt.get_restore(a, "r")
        return r if r.get("status", {}).get("phase") in rt.FINAL else None
    r = wait_for(done, 3600, "restore", interval=0.2)
    secs = time.monotonic() - start
    n_ok = len(a.ok("GET", "/api/v1/namespaces/bench/secrets")["items"])
    if r["status"]["phase"] != "Completed" or n_ok != n:
        print("%s restore run %d: phase %s, %d of %d Secrets present" % (
            tag, i + 1, r["status"]["phase"], n_ok, n), flush=True)
    runner.stop()
    a.proc.stop()
    return secs


def kubectl_create(t, i, path, n):
    """kubectl create -f of the same objects (metadata reset as a restore does). -> seconds"""
    b = t.kubesim(name="kubectl-target-%d" % i, tls=False)
    b.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "bench"}})
    start = time.monotonic()
    p = subprocess.run(["kubectl", "--kubeconfig", b.kubeconfig, "--cache-dir",
                        t.path("kcache"), "create", "-f", path, "--validate=false", "-o", "name"],
                       capture_output=True, text=True)
    secs = time.monotonic() - start
    n_ok = len(b.ok("GET", "/api/v1/namespaces/bench/secrets")["items"])
    if p.returncode != 0 or n_ok != n:
        print("kubectl run %d: exit %d, %d of %d Secrets present: %s" % (
            i + 1, p.returncode, n_ok, n, p.stderr[-300:]), flush=True)
    b.proc.stop()
    return secs


def _post_all(args):
    """One keep-alive connection POSTing pre-encoded requests; returns non-201 count."""
    host, port, reqs = args
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    bad = 0
    for r in reqs:
        s.sendall(r)
        status = f.readline()
        length = 0
        while True:
            h = f.readline()
            if h in (b"\r\n", b""):
                break
            if h[:15].lower() == b"content-length:":
                length = int(h[15:])
        f.read(length)
        if b" 201 " not in status:
            bad += 1
    s.close()
    return bad


def kubesim_alone(t, i, secrets):
    """creates/s of a fresh kubesim fed by WORKERS connections. -> seconds"""
    k = t.kubesim(name="alone-%d" % i, tls=False)
    k.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "bench"}})
    u = urllib.parse.urlsplit(k.url)
    hostport = "%s:%d" % (u.hostname, u.port)
    reqs = []
    for o in secrets:
        body = json.dumps(rt.normalize(o), separators=(",", ":")).encode()
        reqs.append(b"POST /api/v1/namespaces/bench/secrets HTTP/1.1\r\nHost: %s\r\n"
                    b"User-Agent: bench\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (hostport.encode(), len(body), body))
    shards = [(u.hostname, u.port, reqs[j::WORKERS]) for j in range(WORKERS)]
    with multiprocessing.Pool(WORKERS) as pool:
        start = time.monotonic()
        bad = sum(pool.map(_post_all, shards))
        secs = time.monotonic() - start
    if bad:
        print("kubesim alone run %d: %d creates not 201" % (i + 1, bad), flush=True)
    k.proc.stop()
    return secs


main()
