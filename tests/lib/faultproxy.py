"""faultproxy.py: an HTTP proxy in front of an S3 server that injects faults
and records requests, for storage, backup and chaos tests.

    proxy = FaultProxy(t, upstream_port, rate=0.1, seed=7)
    proxy.endpoint            # point the client here instead of the server
    proxy.counts              # {"forwarded": n, "slowdown": n, "500": n, "reset": n, ...}
    proxy.faults()            # injected faults of every kind, summed
    proxy.requests            # one dict per request, as received (see below)
    proxy.log                 # [(method, host, path, range header), ...] (older form)
    proxy.canned = (403, "SignatureDoesNotMatch", "...")   # answer this to everything
    proxy.rate = 0.15         # may be changed at any time
    FaultProxy(t, port, methods=("GET",))  # only GETs get random faults

Fault kinds:
  slowdown      503 with an S3 <Error><Code>SlowDown</Code> body
  500           500 InternalError
  reset         the connection is reset before the request reaches the
                server: after half the body for uploads, at once for other
                non-GET requests; a GET is forwarded and its reply cut after
                half the bytes (a broken download)
  reset_reply   the whole request is forwarded (the server does the work),
                then the reply is cut: headers and half the body, then a
                reset. The client cannot tell whether its request happened:
                the case retries must be safe for (CompleteMultipartUpload).
  error200      forwarded, then answered 200 with an <Error>InternalError
                body, as S3 may do for CompleteMultipartUpload (only
                there: a random error200 on any other request is a 500)
Random faults: a fraction `rate` of requests (of `methods`, if given) gets
one of `kinds`, chosen by a generator seeded with `seed`, so a run can be
repeated.

Rules pick faults for chosen requests, before the random rate is applied:

    r = proxy.rule("reset_reply", method="POST", query="uploadId=", times=1)
    r = proxy.rule("reset", method="PUT", reused=True)   # on a kept-alive connection
    r = proxy.rule("500", path=r"\\.tar\\.gz$", nth=3)      # the 3rd matching request
    r.fired                   # how many times it fired
    proxy.clear_rules()

  method     request method, or None for any
  path       regular expression searched in the path (without the query)
  query      substring of the raw query string ("uploads", "partNumber=2")
  header     (name, regex): a request header that must match
  reused     True: only the 2nd or later request on a connection (what
             makes libcurl resend a request internally); False: only the
             first; None: either
  nth        fire only on the nth request matching the rest (1-based)
  times      how many times to fire (None: every time)
The first rule that matches and has firings left decides.

Each entry of `requests` is a dict: method, path, query, host, headers (a
dict with lower-case names: the request's headers exactly as sent, so a
test can check SSE headers or the signature's SignedHeaders), body_len,
conn_seq (1 for the first request on its connection), fault (the kind
injected or None), status (what the client got, None after a reset).

Everything not faulted is forwarded unchanged (the Host header included, so
SigV4 signatures stay valid). Runs in threads of the test process and is
stopped when the case ends. Standard library only.
"""
import http.client
import http.server
import random
import re
import socket
import struct
import threading
from urllib.parse import urlsplit

ERROR_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
             '<Message>%s</Message><RequestId>faultproxy</RequestId></Error>')

KINDS = ("slowdown", "500", "reset", "reset_reply", "error200")


class _Reset(Exception):
    pass


class Rule:
    def __init__(self, kind, method=None, path=None, query=None, header=None,
                 reused=None, nth=None, times=1):
        if kind not in KINDS:
            raise ValueError("unknown fault kind %r (one of %s)" % (kind, ", ".join(KINDS)))
        self.kind = kind
        self.method = method
        self.path = re.compile(path) if path else None
        self.query = query
        self.header = (header[0].lower(), re.compile(header[1])) if header else None
        self.reused = reused
        self.nth = nth
        self.times = times
        self.matched = 0
        self.fired = 0

    def match(self, method, path, query, headers, conn_seq):
        if self.method is not None and method != self.method:
            return False
        if self.path is not None and not self.path.search(path):
            return False
        if self.query is not None and self.query not in query:
            return False
        if self.header is not None and not self.header[1].search(headers.get(self.header[0], "")):
            return False
        if self.reused is not None and (conn_seq > 1) != self.reused:
            return False
        self.matched += 1
        if self.nth is not None and self.matched != self.nth:
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        self.fired += 1
        return True


class FaultProxy:
    def __init__(self, t, upstream_port, rate=0.1, seed=1,
                 kinds=("slowdown", "500", "reset"), methods=None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.kinds = kinds
        self.methods = methods
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {"forwarded": 0, "canned": 0}
        for k in KINDS:
            self.counts[k] = 0
        self.canned = None
        self.rules = []
        self.log = []
        self.requests = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.conn_seq = 0

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.any()

            do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

            def reset(self):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.close_connection = True
                raise _Reset()

            def reply(self, status, body, headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                self.rec["status"] = status

            def any(self):
                self.conn_seq += 1
                length = int(self.headers.get("Content-Length") or 0)
                u = urlsplit(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                self.rec = {"method": self.command, "path": u.path, "query": u.query,
                            "host": self.headers.get("Host"), "headers": headers,
                            "body_len": length, "conn_seq": self.conn_seq,
                            "fault": None, "status": None}
                with proxy.lock:
                    proxy.log.append((self.command, self.headers.get("Host"), self.path,
                                      self.headers.get("Range")))
                    proxy.requests.append(self.rec)
                fault = proxy.pick(self.command, u.path, u.query, headers, self.conn_seq)
                self.rec["fault"] = fault
                if fault == "reset" and length > 0:
                    self.rfile.read(length // 2)
                    self.reset()
                if fault == "reset" and self.command != "GET":
                    self.reset()
                body = self.rfile.read(length) if length else b""
                if fault in ("slowdown", "500", "canned"):
                    if fault == "canned":
                        status, code, msg = proxy.canned
                    elif fault == "slowdown":
                        status, code, msg = 503, "SlowDown", "Please reduce your request rate."
                    else:
                        status, code, msg = 500, "InternalError", "We encountered an internal error."
                    self.reply(status, (ERROR_XML % (code, msg)).encode(),
                               [("Content-Type", "application/xml")])
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=120)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True,
                                    skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        if k.lower() not in ("connection", "keep-alive", "proxy-connection"):
                            conn.putheader(k, v)
                    conn.endheaders(body if body else None)
                    resp = conn.getresponse()
                    data = resp.read()
                    headers = [(k, v) for k, v in resp.getheaders()
                               if k.lower() not in ("transfer-encoding", "connection",
                                                    "content-length", "keep-alive")]
                finally:
                    conn.close()
                if fault == "reset_reply" and self.command == "HEAD":
                    self.reset()
                if (fault == "reset" and self.command == "GET" and len(data) > 1) or \
                        fault == "reset_reply":
                    # the server did it; the client gets a broken reply
                    self.send_response(resp.status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(max(len(data), 1)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.reset()
                if fault == "error200":
                    self.reply(200, (ERROR_XML % ("InternalError", "We encountered an "
                                                  "internal error. Please try again.")).encode(),
                               [("Content-Type", "application/xml")])
                    return
                with proxy.lock:
                    proxy.counts["forwarded"] += 1
                if self.command == "HEAD":
                    self.send_response(resp.status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
                    self.end_headers()
                    self.rec["status"] = resp.status
                    return
                self.reply(resp.status, data, headers)

            def handle_one_request(self):
                try:
                    super().handle_one_request()
                except (_Reset, ConnectionError, BrokenPipeError):
                    self.close_connection = True

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        t.on_cleanup(self.close)

    def rule(self, kind, **match):
        """Add a rule (see the module's comment); returns it."""
        r = Rule(kind, **match)
        with self.lock:
            self.rules.append(r)
        return r

    def clear_rules(self):
        with self.lock:
            self.rules = []

    def pick(self, method, path="", query="", headers=None, conn_seq=1):
        with self.lock:
            if self.canned is not None:
                self.counts["canned"] += 1
                return "canned"
            for r in self.rules:
                if r.match(method, path, query, headers or {}, conn_seq):
                    self.counts[r.kind] += 1
                    return r.kind
            if self.methods is not None and method not in self.methods:
                return None
            if self.rng.random() >= self.rate:
                return None
            kind = self.rng.choice(self.kinds)
            if kind == "error200" and not (method == "POST" and "uploadId=" in query):
                kind = "500"
            self.counts[kind] += 1
            return kind

    def faults(self):
        return sum(self.counts[k] for k in KINDS)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
