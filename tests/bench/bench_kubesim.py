#!/usr/bin/env python3
"""Benchmark (not a test): how fast tests/kubesim serves a paged list (limit=500)
of 100k small ConfigMaps, so later benchmarks know when kubesim is the bottleneck.

usage: bench_kubesim.py [--count N] [--limit N] [--runs N] [--tls] [--gzip]

Prints objects/s and seconds for each run and the median of the runs, over one
keep-alive connection, with the response bodies fully read and JSON-decoded
(as a client would)."""
import argparse
import gzip
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

SRCDIR = os.environ.get("CAIRN_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--gzip", action="store_true", help="send Accept-Encoding: gzip (pages >128 KiB come compressed)")
    opts = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="bench-kubesim-", dir=os.environ.get("CAIRN_TMP"))
    ready = os.path.join(tmp, "ready")
    argv = [sys.executable, os.path.join(SRCDIR, "tests/kubesim/kubesim.py"), "--port", "0",
            "--ready-file", ready, "--kubeconfig-out", os.path.join(tmp, "kubeconfig")]
    if opts.tls:
        argv += ["--tls", "--token", "bench=bench-token"]
    log = open(os.path.join(tmp, "kubesim.log"), "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t_end = time.time() + 30
        while not os.path.exists(ready):
            if proc.poll() is not None or time.time() > t_end:
                raise SystemExit("kubesim did not start, see %s" % log.name)
            time.sleep(0.05)
        url = urllib.parse.urlsplit(open(ready).read().strip())
        if opts.tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            mk = lambda: http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=120)
        else:
            mk = lambda: http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        hdrs = {"Authorization": "Bearer bench-token"} if opts.tls else {}
        hdrs["Content-Type"] = "application/json"
        if opts.gzip:
            hdrs["Accept-Encoding"] = "gzip"

        c = mk()
        t0 = time.time()
        c.request("POST", "/_sim/bulk", body=json.dumps({
            "template": {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"labels": {"app": "bench", "tier": "t1"}},
                         "data": {"key": "value-0123456789abcdef", "other": "x" * 40}},
            "count": opts.count, "name": "cm-{i:06d}", "namespace": "default"}), headers=hdrs)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit("bulk create failed: %d %s" % (r.status, body[:300]))
        t_create = time.time() - t0
        print("kubesim bench: created %d ConfigMaps via /_sim/bulk in %.2fs" % (opts.count, t_create))

        times = []
        for run in range(opts.runs):
            n, pages, nbytes, cont = 0, 0, 0, None
            t0 = time.time()
            while True:
                path = "/api/v1/namespaces/default/configmaps?limit=%d" % opts.limit
                if cont:
                    path += "&continue=" + urllib.parse.quote(cont)
                c.request("GET", path, headers=hdrs)
                r = c.getresponse()
                raw = r.read()
                if r.getheader("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                if r.status != 200:
                    raise SystemExit("list failed: %d %s" % (r.status, raw[:300]))
                nbytes += len(raw)
                pages += 1
                d = json.loads(raw)
                n += len(d["items"])
                cont = d["metadata"].get("continue")
                if not cont:
                    break
            dt = time.time() - t0
            if n != opts.count:
                raise SystemExit("listed %d objects, expected %d" % (n, opts.count))
            times.append(dt)
            print("run %d: %d objects in %d pages (%.1f MB) in %.2fs = %.0f objects/s"
                  % (run + 1, n, pages, nbytes / 1e6, dt, n / dt))
        med = statistics.median(times)
        print("median: %.2fs for %d objects = %.0f objects/s (limit=%d, %s%s)"
              % (med, opts.count, opts.count / med, opts.limit, "TLS" if opts.tls else "plain HTTP",
                 ", gzip" if opts.gzip else ""))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


if __name__ == "__main__":
    main()
