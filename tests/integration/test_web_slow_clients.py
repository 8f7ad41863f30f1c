"""Slow clients against the web endpoint (issue 19).

A cairn server with an open-file limit of 256 serves --listen while a
backup runs; 320 connections from 40 loopback addresses trickle their
headers a byte a second. The probes from another address keep answering,
the backup completes (the web never takes the descriptors the work needs),
a trickling request is cut after the request timeout, one address cannot
hold more than its share, and /metrics%00.txt is not /metrics.
"""
import socket
import threading
import time

from cairntest import BIN, case, main, wait_for, free_port, CheckFailed
from webcheck import get

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


class Tricklers:
    """n connections per address from 127.0.0.<first>.. sending a request
    line, then one header byte a second; records when each is closed."""

    def __init__(self, port, addrs, per_addr):
        self.socks = []
        self.opened = time.monotonic()
        self.closed_at = {}
        for a in addrs:
            for _ in range(per_addr):
                s = socket.socket()
                s.bind((a, 0))
                s.settimeout(5)
                try:
                    s.connect(("127.0.0.1", port))
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                    s.setblocking(False)
                    self.socks.append(s)
                except OSError:
                    s.close()
        self.stop = False
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        while not self.stop:
            for s in self.socks:
                if s in self.closed_at:
                    continue
                try:
                    s.send(b"X")
                    try:
                        if s.recv(4096) == b"":
                            self.closed_at[s] = time.monotonic()
                    except BlockingIOError:
                        pass
                except OSError:
                    self.closed_at[s] = time.monotonic()
            time.sleep(1.0)

    def close(self):
        self.stop = True
        self.th.join()
        for s in self.socks:
            s.close()


def probe(port, path="/healthz", src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1]) if data else 0
    except OSError:
        return 0
    finally:
        s.close()


@case
def slow_clients_do_not_take_the_endpoint_or_the_backups(t):
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": t.mkdir("store")}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 100}}, 3000,
             name="cm-{i:05d}", namespace="bulk")
    # slow lists: the backup is running while the clients trickle
    sim.faults({"method": "GET", "path": "configmaps", "delay": 0.5, "count": 100000})
    port = free_port()
    srv = t.spawn(["prlimit", "--nofile=256:256", BIN, "server", "--kubeconfig", sim.kubeconfig,
                   "--namespace", NS, "--server-id", "s1", "--journal", t.path("j.db"),
                   "--retry-period", "200ms", "--part-size", "65536", "--workers", "4",
                   "--listen", "127.0.0.1:%d" % port, "--log-level", "info"], name="server")
    wait_for(lambda: probe(port) == 200, 30, "/healthz")
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "b1", "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})
    tr = Tricklers(port, ["127.0.0.%d" % k for k in range(10, 50)], 8)
    t.on_cleanup(tr.close)
    try:
        results = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 14:
            results.append(probe(port, "/healthz"))
            results.append(probe(port, "/readyz"))
            time.sleep(0.5)
        bad = [r for r in results if r not in (200, 503)]
        print("# %d probes during the trickle, %d failed to answer; %d of %d tricklers cut" % (
            len(results), len(bad), len(tr.closed_at), len(tr.socks)))
        t.eq(bad, [], "probes that got no answer")
        t.check(srv.alive(), "server died: %s" % srv.output()[-2000:])
        # a trickling request is cut after the request timeout (10 s)
        lived = [c - tr.opened for c in tr.closed_at.values()]
        t.check(len(lived) >= len(tr.socks) // 2, "only %d of %d trickling connections were cut" % (
            len(lived), len(tr.socks)))
        t.check(max(lived) < 14, "a trickling request lived %.1f s" % max(lived))
    finally:
        tr.close()
    # one address holds at most its share (32): the 33rd is refused
    held = []
    for _ in range(40):
        s = socket.socket()
        s.bind(("127.0.0.60", 0))
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
        held.append(s)
    time.sleep(0.5)
    t.eq(probe(port, src="127.0.0.60"), 0, "a request from the address holding 40 connections")
    t.eq(probe(port, src="127.0.0.61"), 200, "a request from another address")
    for s in held:
        s.close()
    # the backup was not starved of descriptors
    sim.clear_faults()
    b = wait_for(lambda: (lambda x: x if x.get("status", {}).get("phase") in FINAL else None)(
        sim.ok("GET", "%s/b1" % BK)), 120, "the backup to finish", interval=0.5)
    t.eq(b["status"]["phase"], "Completed", "backup phase (%s)" % b["status"].get("failureReason"))
    t.check("Too many open files" not in srv.output(), "EMFILE in the server's log")


@case
def percent_encoded_nul_is_not_metrics(t):
    sim = t.kubesim()
    sim.install_crds(NS)
    port = free_port()
    t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
             "--server-id", "s1", "--journal", t.path("j.db"), "--retry-period", "200ms",
             "--listen", "127.0.0.1:%d" % port], name="server")
    wait_for(lambda: probe(port) == 200, 30, "/healthz")
    t.eq(get(port, "/metrics")[0], 200, "/metrics")
    for path in ("/metrics%00.txt", "/metrics%00", "/healthz%0a", "/status%7F"):
        t.eq(get(port, path)[0], 400, path)
    t.eq(get(port, "/metrics%2e")[0], 404, "/metrics%2e")


main()
