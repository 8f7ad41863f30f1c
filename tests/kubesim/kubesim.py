#!/usr/bin/env python3
"""kubesim: a Kubernetes API server stand-in for cairn's tests (Python 3 stdlib only).

usage: kubesim.py --port 0 --ready-file FILE --kubeconfig-out FILE [--tls]
                  [--token NAME=TOKEN ...] [--seed DIR|FILE ...] [--host 127.0.0.1]
                  [--exec-root DIR] [--exec-protocols P1,P2]

See README.md in this directory for what is faithful, what is approximated and
the /_sim/ test API."""

import argparse
import atexit
import email.utils
import gzip
import hashlib
import io
import itertools
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs, unquote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ks_core import Sim, ApiError, STATUS_REASONS, dumps, loads, bad_request  # noqa: E402
from ks_select import parse_label_selector, parse_field_selector, SelectorError  # noqa: E402
from ks_types import make_table, partial_meta  # noqa: E402
from ks_rbac import Authorizer, user_for  # noqa: E402
import ks_exec  # noqa: E402
import ks_psa  # noqa: E402
import ks_discovery  # noqa: E402
import ks_controllers  # noqa: E402
import ks_snapshot  # noqa: E402
import ks_auth  # noqa: E402
import ks_virtual  # noqa: E402
import ks_patch  # noqa: E402
import ks_loop  # noqa: E402

try:
    import yaml  # optional, for YAML seeds / bodies / apply patches
except ImportError:  # pragma: no cover
    yaml = None

VERSION_INFO = {"major": "1", "minor": "32", "gitVersion": "v1.32.4", "gitCommit": "kubesim",
                "gitTreeState": "clean", "buildDate": "2025-04-22T16:02:27Z", "goVersion": "go1.23.6",
                "compiler": "gc", "platform": "linux/amd64"}

MAX_BODY = 3 * 1024 * 1024 + 1024
GZIP_MIN = 128 * 1024
PATCH_TYPES = {"application/merge-patch+json": "merge", "application/json-patch+json": "json",
               "application/strategic-merge-patch+json": "strategic", "application/apply-patch+yaml": "apply",
               "application/apply-patch+json": "apply"}


def status_body(code, message, reason=None, details=None):
    return ApiError(code, reason or STATUS_REASONS.get(code, ""), message, details).status()


def method_not_allowed():
    """go-restful's answer when the path exists but not for this method, as
    genericapiserver's serviceErrorHandler writes it (NewGenericServerResponse)."""
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def not_supported(rt, action):
    """apierrors.NewMethodNotSupported: a handler that exists but whose storage
    lacks the verb (watch on a list-only resource)."""
    d = {"group": rt.group, "kind": rt.plural} if rt.group else {"kind": rt.plural}
    return ApiError(405, "MethodNotAllowed", '%s is not supported on resources of kind "%s"' % (action, rt.qualified), d)


class PlainError(Exception):
    """An answer that is not a Status: what http.Error writes (kube-aggregator
    for an APIService whose backend is down)."""

    def __init__(self, code, text):
        super().__init__(text)
        self.code = code
        self.text = text


# ---------------------------------------------------------------- faults
class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.ids = itertools.count(1)

    def add(self, spec):
        rules = spec if isinstance(spec, list) else spec.get("rules", [spec]) if isinstance(spec, dict) else None
        if rules is None:
            raise ValueError("fault spec must be a JSON object or list")
        out = []
        for r in rules:
            if not isinstance(r, dict):
                raise ValueError("fault rule must be an object")
            rule = dict(r)
            rule["id"] = next(self.ids)
            m = r.get("method")
            rule["_methods"] = None if not m else {x.upper() for x in (m if isinstance(m, list) else [m])}
            rule["_path"] = re.compile(r["path"]) if r.get("path") else None
            gv = r.get("groupVersion")
            if gv is not None:
                if not isinstance(gv, str) or not gv:
                    raise ValueError("groupVersion must be \"group/version\" or \"v1\"")
                rule["_gv"] = re.compile("^" + re.escape(("/apis/" if "/" in gv else "/api/") + gv) + "(/|$)")
            rule["_query"] = re.compile(r["query"]) if r.get("query") else None
            rule["_rng"] = random.Random(r.get("seed", 0))
            rule["remaining"] = r.get("count")
            rule["hits"] = 0
            out.append(rule)
        with self.lock:
            self.rules.extend(out)
        return [x["id"] for x in out]

    def clear(self):
        with self.lock:
            self.rules = []

    def stale_gvs(self):
        """Group-versions a rule makes unavailable (503 or dropped): aggregated
        discovery lists them with freshness Stale, as kube-aggregator does
        for an APIService whose service is down."""
        if not self.rules:
            return ()
        with self.lock:
            return {r["groupVersion"] for r in self.rules
                    if r.get("groupVersion") and (r.get("status") == 503 or r.get("drop"))
                    and (r["remaining"] is None or r["remaining"] > 0)
                    and r.get("probability") is None}

    def list(self):
        with self.lock:
            return [{k: v for k, v in r.items() if not k.startswith("_")} for r in self.rules]

    def match(self, method, path, query, token, watch=False):
        if not self.rules:
            return None
        with self.lock:
            for r in self.rules:
                if r["remaining"] is not None and r["remaining"] <= 0:
                    continue
                if r.get("watchError") is not None and not watch:
                    continue
                if r["_methods"] and method not in r["_methods"]:
                    continue
                if r["_path"] and not r["_path"].search(path):
                    continue
                if r.get("_gv") and not r["_gv"].search(path):
                    continue
                if r["_query"] and not r["_query"].search(query):
                    continue
                if "token" in r and r["token"] != token:
                    continue
                if r.get("probability") is not None and r["_rng"].random() >= float(r["probability"]):
                    continue
                if r["remaining"] is not None:
                    r["remaining"] -= 1
                r["hits"] += 1
                return dict(r)
        return None


# ---------------------------------------------------------------- request log
class RequestLog:
    def __init__(self, maxlen=200000):
        self.lock = threading.Lock()
        self.entries = deque(maxlen=maxlen)
        self.seq = 0

    def add(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            self.entries.append(entry)

    def since(self, n):
        with self.lock:
            return [e for e in self.entries if e["seq"] > n]

    def clear(self):
        with self.lock:
            self.entries.clear()


# ---------------------------------------------------------------- server
class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 4096

    def __init__(self, addr, sim, tokens, ssl_ctx, opts):
        self.sim = sim
        self.tokens = tokens            # token -> name
        self.users = {n: user_for(n) for n in tokens.values()}  # name -> restricted ks_rbac.User or None
        self.minted = ks_auth.MintedTokens()   # /_sim/tokens (exec credential plugins)
        self.cert_auth = False          # client certificates signed by kubesim's CA authenticate
        self.auth_required = bool(tokens)
        self.authz = Authorizer(sim)
        self.ssl_ctx = ssl_ctx
        self.opts = opts
        self.faults = Faults()
        self.log = RequestLog()
        self.conn_ids = itertools.count(1)
        self.adopted = {}   # socket -> (connection id, bytes read) of a connection ks_loop hands to a thread
        self.base_url = ""
        # Subresources served by plugins (pods/exec in ks_exec):
        # (group, plural, subresource) -> {"kind": K, "verbs": [...], "handler": fn}
        # with fn(handler, method, rt, ns, name, body) answering the request; listed
        # in discovery. Register with register_subresource().
        self.connect = {}
        super().__init__(addr, Handler)

    def register_subresource(self, group, plural, sub, kind, verbs, handler):
        """A plugin's subresource (e.g. "", "pods", "exec", "PodExecOptions",
        ["create", "get"], fn): routed to fn, listed in discovery."""
        self.connect[(group, plural, sub)] = {"kind": kind, "verbs": list(verbs), "handler": handler}

    def serve_forever(self, poll_interval=0.5):
        """Plain HTTP: ks_loop serves the requests that cannot block in this
        thread and gives the others' connections a thread each; TLS: a
        thread per connection."""
        if self.ssl_ctx is not None:
            super().serve_forever(poll_interval)
            return
        ks_loop.Loop(self, self.RequestHandlerClass, MAX_BODY).run(poll_interval)

    def finish_request(self, request, client_address):
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_ctx is None:
            self.RequestHandlerClass(request, client_address, self)
            return
        request.settimeout(15)
        try:
            tls = self.ssl_ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            tls.settimeout(None)
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, TimeoutError, OSError)):
            return
        super().handle_error(request, client_address)


class DropConnection(Exception):
    pass


class Headers(dict):
    """Request headers by lower-case name (the first of repeated ones, as
    email.message.Message.get answers); get() is case-insensitive."""
    __slots__ = ()
    has = dict.__contains__     # by the lower-case name
    put = dict.__setitem__

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name):
        return dict.get(self, name.lower())

    def __contains__(self, name):
        return dict.__contains__(self, name.lower())


_date_cache = [0, ""]


def http_date():
    """The Date header value, formatted once per second."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[1] = email.utils.formatdate(now, usegmt=True)
        _date_cache[0] = now
    return _date_cache[1]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubesim"
    sys_version = ""
    # Idle plain-HTTP connections are closed after 600 s by SO_RCVTIMEO on a
    # blocking socket, not by a Python socket timeout: with one, CPython polls
    # before every recv and send (two more syscalls and GIL round trips a
    # request). TLS connections keep the Python timeout.
    timeout = None
    idle_timeout = 600

    def setup(self):
        super().setup()
        adopted = self.server.adopted.pop(self.connection, None)
        if adopted is None:
            self.conn_id = next(self.server.conn_ids)
        else:   # from ks_loop, with the bytes it read
            self.conn_id, data = adopted
            self.rfile.close()
            self.rfile = io.BufferedReader(ks_loop.Prefixed(data, self.connection))
        if isinstance(self.connection, ssl.SSLSocket):
            # the ssl module retries a blocking read that SO_RCVTIMEO ends
            self.connection.settimeout(self.idle_timeout)
        else:
            tv = struct.pack("ll", self.idle_timeout, 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)

    def log_message(self, fmt, *args):
        pass

    def date_time_string(self, timestamp=None):
        return http_date() if timestamp is None else super().date_time_string(timestamp)

    def parse_request(self):
        """BaseHTTPRequestHandler.parse_request with the same rules and answers
        (400, 505, 431, Connection, Expect: 100-continue) but without the
        email package: its header parser was half of kubesim's CPU time per
        request."""
        self.command = None
        self.request_version = version = self.default_request_version
        self.close_connection = True
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            try:
                if not version.startswith("HTTP/"):
                    raise ValueError
                major, dot, minor = version[5:].partition(".")
                if not (dot and major.isdigit() and minor.isdigit() and len(major) <= 10 and len(minor) <= 10):
                    raise ValueError
                vn = int(major), int(minor)
            except ValueError:
                self.send_error(400, "Bad request version (%r)" % version)
                return False
            if vn >= (1, 1) and self.protocol_version >= "HTTP/1.1":
                self.close_connection = False
            if vn >= (2, 0):
                self.send_error(505, "Invalid HTTP version (%s)" % version[5:])
                return False
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(400, "Bad request syntax (%r)" % requestline)
            return False
        command, path = words[:2]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(400, "Bad HTTP/0.9 request type (%r)" % command)
                return False
        self.command, self.path = command, path
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        headers = Headers()
        last = None
        readline = self.rfile.readline
        has, put = headers.has, headers.put
        for _ in range(101):
            line = readline(65537)
            if line == b"\r\n" or line == b"\n" or not line:
                break
            if len(line) > 65536:
                self.send_error(431, "Line too long")
                return False
            if line[0] in b" \t":
                if last is not None:
                    put(last, dict.__getitem__(headers, last) + " " + line.strip().decode("iso-8859-1"))
                continue
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            last = name.strip().lower().decode("iso-8859-1")
            if has(last):
                last = None
            else:
                put(last, value.strip().decode("iso-8859-1"))
        else:
            self.send_error(431, "Too many headers")
            return False
        self.headers = headers
        conntype = (headers.get("Connection") or "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        if ((headers.get("Expect") or "").lower() == "100-continue" and self.protocol_version >= "HTTP/1.1"
                and self.request_version >= "HTTP/1.1"):
            if not self.handle_expect_100():
                return False
        return True

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # ------------------------------------------------------------ plumbing
    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise DropConnection()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                total += size
                if total > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge", "the request is too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "limit is 3145728")
        return self.rfile.read(n) if n else b""

    def send(self, code, body, ctype="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = dumps(body)
        extra = ""
        entry = getattr(self, "log_entry", None)
        if entry is not None:
            entry["bytes"] = len(body)      # the reply's body, and below as sent
        if (len(body) >= GZIP_MIN and not self.server.opts.no_gzip
                and "gzip" in (self.headers.get("Accept-Encoding") or "")):
            body = gzip.compress(body, compresslevel=1, mtime=0)
            extra += "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n"
        if entry is not None:
            entry["wire"] = len(body)
        warnings, audit = ks_psa.take()     # Pod Security admission of this request
        headers = list(headers) + [("Warning", ks_psa.warning_header(w)) for w in warnings]
        if audit and getattr(self, "log_entry", None) is not None:
            self.log_entry["audit"] = audit
        for k, v in headers:
            extra += "%s: %s\r\n" % (k, v)
        warns = getattr(self.server.sim.local, "warnings", None)
        if warns:
            for w in warns:
                extra += 'Warning: 299 - %s\r\n' % json.dumps(w)
            del warns[:]
        if self.close_connection:
            extra += "Connection: close\r\n"
        head = ("HTTP/1.1 %d %s\r\nCache-Control: no-cache, private\r\nContent-Type: %s\r\n"
                "Date: %s\r\n%sContent-Length: %d\r\n\r\n"
                % (code, self.responses.get(code, ("",))[0], ctype, self.date_time_string(), extra, len(body)))
        if self.command == "HEAD":
            body = b""
        self.wfile.write(head.encode("latin-1") + body)
        self.status_code = code

    def send_api_error(self, err):
        hdrs = list(err.headers)
        self.send(err.code, err.status(), headers=hdrs)

    def client_gone(self):
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(r)

    # ------------------------------------------------------------ dispatch
    def dispatch(self):
        t0 = time.time()
        self.status_code = 0
        self.log_entry = None       # this request's, once it has one
        if self.path.startswith("/"):
            path, _, query = self.path.partition("?")
            query = query.partition("#")[0]
        else:
            url = urlsplit(self.path)
            path, query = url.path, url.query
        self.q = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()} if query else {}
        srv = self.server
        token_name, auth_ok = None, not srv.auth_required
        authz = self.headers.get("Authorization") or ""
        if srv.cert_auth and isinstance(self.connection, ssl.SSLSocket):
            cu = ks_auth.cert_user(self.connection)
            if cu is not None:
                token_name, auth_ok = cu[0], True
        if token_name is None and authz.startswith("Bearer "):
            tok = authz[7:].strip()
            token_name = srv.tokens.get(tok)
            if token_name is None:
                m = srv.minted.lookup(tok)
                if m is not None and not m[1]:
                    token_name = m[0]
            if token_name is not None:
                auth_ok = True
        method = self.command.upper()
        entry = None
        srv.authz.set_user(None)
        srv.sim.local.warnings = []
        try:
            try:
                body = self.read_body()
            except ValueError:
                raise ApiError(400, "BadRequest", "malformed chunked body")
            if path.startswith("/_sim/") or path == "/_sim":
                self.sim_api(method, path, body)
                return
            entry = {"time": t0, "conn": self.conn_id, "token": token_name, "method": method, "path": path,
                     "query": query, "status": 0,
                     "contentType": self.headers.get("Content-Type") or "",
                     "userAgent": self.headers.get("User-Agent") or ""}
            if body:
                entry["bodyCrc"] = zlib.crc32(body)  # a re-sent request has the same
            self.log_entry = entry
            is_watch = method == "GET" and (self.q.get("watch") in ("1", "true", "True") or "/watch/" in path)
            fault = srv.faults.match(method, path, query, token_name, is_watch)
            self.watch_fault = None
            self.cut_fault = None
            if fault and fault.get("cutAfterItems") is not None and not is_watch:
                # the list answers normally; route() cuts its body after N items
                entry["fault"] = fault["id"]
                self.cut_fault = fault
                if fault.get("delay"):
                    time.sleep(float(fault["delay"]))
                fault = None
            if fault and fault.get("watchError") is not None:
                # the watch starts normally; do_watch ends it with an ERROR event
                entry["fault"] = fault["id"]
                self.watch_fault = fault
                fault = None
            if fault:
                entry["fault"] = fault["id"]
                if fault.get("delay"):
                    time.sleep(float(fault["delay"]))
                if fault.get("drop"):
                    raise DropConnection()
                if fault.get("status") and fault.get("groupVersion") and not fault.get("message") \
                        and int(fault["status"]) in (503, 500):
                    # kube-aggregator's proxyError: http.Error text, not a Status
                    raise PlainError(int(fault["status"]), "service unavailable\n" if int(fault["status"]) == 503
                                     else "Internal Server Error\n")
                if fault.get("status"):
                    code = int(fault["status"])
                    hdrs, details = [], None
                    if fault.get("retryAfter") is not None or code == 429:
                        ra = int(fault.get("retryAfter", 1))
                        hdrs.append(("Retry-After", str(ra)))
                        details = {"retryAfterSeconds": ra}
                        entry["retryAfter"] = ra
                    hdrs.extend((fault.get("headers") or {}).items())
                    msg = fault.get("message") or {
                        429: "Too many requests, please try again later.",
                        500: "Internal error occurred: injected fault",
                        503: "The server is currently unable to handle the request",
                        504: "The server was unable to return a response in the time allotted, but may still be processing the request"}.get(code, "injected fault")
                    raise ApiError(code, fault.get("reason") or STATUS_REASONS.get(code, ""), msg, details, hdrs)
            if not auth_ok:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if token_name is not None and token_name not in srv.users:
                srv.users[token_name] = user_for(token_name)
            user = srv.users.get(token_name) if token_name is not None else None
            srv.authz.set_user(user)
            loc = srv.sim.local
            loc.user = token_name
            loc.user_agent = self.headers.get("User-Agent") or ""
            loc.manager = self.q.get("fieldManager") or None
            loc.sub = None
            loc.field_validation = self.q.get("fieldValidation") or "Warn"
            loc.force = self.q.get("force") in ("true", "1", "True")
            loc.applied = None
            loc.req_managed = None
            if user is not None:
                if not srv.authz.sa_exists(user):
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                srv.authz.authorize(user, method, path, self.q)
            self.route(method, path, body)
        except DropConnection:
            self.close_connection = True
            if entry is not None:
                entry["status"] = 0
                entry["dropped"] = True
        except ApiError as e:
            self.send_api_error(e)
        except PlainError as e:
            self.send(e.code, e.text.encode(), "text/plain; charset=utf-8",
                      headers=[("X-Content-Type-Options", "nosniff")])
        except (ConnectionError, ssl.SSLError, BrokenPipeError, TimeoutError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            try:
                self.send_api_error(ApiError(500, "InternalError", "Internal error occurred: %s" % e))
            except OSError:
                self.close_connection = True
        finally:
            if entry is not None:
                if not entry.get("watch"):
                    entry["status"] = self.status_code
                    entry["duration"] = round(time.time() - t0, 6)
                    srv.log.add(entry)

    # ------------------------------------------------------------ /_sim/
    def sim_api(self, method, path, body):
        srv = self.server
        sim = srv.sim
        try:
            data = json.loads(body) if body.strip() else None
        except ValueError:
            self.send(400, {"error": "invalid JSON"})
            return
        p = path.rstrip("/")
        if p == "/_sim/faults":
            if method == "POST":
                try:
                    ids = srv.faults.add(data)
                except (ValueError, re.error, TypeError, AttributeError) as e:
                    self.send(400, {"error": str(e)})
                    return
                self.send(200, {"ids": ids})
            elif method == "DELETE":
                srv.faults.clear()
                self.send(200, {"cleared": True})
            else:
                self.send(200, srv.faults.list())
        elif p == "/_sim/requests":
            if method == "DELETE":
                srv.log.clear()
                self.send(200, {"cleared": True})
            else:
                self.send(200, srv.log.since(int(self.q.get("since", "0") or 0)))
        elif p == "/_sim/reset" and method == "POST":
            sim.reset()
            srv.faults.clear()
            srv.log.clear()
            self.send(200, {"resourceVersion": str(sim.current_rv())})
        elif p == "/_sim/compact" and method == "POST":
            self.send(200, {"resourceVersion": str(sim.compact())})
        elif p == "/_sim/stats":
            st = sim.stats()
            st["connections"] = next(srv.conn_ids) - 1
            self.send(200, st)
        elif p == "/_sim/bulk" and method == "POST":
            try:
                self.send(200, self.bulk(data))
            except ApiError as e:
                self.send_api_error(e)
            except (ValueError, KeyError, TypeError) as e:
                self.send(400, {"error": str(e)})
        elif p == "/_sim/tokens" and method == "POST":
            try:
                tok, exp = srv.minted.mint(str(data["name"]), float(data.get("ttl", 3600)))
            except (TypeError, KeyError, ValueError) as e:
                self.send(400, {"error": "want {\"name\": NAME, \"ttl\": SECONDS}: %s" % e})
                return
            self.send(200, {"token": tok, "expirationTimestamp": exp})
        elif p == "/_sim/health":
            self.send(200, b"ok", "text/plain")
        else:
            self.send(404, {"error": "unknown /_sim/ endpoint"})

    def bulk(self, data):
        sim = self.server.sim
        if isinstance(data, dict) and "template" in data:
            t = data["template"]
            rt = sim.by_gvk.get((t.get("apiVersion"), t.get("kind")))
            if rt is None:
                raise ValueError("unknown apiVersion/kind in template")
            ns = data.get("namespace") or (t.get("metadata") or {}).get("namespace") or ("default" if rt.namespaced else None)
            fmt = data.get("name", "obj-{i:06d}")
            start = int(data.get("start", 0))
            names = (fmt.format(i=i) for i in range(start, start + int(data["count"])))
            n = sim.bulk_create(rt, ns if rt.namespaced else None, t, names)
            return {"created": n, "resourceVersion": str(sim.current_rv())}
        items = data if isinstance(data, list) else (data or {}).get("items", [])
        if isinstance(data, dict) and data.get("raw"):
            return {"created": sim.bulk_put(items), "resourceVersion": str(sim.current_rv())}
        n, errors = 0, []
        for o in items:
            rt = sim.by_gvk.get((o.get("apiVersion"), o.get("kind")))
            if rt is None:
                errors.append("unknown kind %s/%s" % (o.get("apiVersion"), o.get("kind")))
                continue
            ns = (o.get("metadata") or {}).get("namespace") or ("default" if rt.namespaced else None)
            try:
                sim.create(rt, ns if rt.namespaced else None, o)
                n += 1
            except ApiError as e:
                errors.append(e.message)
        return {"created": n, "errors": errors, "resourceVersion": str(sim.current_rv())}

    # ------------------------------------------------------------ routing
    def route(self, method, path, body):
        sim = self.server.sim
        if path in ("/healthz", "/livez", "/readyz"):
            self.send(200, b"ok", "text/plain; charset=utf-8")
            return
        if path == "/version" or path == "/version/":
            self.send(200, VERSION_INFO)
            return
        if path.startswith("/openapi/"):
            self.openapi(path)
            return
        segs = [unquote(s) if "%" in s else s for s in path.strip("/").split("/") if s != ""]
        if not segs or segs[0] not in ("api", "apis"):
            if not segs:
                self.send(200, {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3",
                                          "/readyz", "/version"]})
                return
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        srv = self.server
        if segs[0] == "api":
            if len(segs) == 1:
                self.discovery_root(True)
                return
            g, v, rest = "", segs[1], segs[2:]
        else:
            if len(segs) == 1:
                self.discovery_root(False)
                return
            if len(segs) == 2:
                grp = ks_discovery.group(sim, segs[1])
                if grp is None:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
                self.send(200, grp)
                return
            g, v, rest = segs[1], segs[2], segs[3:]
        if not rest:
            res = ks_discovery.resource_list(sim, g, v, srv.connect)
            if res is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
            self.send(200, res)
            return
        watch = False
        if rest[0] == "watch":
            watch = True
            rest = rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            rt3 = sim.lookup(g, v, rest[2])
            if rt3 is not None and rt3.namespaced:
                ns = rest[1]
                rest = rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        rt = sim.lookup(g, v, rest[0])
        if rt is None or (ns is not None and not rt.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if rt.namespaced and ns is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if sub is not None and name is not None and not watch:
            conn = srv.connect.get((rt.group, rt.plural, sub))
            if conn is not None:
                # a plugin's subresource (pods/exec in ks_exec): it answers itself
                sim.local.sub = sub
                conn["handler"](self, method, rt, ns, name, body)
                return
        if sub is not None and not ((sub == "status" and rt.has_status) or (sub == "scale" and rt.scale)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        sim.local.sub = sub
        self.resource(method, rt, ns, name, sub, body, watch)

    def discovery_root(self, core):
        """/api or /apis: aggregated discovery (apidiscovery.k8s.io v2/v2beta1)
        when the Accept header asks for it first, else the legacy document."""
        srv = self.server
        ver = ks_discovery.aggregated_wanted(self.headers.get("Accept"))
        if ver is not None:
            doc = ks_discovery.aggregated(srv.sim, core, ver, srv.connect, srv.faults.stale_gvs())
            self.send(200, doc, ks_discovery.content_type(ver), headers=[("Vary", "Accept")])
        elif core:
            self.send(200, ks_discovery.api_versions(srv.hostport))
        else:
            self.send(200, ks_discovery.api_group_list(srv.sim))

    # ------------------------------------------------------------ openapi
    def openapi(self, path):
        sim = self.server.sim
        if path.rstrip("/") == "/openapi/v3":
            paths = {}
            for g, vs in ks_discovery.group_versions(sim):
                for v in vs:
                    key = "apis/%s/%s" % (g, v) if g else "api/" + v
                    h = hashlib.sha512(json.dumps(self.gv_doc(g, v), sort_keys=True).encode()).hexdigest()[:64].upper()
                    paths[key] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (key, h)}
            self.send(200, {"paths": paths})
            return
        m = re.match(r"^/openapi/v3/(api/([^/]+)|apis/([^/]+)/([^/]+))/?$", path)
        if not m:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        g, v = ("", m.group(2)) if m.group(2) else (m.group(3), m.group(4))
        doc = self.gv_doc(g, v)
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        self.send(200, doc)

    def gv_doc(self, g, v):
        sim = self.server.sim
        with sim.lock:
            rts = [rt for (gg, vv, p), rt in sim.types.items() if gg == g and vv == v]
        if not rts:
            return None
        prefix = "/apis/%s/%s" % (g, v) if g else "/api/" + v
        params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for n in ("dryRun", "fieldManager", "fieldValidation", "force")]
        paths = {}
        for rt in sorted(rts, key=lambda r: r.plural):
            gvk = {"group": g, "version": v, "kind": rt.kind}
            base = prefix + ("/namespaces/{namespace}/" if rt.namespaced else "/") + rt.plural
            item = {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch",
                    "operationId": "patch" + rt.kind, "parameters": params,
                    "responses": {"200": {"description": "OK"}}}
            paths[base + "/{name}"] = {"patch": item}
            if rt.has_status:
                paths[base + "/{name}/status"] = {"patch": dict(item, operationId="patch" + rt.kind + "Status")}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"},
                "paths": paths, "components": {"schemas": {}}}

    # ------------------------------------------------------------ resources
    def parse_body(self, body, allow_yaml=False):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if "protobuf" in ctype:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media types include: "
                           "application/json, application/yaml")
        if ctype in ("application/yaml", "application/apply-patch+yaml") or allow_yaml:
            try:
                return json.loads(body)
            except ValueError:
                if yaml is None:
                    raise bad_request("YAML bodies need PyYAML")
                try:
                    return yaml.safe_load(body)
                except yaml.YAMLError as e:
                    raise bad_request("error converting YAML to JSON: %s" % e)
        try:
            return json.loads(body)
        except ValueError as e:
            raise bad_request("couldn't get version/kind; json parse error: %s" % e)

    def selectors(self, rt):
        try:
            lsel = parse_label_selector(self.q.get("labelSelector"))
            fsel = parse_field_selector(self.q.get("fieldSelector"), rt.field_selectors)
        except SelectorError as e:
            raise bad_request(str(e))
        return lsel, fsel

    def output_kind(self):
        acc = self.headers.get("Accept") or ""
        for part in acc.split(","):
            if "as=Table" in part and "meta.k8s.io" in part:
                return "table"
            if "as=PartialObjectMetadata" in part:
                return "partial"
            if part.strip().split(";")[0].strip() in ("application/json", "*/*", "application/*", ""):
                return "json"
        return "json"

    def verb_of(self, method, name, sub, watch):
        if method == "GET":
            if watch or self.q.get("watch") in ("1", "true", "True"):
                return "watch"
            return "get" if name is not None else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if name is not None else "deletecollection"
        return None

    def resource(self, method, rt, ns, name, sub, body, watch):
        verb = self.verb_of(method, name, sub, watch)
        if sub is None and verb not in rt.verbs:
            if verb == "watch" and "list" in rt.verbs:
                raise not_supported(rt, "watch")
            raise method_not_allowed()
        if rt.virtual:
            return self.virtual_resource(verb, rt, ns, name)
        if rt.alias:
            return self.alias_resource(method, verb, rt, ns, name, sub, body, watch)
        sim = self.server.sim
        q = self.q
        dry = q.get("dryRun") == "All"
        if method == "GET":
            if watch or q.get("watch") in ("1", "true", "True"):
                lsel, fsel = self.selectors(rt)
                if name is not None:
                    fsel = (fsel or []) + [("metadata.name", "=", name)]
                self.do_watch(rt, ns, lsel, fsel)
                return
            if sub == "scale":
                self.send(200, sim.get_scale(rt, ns, name))
                return
            if name is not None:
                data = sim.get(rt, ns, name)
                ok = self.output_kind()
                if ok == "table":
                    o = loads(data)
                    self.send(200, make_table(rt, [o], {"resourceVersion": o["metadata"].get("resourceVersion")},
                                              q.get("includeObject", "Metadata")))
                elif ok == "partial":
                    self.send(200, partial_meta(loads(data)))
                else:
                    self.send(200, data)
                return
            meta, items = self.list_page(rt, rt, ns)
            ok = self.output_kind()
            if ok == "table":
                self.send(200, make_table(rt, [loads(d) for d in items], meta, q.get("includeObject", "Metadata")))
            elif ok == "partial":
                self.send(200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                                "items": [partial_meta(loads(d)) for d in items]})
            elif self.cut_fault is not None:
                self.send_cut(self.list_parts(rt, meta, items), int(self.cut_fault["cutAfterItems"]))
            else:
                self.send(200, self.list_body(rt, meta, items))
            return
        if method == "POST":
            if name is not None:
                raise method_not_allowed()
            if rt.namespaced and ns is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
            obj = self.parse_body(body)
            code, out = sim.create(rt, ns, obj, dry)
            self.send(code, out)
            return
        if method == "PUT":
            if name is None:
                raise method_not_allowed()
            obj = self.parse_body(body)
            code, out = sim.update(rt, ns, name, obj, sub, dry)
            self.send(code, out)
            return
        if method == "PATCH":
            if name is None:
                raise method_not_allowed()
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            ptype = PATCH_TYPES.get(ctype)
            if ptype is None or (ptype == "strategic" and rt.custom and sub != "scale"):
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                               + ("" if rt.custom else ", application/strategic-merge-patch+json"))
            if ptype == "apply" and not q.get("fieldManager"):
                raise ApiError(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                               {"group": "meta.k8s.io", "kind": "PatchOptions",
                                "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch",
                                            "field": "fieldManager"}]})
            try:
                patch = self.parse_body(body, allow_yaml=(ptype == "apply"))
            except ApiError:
                raise
            code, out = sim.patch(rt, ns, name, ptype, patch, sub, dry)
            self.send(code, out)
            return
        if method == "DELETE":
            opts = self.delete_opts(body)
            if opts.get("dryRun") == ["All"]:
                dry = True
            if name is None:
                lsel, fsel = self.selectors(rt)
                code, out = sim.delete_collection(rt, ns, lsel, fsel, opts, dry)
            else:
                if sub is not None:
                    raise method_not_allowed()
                code, out = sim.delete(rt, ns, name, opts, dry)
            self.send(code, out)
            return
        raise method_not_allowed()

    def list_page(self, rt, store_rt, ns):
        """One page of a list request (selectors, limit, continue) of rt, read
        from store_rt's objects. -> (list metadata, [stored bytes])."""
        lsel, fsel = self.selectors(rt)
        try:
            limit = int(self.q.get("limit") or 0)
        except ValueError:
            raise bad_request("invalid limit")
        return self.server.sim.list(store_rt, ns, lsel, fsel, max(0, limit), self.q.get("continue") or None)

    @staticmethod
    def list_parts(rt, meta, items):
        """A list as the real server encodes it, as (head, [item bytes],
        tail) around the items' commas. Built-in (typed) lists: kind,
        apiVersion, metadata, items, and the items carry no apiVersion or
        kind (client-go's unstructured decoder puts them back). Custom
        resource lists come from Go maps: keys sorted, so items before
        metadata, and items keep apiVersion and kind."""
        if rt.custom:
            return (b'{"apiVersion":' + dumps(rt.api_version) + b',"items":[', list(items),
                    b'],"kind":' + dumps(rt.list_kind) + b',"metadata":' + dumps(meta) + b"}")
        pre = rt.list_prefix
        n = len(pre)
        out = [b"{" + d[n:] if d.startswith(pre) else d for d in items]
        return (b'{"kind":' + dumps(rt.list_kind) + b',"apiVersion":' + dumps(rt.api_version) +
                b',"metadata":' + dumps(meta) + b',"items":[', out, b"]}")

    @classmethod
    def list_body(cls, rt, meta, items):
        head, out, tail = cls.list_parts(rt, meta, items)
        return head + b",".join(out) + tail

    def send_cut(self, parts, n):
        """The cutAfterItems fault: a 200 list reply whose headers announce
        the whole body (uncompressed) but whose connection closes right
        after its first n items, as a connection dropped mid-body."""
        head, out, tail = parts
        whole = len(head) + sum(len(x) for x in out) + max(len(out) - 1, 0) + len(tail)
        cut = head + b",".join(out[:n])
        self.wfile.write(("HTTP/1.1 200 OK\r\nCache-Control: no-cache, private\r\n"
                          "Content-Type: application/json\r\nDate: %s\r\nContent-Length: %d\r\n\r\n"
                          % (self.date_time_string(), whole)).encode("latin-1") + cut)
        self.wfile.flush()
        raise DropConnection()

    def virtual_resource(self, verb, rt, ns, name):
        """componentstatuses and metrics.k8s.io (ks_virtual): get and list only."""
        sim = self.server.sim
        hdrs = []
        if rt.virtual == "componentstatuses":
            hdrs.append(("Warning", '299 - "v1 ComponentStatus is deprecated in v1.19+"'))
        if verb == "get":
            self.send(200, ks_virtual.virtual_get(sim, rt, ns, name), headers=hdrs)
            return
        lsel, fsel = self.selectors(rt)
        lst = ks_virtual.virtual_list(sim, rt, ns, lsel, fsel)
        if self.output_kind() == "table":
            objs = [dict({"kind": rt.kind, "apiVersion": rt.api_version}, **o) for o in lst["items"]]
            self.send(200, make_table(rt, objs, {}, self.q.get("includeObject", "Metadata")), headers=hdrs)
            return
        self.send(200, lst, headers=hdrs)

    def alias_resource(self, method, verb, rt, ns, name, sub, body, watch):
        """events.k8s.io/v1 events: the core events, converted both ways (ks_virtual)."""
        sim = self.server.sim
        core = sim.by_rkey[rt.alias]
        q = self.q
        dry = q.get("dryRun") == "All"
        out = lambda data: ks_virtual.core_to_events(loads(data) if isinstance(data, (bytes, str)) else data)
        if verb == "watch":
            lsel, fsel = self.selectors(rt)
            if name is not None:
                fsel = (fsel or []) + [("metadata.name", "=", name)]
            self.do_watch(core, ns, lsel, fsel, view=rt)
            return
        if verb == "get":
            o = out(sim.get(core, ns, name))
            if self.output_kind() == "table":
                self.send(200, make_table(rt, [o], {"resourceVersion": o["metadata"].get("resourceVersion")},
                                          q.get("includeObject", "Metadata")))
            else:
                self.send(200, o)
            return
        if verb == "list":
            meta, items = self.list_page(rt, core, ns)
            objs = [out(d) for d in items]
            if self.output_kind() == "table":
                self.send(200, make_table(rt, objs, meta, q.get("includeObject", "Metadata")))
                return
            for o in objs:
                o.pop("kind", None)
                o.pop("apiVersion", None)
            self.send(200, {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": objs})
            return
        if verb in ("create", "update"):
            obj = self.parse_body(body)
            if isinstance(obj, dict) and obj.get("apiVersion") not in (None, rt.api_version):
                raise bad_request("the API version in the data (%s) does not match the expected API version (%s)"
                                  % (obj.get("apiVersion"), rt.api_version))
            cobj = ks_virtual.events_to_core(obj)
            if verb == "create":
                code, res = sim.create(core, ns, cobj, dry)
            else:
                code, res = sim.update(core, ns, name, cobj, None, dry)
            self.send(code, out(res))
            return
        if verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            ptype = PATCH_TYPES.get(ctype)
            if ptype is None:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                               "accepted media types include: application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml, application/strategic-merge-patch+json")
            patch = self.parse_body(body, allow_yaml=(ptype == "apply"))
            code, res = sim.patch(core, ns, name, ptype, patch, None, dry,
                                  view=(lambda o: ks_virtual.core_to_events(o), ks_virtual.events_to_core))
            self.send(code, out(res))
            return
        if verb == "delete":
            opts = self.delete_opts(body)
            code, res = sim.delete(core, ns, name, opts, dry)
            if res.get("kind") == "Status" and isinstance(res.get("details"), dict):
                res["details"]["group"] = rt.group
                res["details"]["kind"] = rt.plural
                res["details"] = {k: res["details"][k] for k in ("name", "group", "kind", "uid") if k in res["details"]}
            self.send(code, res)
            return
        if verb == "deletecollection":
            lsel, fsel = self.selectors(rt)
            code, res = sim.delete_collection(core, ns, lsel, fsel, self.delete_opts(body), dry)
            res["apiVersion"], res["kind"] = rt.api_version, rt.list_kind
            res["items"] = [ks_virtual.core_to_events(o) for o in res["items"]]
            self.send(code, res)
            return
        raise method_not_allowed()

    def delete_opts(self, body):
        opts = {}
        if body.strip():
            try:
                opts = json.loads(body)
            except ValueError:
                raise bad_request("invalid DeleteOptions body")
            if not isinstance(opts, dict):
                raise bad_request("invalid DeleteOptions body")
        if self.q.get("propagationPolicy"):
            opts["propagationPolicy"] = self.q["propagationPolicy"]
        if self.q.get("gracePeriodSeconds"):
            try:
                opts["gracePeriodSeconds"] = int(self.q["gracePeriodSeconds"])
            except ValueError:
                raise bad_request("invalid gracePeriodSeconds")
        return opts

    # ------------------------------------------------------------ watch
    def do_watch(self, rt, ns, lsel, fsel, view=None):
        sim = self.server.sim
        q = self.q
        table = self.output_kind() == "table"
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        send_initial = q.get("sendInitialEvents") == "true"
        timeout = None
        if q.get("timeoutSeconds"):
            try:
                timeout = float(q["timeoutSeconds"])
            except ValueError:
                raise bad_request("invalid timeoutSeconds")
        w = sim.watch_start(rt, ns, lsel, fsel, q.get("resourceVersion"), send_initial)
        self.log_entry["watch"] = True
        self.log_entry["status"] = 200
        self.server.log.add(self.log_entry)
        first = [True]
        vrt = view or rt

        def enc(etype, data):
            if view is not None and etype in ("ADDED", "MODIFIED", "DELETED"):
                data = dumps(ks_virtual.core_to_events(loads(data)))
            if table and etype in ("ADDED", "MODIFIED", "DELETED"):
                o = loads(data)
                t = make_table(vrt, [o], {"resourceVersion": o["metadata"].get("resourceVersion")},
                               q.get("includeObject", "Metadata"), first[0])
                if not first[0]:
                    t["columnDefinitions"] = []
                first[0] = False
                data = dumps(t)
            return b'{"type":"' + etype.encode() + b'","object":' + data + b"}\n"

        def chunk(payload):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

        def bookmark(extra=None):
            md = {"resourceVersion": str(w.rv)}
            if extra:
                md["annotations"] = extra
            return enc("BOOKMARK", dumps({"kind": vrt.kind, "apiVersion": vrt.api_version, "metadata": md}))

        try:
            self.wfile.write(("HTTP/1.1 200 OK\r\nCache-Control: no-cache, private\r\nContent-Type: application/json\r\n"
                              "Date: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % self.date_time_string()).encode())
            self.status_code = 200
            if w.expired:
                chunk(enc("ERROR", dumps(ApiError(410, "Expired", w.expired).status())))
                return self._end_chunks()
            if w.initial:
                buf = [enc("ADDED", d) for d in w.initial]
                for i in range(0, len(buf), 200):
                    chunk(b"".join(buf[i:i + 200]))
            if send_initial and bookmarks:
                chunk(bookmark({"k8s.io/initial-events-end": "true"}))
            deadline = time.time() + timeout if timeout else None
            last_sent = time.time()
            interval = self.server.opts.bookmark_interval
            wf = self.watch_fault
            err_at = time.time() + float(wf.get("watchErrorAfter") or 0) if wf else None
            while True:
                now = time.time()
                if err_at is not None and now >= err_at:
                    chunk(enc("ERROR", dumps(self.watch_error_status(wf))))
                    break
                wait = 1.0 if deadline is None else min(1.0, deadline - now)
                if err_at is not None:
                    wait = min(wait, max(0.0, err_at - now))
                if wait <= 0 and (err_at is None or deadline is not None and deadline <= now):
                    break
                evs = sim.watch_wait(w, wait)
                if w.expired:
                    chunk(enc("ERROR", dumps(ApiError(410, "Expired", w.expired).status())))
                    break
                if evs:
                    chunk(b"".join(enc(t, d) for t, d in evs))
                    last_sent = time.time()
                elif bookmarks and time.time() - last_sent >= interval:
                    chunk(bookmark())
                    last_sent = time.time()
                if self.client_gone():
                    self.close_connection = True
                    return
            self._end_chunks()
        except (ConnectionError, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            sim.watch_end(w)

    def _end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")

    @staticmethod
    def watch_error_status(rule):
        """The Status of an injected watch ERROR event (a watchError fault rule)."""
        code = int(rule["watchError"])
        msg = rule.get("message") or {
            500: "Internal error occurred: etcdserver: request timed out",
            410: "too old resource version: 1 (2)",
            429: "Too many requests, please try again later.",
            503: "The server is currently unable to handle the request",
            504: "Timeout: Too large resource version"}.get(code, "injected watch error")
        return ApiError(code, rule.get("reason") or STATUS_REASONS.get(code, ""), msg).status()


# ---------------------------------------------------------------- startup
def atomic_write(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".kubesim-", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def load_seeds(sim, paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for f in sorted(os.listdir(p)):
                if f.endswith((".json", ".yaml", ".yml")):
                    files.append(os.path.join(p, f))
        else:
            files.append(p)
    objs = []
    for f in files:
        with open(f, "rb") as fh:
            raw = fh.read()
        if f.endswith(".json"):
            docs = [json.loads(raw)]
        else:
            if yaml is None:
                raise SystemExit("kubesim: %s: YAML seeds need PyYAML" % f)
            docs = [d for d in yaml.safe_load_all(raw) if d is not None]
        for d in docs:
            stack = d if isinstance(d, list) else [d]
            for o in stack:
                if isinstance(o, dict) and o.get("kind", "").endswith("List") and "items" in o:
                    objs.extend(o["items"])
                elif isinstance(o, dict):
                    objs.append(o)
    prio = lambda o: 0 if o.get("kind") in ("Namespace", "CustomResourceDefinition") else 1
    sim.local.manager = "kubectl-create"   # seeds are objects created as `kubectl create -f` would
    for o in sorted(objs, key=prio):
        rt = sim.by_gvk.get((o.get("apiVersion"), o.get("kind")))
        if rt is None:
            raise SystemExit("kubesim: seed: unknown apiVersion/kind %s/%s" % (o.get("apiVersion"), o.get("kind")))
        ns = (o.get("metadata") or {}).get("namespace") or "default"
        if rt.virtual:
            raise SystemExit("kubesim: seed: %s/%s cannot be created" % (o.get("apiVersion"), o.get("kind")))
        if rt.alias:
            rt, o = sim.by_rkey[rt.alias], ks_virtual.events_to_core(o)
        try:
            sim.create(rt, ns if rt.namespaced else None, o)
        except ApiError as e:
            if e.reason != "AlreadyExists":
                raise SystemExit("kubesim: seed: %s" % e.message)
    return len(objs)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kubernetes API server stand-in for tests")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ready-file")
    ap.add_argument("--kubeconfig-out")
    ap.add_argument("--ca-out", help="also write the CA certificate (PEM) here")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--token", action="append", default=[], help="NAME=TOKEN (repeatable)")
    ap.add_argument("--client-cert", action="append", default=[], metavar="NAME[=GROUP,...]",
                    help="issue a client certificate (CN=NAME, O=GROUP...) signed by kubesim's CA and put it in the "
                         "kubeconfig as k3s and kubeadm do; implies --tls (repeatable)")
    ap.add_argument("--exec-user", action="append", default=[], metavar="NAME[=TTL]",
                    help="a kubeconfig user whose credentials come from an exec plugin (exec_credential.py) with "
                         "tokens valid TTL seconds (default 3600) (repeatable)")
    ap.add_argument("--seed", action="append", default=[], help="directory or file of manifests")
    ap.add_argument("--history", type=int, default=10000, help="watch event history length")
    ap.add_argument("--continue-ttl", type=float, default=300.0,
                    help="seconds after which continue tokens expire and watch history is forgotten, as etcd "
                         "compaction (default 300, the kube-apiserver default; 0: never)")
    ap.add_argument("--bookmark-interval", type=float, default=5.0)
    ap.add_argument("--no-gzip", action="store_true")
    ap.add_argument("--exec-root", help="pods/exec runs commands in EXEC_ROOT/NS/POD/CONTAINER (default: a temp dir)")
    ap.add_argument("--exec-protocols", default="v5.channel.k8s.io,v4.channel.k8s.io",
                    help="pods/exec WebSocket subprotocols served")
    ap.add_argument("--controllers", default="all",
                    help="light controllers to run: all (default), none, or a list of %s" % ",".join(ks_controllers.ALL))
    ap.add_argument("--namespace-delete-seconds", type=float, default=2.0,
                    help="how long a deleted namespace stays Terminating before its content goes (default 2)")
    ap.add_argument("--pod-delete-seconds", type=float, default=2.0,
                    help="longest a gracefully deleted pod stays before the kubelet removes it (default 2)")
    ap.add_argument("--snapshot-crds", action="store_true",
                    help="install the external-snapshotter's CRDs at start (ks_snapshot.py)")
    ap.add_argument("--csi-root", help="the CSI driver's volumes and snapshots (default: a temp dir)")
    ap.add_argument("--snapshot-seconds", type=float, default=1.0,
                    help="how long a new snapshot takes to become ready (default 1)")
    opts = ap.parse_args(argv)
    try:
        enabled = ks_controllers.parse_list(opts.controllers)
    except ValueError as e:
        ap.error(str(e))

    tokens = []
    for t in opts.token:
        if "=" not in t:
            ap.error("--token wants NAME=TOKEN")
        n, v = t.split("=", 1)
        tokens.append((n, v))

    tmp = tempfile.mkdtemp(prefix="kubesim-")
    atexit.register(shutil.rmtree, tmp, True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *a: sys.exit(0))

    opts.exec_root = opts.exec_root or os.path.join(tmp, "exec")
    sim = Sim(history=opts.history, continue_ttl=opts.continue_ttl)
    ctl = ks_controllers.Controllers(sim, enabled, opts.namespace_delete_seconds, opts.pod_delete_seconds)
    sim.ctl = ctl if enabled else None
    if opts.seed:
        load_seeds(sim, opts.seed)
    ks_psa.install(sim)     # after the seeds: they are what existed before the labels
    ks_snapshot.install(sim, ctl, opts.csi_root or os.path.join(tmp, "csi"), opts.snapshot_seconds,
                        opts.snapshot_crds)
    ctl.start()

    clients = []
    for c in opts.client_cert:
        name, _, groups = c.partition("=")
        if not name:
            ap.error("--client-cert wants NAME[=GROUP,...]")
        clients.append((name, [g for g in groups.split(",") if g]))
    execs = []
    for e in opts.exec_user:
        name, _, ttl = e.partition("=")
        try:
            execs.append((name, float(ttl or 3600)))
        except ValueError:
            ap.error("--exec-user wants NAME[=SECONDS]")
    if clients:
        opts.tls = True
    ctx, ca_pem, client_pems = None, None, {}
    if opts.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if clients:
            crt, key, ca_crt, ca_pem, client_pems = ks_auth.gen_ca_and_certs(tmp, opts.host, clients)
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(ca_crt)
        else:
            crt, key = ks_auth.gen_self_signed(tmp, opts.host)
            with open(crt, "rb") as f:
                ca_pem = f.read()
        ctx.load_cert_chain(crt, key)
        ctx.set_alpn_protocols(["http/1.1"])

    srv = Server((opts.host, opts.port), sim, {v: n for n, v in tokens}, ctx, opts)
    srv.register_subresource("", "pods", "exec", "PodExecOptions", ["create", "get"],
                             lambda h, method, rt, ns, name, body: ks_exec.serve(h, rt, ns, name, method,
                                                                                 h.log_entry["query"]))
    srv.cert_auth = bool(clients)
    srv.auth_required = bool(tokens or clients or execs)
    port = srv.server_address[1]
    hostport = "%s:%d" % (opts.host if ":" not in opts.host else "[%s]" % opts.host, port)
    srv.hostport = hostport
    url = "%s://%s" % ("https" if opts.tls else "http", hostport)
    srv.base_url = url
    if opts.ca_out and ca_pem:
        atomic_write(opts.ca_out, ca_pem.decode())
    if opts.kubeconfig_out:
        users = ([(n, {"token": v}) for n, v in tokens] + [(n, {"cert": client_pems[n]}) for n, _ in clients] +
                 [(n, {"exec": ks_auth.exec_argv(url, n, ttl)}) for n, ttl in execs])
        atomic_write(opts.kubeconfig_out, ks_auth.kubeconfig(url, users, ca_pem))
    if opts.ready_file:
        atomic_write(opts.ready_file, url)
    print("kubesim listening on %s" % url, flush=True)
    try:
        srv.serve_forever(poll_interval=0.5)
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
