"""The kube client's stream handling against a scripted HTTP server.

kubesim answers whole pages and whole watch lines; these cases need replies
cut where a real network cuts them: a watch whose events arrive in chunks of
1 to 7 bytes (inside strings and escapes), a list page whose connection
breaks after some items (the page is fetched again and the items already
delivered are not delivered twice), and list items without apiVersion/kind.
Gzip bodies (cairn inflates them itself, with ISA-L): a page in two gzip
members sent in tiny chunks, a corrupt body (a clear error, no retry loop)
and a body that ends before its gzip stream does (fetched again).
The server is a small stdlib HTTP/1.1 server in this file (plain HTTP on
127.0.0.1; the client config comes from a kubeconfig without a token).
"""
import gzip
import json
import os
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cairntest import BUILDDIR, case, main

TOOL = os.path.join(BUILDDIR, "tests/helpers/kube_tool")


class Script:
    """What the server answers; handlers look at the request count."""

    def __init__(self):
        self.requests = []
        self.encodings = []     # each request's Accept-Encoding
        self.lock = threading.Lock()


def serve(script, handler_fn):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            with script.lock:
                script.requests.append(self.path)
                script.encodings.append(self.headers.get("Accept-Encoding"))
                n = len(script.requests)
            handler_fn(self, n)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def chunk(h, data):
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def start_chunked(h):
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.wfile.flush()


def kubeconfig(t, port):
    path = t.path("kubeconfig")
    with open(path, "w") as f:
        json.dump({"current-context": "c",
                   "contexts": [{"name": "c", "context": {"cluster": "s"}}],
                   "clusters": [{"name": "s", "cluster": {"server": "http://127.0.0.1:%d" % port}}]},
                  f)
    return path


def tool(kc, *args, timeout=60):
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    return subprocess.run([TOOL, "--kubeconfig", kc] + list(args), capture_output=True,
                          text=True, timeout=timeout, env=env)


def list_names(t, handler, timeout=60):
    """kube_tool's list of ns's ConfigMaps from a server answering with
    handler; -> (script, result, the ConfigMap lines)."""
    s = Script()
    srv = serve(s, handler)
    t.on_cleanup(srv.shutdown)
    r = tool(kubeconfig(t, srv.server_address[1]), "list", "core", "v1", "configmaps", "ns",
             "names", timeout=timeout)
    return s, r, [ln for ln in r.stdout.splitlines() if ln.startswith("ConfigMap ")]


@case
def watch_events_split_into_tiny_chunks(t):
    events = [
        {"type": "ADDED", "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
            "name": "a", "namespace": "ns", "resourceVersion": "11"},
            "data": {"q": "}{\"][\\", "u": "\u00e9\u4e2d"}}},
        {"type": "MODIFIED", "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
            "name": "b", "namespace": "ns", "resourceVersion": "12"}, "data": {"x": "y" * 3000}}},
        {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": "15"}}},
        {"type": "DELETED", "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
            "name": "a", "namespace": "ns", "resourceVersion": "16"}}},
    ]
    # ensure_ascii keeps \\u escapes in the text so chunks split them too.
    body = b"".join(json.dumps(e, ensure_ascii=True).encode() + b"\n" for e in events)

    def handler(h, n):
        start_chunked(h)
        i, step = 0, 1
        while i < len(body):
            chunk(h, body[i:i + step])
            i += step
            step = step % 7 + 1
            if i < 400:
                time.sleep(0.001)   # separate reads for the first events
        chunk(h, b"")

    s = Script()
    srv = serve(s, handler)
    t.on_cleanup(srv.shutdown)
    kc = kubeconfig(t, srv.server_address[1])
    r = tool(kc, "watch", "core", "v1", "configmaps", "ns", "rv=10", "bookmarks")
    t.eq(r.returncode, 0, "watch exit: " + r.stdout + r.stderr)
    lines = [ln for ln in r.stdout.splitlines() if ln.split(" ")[0] in
             ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")]
    t.eq(lines, ["ADDED ns/a 11", "MODIFIED ns/b 12", "BOOKMARK / 15", "DELETED ns/a 16"],
         "events")
    t.check("END rv=16" in r.stdout, r.stdout)
    t.check("resourceVersion=10" in s.requests[0] and "allowWatchBookmarks=true" in s.requests[0],
            s.requests[0])


@case
def list_page_broken_midway_is_not_delivered_twice(t):
    items = [{"metadata": {"name": "i%d" % i, "namespace": "ns"}} for i in range(6)]
    env_head = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":['
    page = env_head + b",".join(json.dumps(i).encode() for i in items) + b"]}"
    cut = page.index(b'{"metadata": {"name": "i3"')

    def handler(h, n):
        start_chunked(h)
        if n == 1:
            # Three whole items and half of the fourth, then the connection dies.
            chunk(h, page[:cut + 10])
            time.sleep(0.05)
            h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
            return
        chunk(h, page)
        chunk(h, b"")

    s, r, names = list_names(t, handler)
    t.eq(r.returncode, 0, "list exit: " + r.stdout + r.stderr)
    # Items had no apiVersion/kind: filled from the envelope.
    t.eq(names, ["ConfigMap ns/i%d v1" % i for i in range(6)], "each item once, in order")
    t.check("items=6 pages=1 rv=42" in r.stdout, r.stdout)
    t.eq(len(s.requests), 2, "page requests")


def gzip_page(n):
    """A list page of n ConfigMaps (with some bulk) and its JSON text."""
    items = [{"metadata": {"name": "g%03d" % i, "namespace": "ns"},
              "data": {"k": ("v%d\\\"" % i) * 50}} for i in range(n)]
    return json.dumps({"kind": "ConfigMapList", "apiVersion": "v1",
                       "metadata": {"resourceVersion": "77"}, "items": items}).encode()


def send_gzip(h, body):
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)
    h.wfile.flush()


@case
def gzip_page_in_two_members_and_tiny_chunks(t):
    page = gzip_page(40)
    half = len(page) // 2
    body = gzip.compress(page[:half], mtime=0) + gzip.compress(page[half:], mtime=0)

    def handler_gz(h, n):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        i, step = 0, 1
        while i < len(body):
            chunk(h, body[i:i + step])
            i += step
            step = step % 13 + 1
        chunk(h, b"")

    s, r, names = list_names(t, handler_gz)
    t.eq(r.returncode, 0, "list exit: " + r.stdout + r.stderr)
    t.eq(names, ["ConfigMap ns/g%03d v1" % i for i in range(40)], "every item, in order")
    t.check("items=40 pages=1 rv=77" in r.stdout, r.stdout)
    t.eq(s.encodings[0], "gzip", "gzip asked for")


@case
def corrupt_gzip_page_fails_clearly(t):
    body = bytearray(gzip.compress(gzip_page(40), mtime=0))
    for i in range(len(body) // 2, len(body) // 2 + 64):
        body[i] ^= 0x5a

    s, r, _ = list_names(t, lambda h, n: send_gzip(h, bytes(body)), timeout=30)
    t.check(r.returncode != 0, "a corrupt body fails the list: " + r.stdout)
    t.check("gzip body is corrupt" in r.stdout + r.stderr, r.stdout + r.stderr)
    t.eq(len(s.requests), 1, "not retried (the server's bytes are wrong)")


@case
def gzip_page_cut_short_is_fetched_again(t):
    body = gzip.compress(gzip_page(40), mtime=0)

    def handler(h, n):
        # first: a whole HTTP reply whose gzip stream stops halfway
        send_gzip(h, body if n > 1 else body[:len(body) // 2])

    s, r, names = list_names(t, handler)
    t.eq(r.returncode, 0, "list exit: " + r.stdout + r.stderr)
    t.eq(names, ["ConfigMap ns/g%03d v1" % i for i in range(40)], "each item once, in order")
    t.eq(len(s.requests), 2, "page requests")


main()
