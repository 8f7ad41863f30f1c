"""faultproxy.py: an HTTP proxy that injects S3 faults, for storage tests.

    proxy = FaultProxy(t, upstream_port, rate=0.1, seed=7)
    proxy.endpoint            # point the client here instead of the server
    proxy.counts              # {"forwarded": n, "slowdown": n, "500": n, "reset": n}
    proxy.canned = (403, "SignatureDoesNotMatch", "...")   # answer this to everything
    proxy.log                 # [(method, host, path, range header), ...] as received
    FaultProxy(t, port, methods=("GET",))  # only GETs get faults

A fraction `rate` of requests gets, in turn of a seeded random choice:
  slowdown  503 with an S3 <Error><Code>SlowDown</Code> body
  500       500 InternalError
  reset     the connection is reset: mid-body for uploads, mid-reply for
            downloads (after half the object was sent), at once otherwise
Everything else is forwarded unchanged (Host header included, so SigV4
signatures stay valid). Runs in threads of the test process; stopped when
the case ends. Standard library only.
"""
import http.client
import http.server
import random
import socket
import struct
import threading

ERROR_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
             '<Message>%s</Message><RequestId>faultproxy</RequestId></Error>')


class _Reset(Exception):
    pass


class FaultProxy:
    def __init__(self, t, upstream_port, rate=0.1, seed=1,
                 kinds=("slowdown", "500", "reset"), methods=None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.kinds = kinds
        self.methods = methods
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {"forwarded": 0, "slowdown": 0, "500": 0, "reset": 0, "canned": 0}
        self.canned = None
        self.log = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

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

            def any(self):
                length = int(self.headers.get("Content-Length") or 0)
                with proxy.lock:
                    proxy.log.append((self.command, self.headers.get("Host"), self.path,
                                      self.headers.get("Range")))
                fault = proxy.pick(self.command)
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
                if fault == "reset" and self.command == "GET" and len(data) > 1:
                    # send half the reply, then reset: a broken download
                    self.send_response(resp.status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.reset()
                with proxy.lock:
                    proxy.counts["forwarded"] += 1
                if self.command == "HEAD":
                    self.send_response(resp.status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
                    self.end_headers()
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

    def pick(self, method):
        with self.lock:
            if self.canned is not None:
                self.counts["canned"] += 1
                return "canned"
            if self.methods is not None and method not in self.methods:
                return None
            if self.rng.random() >= self.rate:
                return None
            kind = self.rng.choice(self.kinds)
            self.counts[kind] += 1
            return kind

    def faults(self):
        return self.counts["slowdown"] + self.counts["500"] + self.counts["reset"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
