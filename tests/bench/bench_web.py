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
Last, the same with a real backup (issue 26): kubesim with
BENCH_WEB_OBJECTS (default 100k) ConfigMaps, a local-directory storage
location, one `cairn server --listen`; each backup timed from creation to
Completed with no load, while 100 clients poll /status.json once a second
and a scraper reads /metrics every 5 s (goal: under 5% slower; the clients
are one process of non-blocking keep-alive sockets, so the load generator
itself costs next to nothing), and while wrk floods /status.json (the web
threads are bounded and niced: the flood must not take more than a small
share of the CPU); /status.json percentiles during the flooded backup.
Figures only, never pass/fail.
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
OBJECTS = int(os.environ.get("BENCH_WEB_OBJECTS", "100000"))
POLLERS = int(os.environ.get("BENCH_WEB_POLLERS", "100"))
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
    real_server()


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


def cpu_s(pid):
    """CPU seconds (user + system) process pid has used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dashboards(port, clients, seconds, report):
    """clients keep-alive connections each GETting /status.json once a
    second, one more GETting /metrics every 5 s, for `seconds`; writes
    "requests errors" to report. One process, non-blocking sockets."""
    import selectors
    import socket
    sel = selectors.DefaultSelector()
    req = {p: ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % p).encode()
           for p in ("/status.json", "/metrics")}
    conns = []
    for i in range(clients + 1):
        c = socket.create_connection(("127.0.0.1", port))
        c.setblocking(False)
        st = {"sock": c, "path": "/metrics" if i == clients else "/status.json",
              "every": 5.0 if i == clients else 1.0, "next": time.monotonic() + (i % 100) / 100.0,
              "buf": b"", "busy": False}
        conns.append(st)
        sel.register(c, selectors.EVENT_READ, st)
    n = errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        now = time.monotonic()
        for st in conns:
            if not st["busy"] and now >= st["next"]:
                try:
                    st["sock"].sendall(req[st["path"]])
                    st["busy"] = True
                except OSError:
                    errors += 1
                st["next"] += st["every"]
        for key, _ in sel.select(timeout=0.01):
            st = key.data
            try:
                chunk = st["sock"].recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                errors += 1
                sel.unregister(st["sock"])
                conns.remove(st)
                continue
            st["buf"] += chunk
            head, sep, rest = st["buf"].partition(b"\r\n\r\n")
            if not sep:
                continue
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            need = int(m.group(1)) if m else 0
            if len(rest) >= need:
                if not head.startswith(b"HTTP/1.1 200"):
                    errors += 1
                st["buf"] = rest[need:]
                st["busy"] = False
                n += 1
    with open(report, "w") as f:
        f.write("%d %d" % (n, errors))


def real_server():
    import cairntest
    print()
    t = cairntest.Case("bench_web_server")
    try:
        ns = "cairn-system"
        bk = "/apis/cairn.io/v1/namespaces/%s/backups" % ns
        sim = t.kubesim()
        sim.install_crds(ns)
        sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % ns, {
            "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "default", "namespace": ns},
            "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                     "config": {"path": t.mkdir("store")}, "default": True}})
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": "bulk"}})
        sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 200}}, OBJECTS,
                 name="cm-{i:05d}", namespace="bulk")
        port = cairntest.free_port()
        srv = t.spawn([cairntest.BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", ns,
                       "--server-id", "bench", "--journal", t.path("journal.db"),
                       "--retry-period", "200ms", "--listen", "127.0.0.1:%d" % port,
                       "--log-level", "warn"], name="server")
        base = "http://127.0.0.1:%d" % port
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if "not built into this server" in srv.output():
                print("real server: `cairn server` does not serve --listen yet: skipped")
                return
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            print("real server: /healthz never answered: skipped")
            return
        n = [0]
        polled = []

        def backup(load):
            import multiprocessing
            n[0] += 1
            name = "bench-%d" % n[0]
            loader = None
            wrk_out = None
            report = os.path.join(TMP, "dash-%d" % n[0])
            if load == "polling":
                loader = multiprocessing.Process(target=dashboards, args=(port, POLLERS, 3600, report))
                loader.start()
                time.sleep(1.5)  # connected, polling
            elif load == "flood":
                loader = subprocess.Popen(["wrk", "-t1", "-c8", "-d120s", "--latency", base + "/status.json"],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            t0, c0 = time.monotonic(), cpu_s(srv.pid)
            sim.ok("POST", bk, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                "metadata": {"name": name, "namespace": ns}, "spec": {}})
            while True:
                phase = sim.ok("GET", "%s/%s" % (bk, name)).get("status", {}).get("phase")
                if phase in ("Completed", "PartiallyFailed", "Failed", "FailedValidation"):
                    break
                if time.monotonic() - t0 > 300:
                    phase = "timeout"
                    break
                time.sleep(0.05)
            secs = time.monotonic() - t0
            cpu[load].append(cpu_s(srv.pid) - c0)
            if isinstance(loader, multiprocessing.Process):
                loader.terminate()
                loader.join()
            if isinstance(loader, subprocess.Popen):
                loader.send_signal(signal.SIGINT)  # wrk prints its figures on SIGINT
                wrk_out = loader.communicate(timeout=30)[0]
            return secs, phase, wrk_out

        loads = ("none", "polling", "flood")
        runs = {x: [] for x in loads}
        cpu = {x: [] for x in loads}
        last_wrk = None
        for _ in range(REPEAT):
            for load in loads:
                secs, phase, out = backup(load)
                if phase != "Completed":
                    print("real server: backup under %s load ended %s: skipped" % (load, phase))
                    return
                runs[load].append(secs)
                last_wrk = out or last_wrk
        print("real backup of %d ConfigMaps, creation to Completed (median of %d; load average %.1f); "
              "polling = %d clients on /status.json once a second + /metrics every 5 s" % (
                  OBJECTS, len(runs["none"]), os.getloadavg()[0], POLLERS))
        b0 = statistics.median(runs["none"])
        c0 = statistics.median(cpu["none"])
        print("%-10s %10s %10s %14s %10s" % ("load", "median s", "ratio", "server CPU-s", "ratio"))
        for load in loads:
            med, cmed = statistics.median(runs[load]), statistics.median(cpu[load])
            print("%-10s %10.3f %9.3fx %14.3f %9.3fx%s" % (
                load, med, med / b0, cmed, cmed / c0, " (goal < 1.05)" if load == "polling" else ""))
        print("(the server's CPU during each backup, readers served included, says what serving costs "
              "the server; the wall-time ratio also carries the load generator's own CPU on a shared machine)")
        if last_wrk:
            pct = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", last_wrk, re.M))
            rps = re.search(r"Requests/sec:\s+(\S+)", last_wrk)
            print("/status.json during the last flooded backup: p50 %s p75 %s p90 %s p99 %s, %s req/s" % (
                pct.get("50", "?"), pct.get("75", "?"), pct.get("90", "?"), pct.get("99", "?"),
                rps.group(1) if rps else "?"))
    finally:
        t.finish()


main()
