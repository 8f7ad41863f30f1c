"""bench_web: /status.json (and /healthz, /metrics) latency under load with wrk.

Runs against tests/helpers/web_demo, whose fake backup advances every
100 ms. Prints wrk's latency percentiles and request rate for:
  - /status.json with the default snapshot cache (one status() per 500 ms),
  - /status.json with the cache at 1 ms (status() on almost every request),
  - /healthz and /metrics.
Then the slowdown of a backup-like job running in the same process (the
demo's --work-mb: generate Kubernetes-like JSON and gzip it, as a backup
does) while the endpoint is under load, as a ratio to the same job without
load. The demo is pinned to CPU 0 and wrk to CPU 1 (when there are two
CPUs), so the ratio measures what serving costs the backup's process, not
wrk's own CPU use. Loads: "polling" (10 /status.json and 1 /metrics
request per second: a few open pages and a scraper) and "flood" (wrk at
full speed). Median of BENCH_WEB_REPEAT runs.
Figures only, never pass/fail. Once `cairn server --listen` serves the
endpoint, the same measurement applies to a real backup against kubesim.
"""
import os
import re
import shutil
import signal
import subprocess
import statistics
import sys
import threading
import time
import urllib.request

BUILDDIR = os.environ.get("CAIRN_BUILDDIR", ".")
TMP = os.environ.get("CAIRN_TMP", "/tmp")
DEMO = os.path.join(BUILDDIR, "tests/helpers/web_demo")
DURATION = os.environ.get("BENCH_WEB_DURATION", "5s")
CONNS = os.environ.get("BENCH_WEB_CONNECTIONS", "32")
WORK_MB = os.environ.get("BENCH_WEB_WORK_MB", "32")
REPEAT = int(os.environ.get("BENCH_WEB_REPEAT", "5"))
PIN = (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None


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


def wrk(url, pin=False):
    pre = ["taskset", "-c", "1"] if pin and PIN else []
    r = subprocess.run(pre + ["wrk", "-t2", "-c" + CONNS, "-d" + DURATION, "--latency", url],
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
    slowdown()


def work_once(load):
    """Seconds the demo's backup-like job took under load (none, polling, flood)."""
    tag = "work-%s-%d" % (load, time.monotonic_ns())
    report = os.path.join(TMP, tag + ".report")
    port_file = os.path.join(TMP, tag + ".port")
    pre = ["taskset", "-c", "0"] if PIN else []
    log = open(os.path.join(TMP, tag + ".log"), "wb")
    p = subprocess.Popen(pre + [DEMO, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                "--work-mb", WORK_MB, "--work-report", report],
                         stdout=log, stderr=subprocess.STDOUT)
    stop = threading.Event()
    loader = None
    try:
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.01)
        with open(port_file) as f:
            base = "http://127.0.0.1:%d" % int(f.read())
        if load == "polling":
            def poll():
                n = 0
                while not stop.is_set():
                    urllib.request.urlopen(base + ("/metrics" if n % 10 == 9 else "/status.json")).read()
                    n += 1
                    stop.wait(0.09)
            loader = threading.Thread(target=poll, daemon=True)
            loader.start()
        elif load == "flood":
            pre_w = ["taskset", "-c", "1"] if PIN else []
            loader = subprocess.Popen(pre_w + ["wrk", "-t1", "-c16", "-d120s", base + "/status.json"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(report):
            if p.poll() is not None:
                raise RuntimeError("web_demo exited")
            time.sleep(0.02)
        time.sleep(0.05)
        with open(report) as f:
            return float(f.read())
    finally:
        stop.set()
        if isinstance(loader, subprocess.Popen):
            loader.terminate()
            loader.wait()
        p.send_signal(signal.SIGTERM)
        p.wait(10)


def slowdown():
    print()
    print("backup-like job (%s MiB JSON -> gzip) in the endpoint's process, %s" % (
        WORK_MB, "demo on CPU 0, load generator on CPU 1" if PIN else "unpinned"))
    loads = ("none", "polling", "flood")
    runs = {load: [] for load in loads}
    for _ in range(REPEAT):  # interleaved, so drift in machine load hits all alike
        for load in loads:
            runs[load].append(work_once(load))
    try:
        la = "%.1f" % os.getloadavg()[0]
    except OSError:
        la = "?"
    print("%-10s %10s %10s %10s   (median of %d; load average %s)" % (
        "load", "median s", "min s", "ratio", REPEAT, la))
    base = statistics.median(runs["none"])
    for load in loads:
        med = statistics.median(runs[load])
        print("%-10s %10.3f %10.3f %9.3fx" % (load, med, min(runs[load]), med / base))
    sys.stdout.flush()

main()
