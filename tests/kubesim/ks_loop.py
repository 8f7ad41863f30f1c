"""The plain-HTTP connection loop of kubesim: one thread serves every request
that cannot block, a thread per connection takes over the rest.

kubesim is one Python process: its requests run one at a time under the
GIL whatever the number of threads. With a thread per connection, each
request of 8 busy keep-alive connections hands the GIL (and a futex wake, a
context switch) from thread to thread two or three times; that was about a
third of kubesim's CPU per create on a loaded 2-core machine. Here one
thread selects over the idle
connections, reads a request whole (non-blocking), runs it through the same
Handler (rfile and wfile are in-memory buffers) and writes the reply
without blocking (a slow reader keeps its remainder, and its later requests
wait, while the others go on).

A connection moves for good to a thread of its own, served exactly as
before (Handler.handle over the socket, the bytes already read first), as
soon as one of its requests may block or needs the socket: a watch, an
upgrade or a plugin subresource (pods/exec), any fault rule being set
(delays sleep), `Expect: 100-continue`, a chunked body, a body over the
3 MiB limit, a request head that does not end in CRLF CRLF within 64 KiB,
or a request line that is not HTTP/1.x. TLS connections always have a
thread (Server.finish_request)."""

import io
import selectors
import socket
import threading
import time

RECV = 256 * 1024
MAX_HEAD = 65536


class Prefixed(io.RawIOBase):
    """A socket's byte stream with bytes already read from it in front."""

    def __init__(self, data, sock):
        self.data = data
        self.raw = sock.makefile("rb", buffering=0)

    def readable(self):
        return True

    def readinto(self, b):
        if self.data:
            n = min(len(b), len(self.data))
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n
        return self.raw.readinto(b)

    def close(self):
        self.raw.close()
        super().close()


class Conn:
    __slots__ = ("sock", "addr", "handler", "inbuf", "out", "last", "closing")

    def __init__(self, sock, addr, handler):
        self.sock = sock
        self.addr = addr
        self.handler = handler
        self.inbuf = b""
        self.out = b""          # reply bytes the socket did not take yet
        self.last = time.monotonic()
        self.closing = False    # close once out is sent


def request_span(buf, max_body, connect_subs):
    """-> (n, handoff): n > 0 is the length of the complete first request
    in buf; n == 0 means more bytes are needed; handoff: serve the
    connection from a thread from this request on."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 0, len(buf) > MAX_HEAD or b"\n\n" in buf
    head = buf[:end].lower()
    eol = head.find(b"\r\n")
    line = head if eol < 0 else head[:eol]
    words = line.split()
    if len(words) != 3 or words[2] not in (b"http/1.1", b"http/1.0"):
        return 0, True
    path, _, query = words[1].partition(b"?")
    if b"/watch/" in path or b"watch=" in query or path.endswith(connect_subs):
        return 0, True
    if b"\r\ntransfer-encoding:" in head or b"\r\nexpect:" in head or b"\r\nupgrade:" in head:
        return 0, True
    clen = 0
    i = head.find(b"\r\ncontent-length:")
    if i >= 0:
        j = head.find(b"\r\n", i + 17)
        try:
            clen = int(head[i + 17:j if j >= 0 else len(head)])
        except ValueError:
            return 0, True
        if clen < 0 or clen > max_body:
            return 0, True
    n = end + 4 + clen
    return (n if len(buf) >= n else 0), False


class Loop:
    def __init__(self, server, handler_class, max_body):
        self.server = server
        self.handler_class = handler_class
        self.max_body = max_body
        self.sel = selectors.DefaultSelector()
        self.conns = {}
        # one receive buffer: recv(256 KiB) would map and unmap a fresh one each time
        self.rbuf = bytearray(RECV)
        self.rview = memoryview(self.rbuf)

    def run(self, poll_interval=0.5):
        srv = self.server
        lsock = srv.socket
        lsock.setblocking(False)
        self.sel.register(lsock, selectors.EVENT_READ, None)
        sweep = time.monotonic()
        try:
            while True:
                for key, ev in self.sel.select(poll_interval):
                    c = key.data
                    if c is None:
                        self.accept(lsock)
                        continue
                    try:
                        if ev & selectors.EVENT_WRITE:
                            self.flush(c)
                            self.serve(c)
                        if ev & selectors.EVENT_READ:
                            self.read(c)
                    except OSError:
                        self.close(c)
                now = time.monotonic()
                if now - sweep > 5:
                    sweep = now
                    idle = self.handler_class.idle_timeout
                    for c in [c for c in self.conns.values() if now - c.last > idle]:
                        self.close(c)
        finally:
            for c in list(self.conns.values()):
                self.close(c)
            self.sel.close()

    def accept(self, lsock):
        srv = self.server
        while True:
            try:
                sock, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            h = self.handler_class.__new__(self.handler_class)
            h.request = h.connection = sock
            h.client_address = addr
            h.server = srv
            h.conn_id = next(srv.conn_ids)
            h.close_connection = False
            c = Conn(sock, addr, h)
            self.conns[sock] = c
            self.sel.register(sock, selectors.EVENT_READ, c)

    def close(self, c):
        if self.conns.pop(c.sock, None) is None:
            return
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        try:
            c.sock.close()
        except OSError:
            pass

    def read(self, c):
        try:
            n = c.sock.recv_into(self.rbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close(c)
            return
        if not n:
            self.close(c)
            return
        c.last = time.monotonic()
        c.inbuf += self.rview[:n]
        self.serve(c)

    def serve(self, c):
        """Answer the complete requests in c.inbuf, one reply at a time."""
        srv = self.server
        subs = tuple(b"/" + sub.encode() for (_, _, sub) in srv.connect)
        while c.sock in self.conns and not c.out and not c.closing and c.inbuf:
            n, handoff = request_span(c.inbuf, self.max_body, subs)
            if handoff or (n and srv.faults.rules):
                self.handoff(c)
                return
            if not n:
                return
            req, c.inbuf = c.inbuf[:n], c.inbuf[n:]
            h = c.handler
            h.rfile = io.BytesIO(req)
            h.wfile = out = io.BytesIO()
            try:
                h.handle_one_request()
            except Exception:  # noqa: BLE001 - as socketserver's handle_error
                srv.handle_error(c.sock, c.addr)
                h.close_connection = True
            c.out = out.getvalue()
            c.closing = h.close_connection
            self.flush(c)

    def flush(self, c):
        """Send what c.out holds that the socket takes; wait for writability
        for the rest, or close once all is sent when the reply said so."""
        if c.sock not in self.conns:
            return
        if c.out:
            try:
                sent = c.sock.send(c.out)
            except (BlockingIOError, InterruptedError):
                sent = 0
            c.out = c.out[sent:]
            c.last = time.monotonic()
        if c.out:
            self.sel.modify(c.sock, selectors.EVENT_WRITE, c)
            return
        if c.closing:
            self.close(c)
        elif self.sel.get_key(c.sock).events != selectors.EVENT_READ:
            self.sel.modify(c.sock, selectors.EVENT_READ, c)

    def handoff(self, c):
        """c is served by a thread of its own from now on."""
        self.conns.pop(c.sock, None)
        self.sel.unregister(c.sock)
        c.sock.setblocking(True)
        srv = self.server
        srv.adopted[c.sock] = (c.handler.conn_id, c.inbuf)
        t = threading.Thread(target=srv.process_request_thread, args=(c.sock, c.addr), daemon=True)
        t.start()
