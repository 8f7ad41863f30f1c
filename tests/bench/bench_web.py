"""bench_web: /status.json (and /healthz, /metrics) latency under load with wrk.

Runs against tests/helpers/web_demo, whose fake backup advances every
100 ms. Prints wrk's latency percentiles and request rate for:
  - /status.json with the default snapshot cache (one status() per 500 ms),
  - /status.json with the cache at 1 ms (status() on almost every request),
  - /healthz and /metrics.
Figures only, never pass/fail. The backup slowdown ratio (same backup with
and without this load) needs the real `cairn server --listen`: see
web/README.md.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

BUILDDIR = os.environ.get("CAIRN_BUILDDIR", ".")
TMP = os.environ.get("CAIRN_TMP", "/tmp")
DEMO = os.path.join(BUILDDIR, "tests/helpers/web_demo")
DURATION = os.environ.get("BENCH_WEB_DURATION", "5s")
CONNS = os.environ.get("BENCH_WEB_CONNECTIONS", "32")


def start(interval_ms, tag):
    port_file = os.path.join(TMP, "port-%s" % tag)
    log = open(os.path.join(TMP, "demo-%s.log" % tag), "wb")
    p = subprocess.Popen([DEMO, "--listen", "127.0.0.1:0", "--port-file", port_file,
                          "--tick-ms", "100", "--status-interval-ms", str(interval_ms)],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(port_file):
            break
        time.sleep(0.05)
    with open(port_file) as f:
        return p, int(f.read())


def wrk(url):
    r = subprocess.run(["wrk", "-t2", "-c" + CONNS, "-d" + DURATION, "--latency", url],
                       capture_output=True, text=True, timeout=120)
    out = r.stdout
    pct = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M))
    rps = re.search(r"Requests/sec:\s+(\S+)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    return pct, rps.group(1) if rps else "?", (errs.group(1) if errs else "0"), (sock.group(1) if sock else "none")


def main():
    if not shutil.which("wrk"):
        print("wrk not installed (Debian package wrk): nothing measured")
        return
    if not os.path.exists(DEMO):
        print("%s not built (make check builds it): nothing measured" % DEMO)
        return
    print("wrk -t2 -c%s -d%s against tests/helpers/web_demo (%d CPUs)" % (CONNS, DURATION, os.cpu_count()))
    print("%-34s %9s %9s %9s %9s %11s %6s" % ("target", "p50", "p75", "p90", "p99", "req/s", "non2xx"))
    runs = [(500, "/status.json", "status.json (cache 500 ms)"),
            (1, "/status.json", "status.json (cache 1 ms)"),
            (500, "/healthz", "healthz"),
            (500, "/metrics", "metrics")]
    for interval, path, label in runs:
        p, port = start(interval, label.split()[0] + str(interval))
        try:
            pct, rps, non2xx, sock = wrk("http://127.0.0.1:%d%s" % (port, path))
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(10)
        print("%-34s %9s %9s %9s %9s %11s %6s%s" % (label, pct.get("50", "?"), pct.get("75", "?"),
              pct.get("90", "?"), pct.get("99", "?"), rps, non2xx,
              "" if sock == "none" else "  socket errors: " + sock))
    sys.stdout.flush()


main()
