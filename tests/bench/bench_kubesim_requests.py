#!/usr/bin/env python3
"""Benchmark (not a test): kubesim's own CPU per request (issue 26), read
from /proc, with clients that cost next to nothing: pre-encoded requests
over 8 raw keep-alive connections, one process each, as bench_restore's
"ceiling" feeds kubesim.

Per round, for each kubesim: 6,000 creates of small ConfigMaps (POST), GETs
of them, PUTs, merge PATCHes, then a paged list (limit 500) of 100k more
ConfigMaps (made by /_sim/bulk) on one connection; and 31,000 creates of
small Secrets (the ceiling's load: wall time and CPU). Medians of
$CAIRN_BENCH_REPS rounds (default 3).

$CAIRN_BENCH_BASE_SRC: another source tree (e.g. an export of an older
commit); its tests/kubesim runs too, interleaved, for a before/after in the
same run. The machine may be shared: read the ratios, not the figures."""
import json
import multiprocessing
import os
import statistics
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

SRCDIR = os.environ.get("CAIRN_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "lib"))
import rawhttp  # noqa: E402
BASE_SRC = os.environ.get("CAIRN_BENCH_BASE_SRC")
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "3")))
CONNS = 8
N = 6000
N_SECRETS = 31000
N_LIST = 100000
CM = "/api/v1/namespaces/b/configmaps"


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")


def start(src, tmp):
    ready = os.path.join(tmp, "ready")
    log = open(os.path.join(tmp, "kubesim.log"), "wb")
    proc = subprocess.Popen([sys.executable, os.path.join(src, "tests/kubesim/kubesim.py"), "--port", "0",
                             "--ready-file", ready, "--kubeconfig-out", os.path.join(tmp, "kubeconfig")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    end = time.time() + 30
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > end:
            raise SystemExit("kubesim did not start, see %s" % log.name)
        time.sleep(0.05)
    with open(ready) as f:
        u = urllib.parse.urlsplit(f.read().strip())
    return proc, u.hostname, u.port


def encode(host, port, method, path, body=None, ctype="application/json"):
    head = "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: bench\r\nAccept: application/json\r\n" % (
        method, path, host, port)
    if body is None:
        return (head + "\r\n").encode()
    b = json.dumps(body, separators=(",", ":")).encode()
    return (head + "Content-Type: %s\r\nContent-Length: %d\r\n\r\n" % (ctype, len(b))).encode() + b


def batch(pool, proc, host, port, reqs):
    """-> (kubesim CPU seconds, wall seconds) for reqs over CONNS connections."""
    shards = [(host, port, reqs[j::CONNS], b"2") for j in range(CONNS)]
    c0, t0 = cpu_s(proc.pid), time.monotonic()
    bad = sum(pool.map(rawhttp.send_all, shards))
    wall, cpu = time.monotonic() - t0, cpu_s(proc.pid) - c0
    if bad:
        raise SystemExit("%d requests were not answered 2xx" % bad)
    return cpu, wall


def one_round(pool, src, tmp):
    """-> {measure: value} for one fresh kubesim of tree src."""
    proc, host, port = start(src, tmp)
    out = {}
    try:
        def req(method, path, body=None, ctype="application/json"):
            return encode(host, port, method, path, body, ctype)

        def cm(i, data):
            return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%05d" % i,
                                                                          "labels": {"app": "x"}}, "data": data}
        rawhttp.send_all((host, port, [req("POST", "/api/v1/namespaces", {"metadata": {"name": "b"}})], b"2"))
        for name, reqs in (
                ("POST", [req("POST", CM, cm(i, {"a": "b" * 100, "c": "d"})) for i in range(N)]),
                ("GET", [req("GET", CM + "/cm-%05d" % i) for i in range(N)]),
                ("PUT", [req("PUT", CM + "/cm-%05d" % i, cm(i, {"a": "z"})) for i in range(N)]),
                ("PATCH", [req("PATCH", CM + "/cm-%05d" % i, {"data": {"e": "f"}}, "application/merge-patch+json")
                           for i in range(N)])):
            out[name] = batch(pool, proc, host, port, reqs)[0] / N * 1e6
        rawhttp.send_all((host, port, [req("POST", "/_sim/bulk", {"template": cm(0, {"a": "b"}), "count": N_LIST,
                                                                  "name": "bulk-{i:06d}", "namespace": "b"})], b"2"))
        s = socket.create_connection((host, port))
        f = s.makefile("rb")
        c0, cont, items = cpu_s(proc.pid), None, 0
        while True:
            s.sendall(req("GET", CM + "?limit=500" + ("&continue=" + cont if cont else "")))
            page = json.loads(rawhttp.read_reply(f)[1])
            items += len(page["items"])
            cont = page["metadata"].get("continue")
            if not cont:
                break
        out["LIST"] = (cpu_s(proc.pid) - c0) * 1e3
        s.close()
        secrets = [req("POST", "/api/v1/namespaces/b/secrets", {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "secret-%05d" % i, "labels": {"app": "bench"}},
            "data": {"token": "c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA=", "ca.crt": "Y2VydA=="}}) for i in range(N_SECRETS)]
        cpu, wall = batch(pool, proc, host, port, secrets)
        out["SECRETS"] = cpu / N_SECRETS * 1e6
        out["SECRETS_WALL"] = wall
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def main():
    trees = [("this", SRCDIR)] + ([("base", BASE_SRC)] if BASE_SRC else [])
    res = {tag: [] for tag, _ in trees}
    with multiprocessing.Pool(CONNS) as pool:
        for i in range(REPS):
            for tag, src in trees:
                with tempfile.TemporaryDirectory(prefix="bench-kubesim-req-", dir=os.environ.get("CAIRN_TMP")) as tmp:
                    res[tag].append(one_round(pool, src, tmp))
            print("round %d (load %.1f): %s" % (i + 1, os.getloadavg()[0], "; ".join(
                "%s POST %.0f us, SECRETS %.0f us %.1f s" % (tag, res[tag][-1]["POST"], res[tag][-1]["SECRETS"],
                                                         res[tag][-1]["SECRETS_WALL"]) for tag, _ in trees)),
                  flush=True)
    print("kubesim CPU per request, %d connections, medians of %d:" % (CONNS, REPS))
    rows = [("POST", "create, small ConfigMap", "us"), ("GET", "get", "us"), ("PUT", "update", "us"),
            ("PATCH", "merge patch", "us"), ("SECRETS", "create, small Secret (31k)", "us"),
            ("SECRETS_WALL", "31k Secrets, wall (the ceiling)", "s"),
            ("LIST", "paged list of %d, CPU" % (N_LIST + N), "ms")]
    for key, what, unit in rows:
        vals = [statistics.median([r[key] for r in res[tag]]) for tag, _ in trees]
        fmt = "%8.1f %s" if unit == "s" else "%8.0f %s"
        line = "  %-32s this %s" % (what, fmt % (vals[0], unit))
        if BASE_SRC:
            line += "   base %s   base/this %.2fx" % (fmt % (vals[1], unit), vals[1] / vals[0])
        print(line)
    print("(load average %.1f: the machine may be shared)" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
