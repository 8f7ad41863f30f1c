"""Near-free HTTP/1.1 clients for benchmarks that measure the server, not
the client: pre-encoded requests over a raw keep-alive socket
(bench_restore's ceiling, bench_kubesim_requests)."""
import socket


def read_reply(f):
    """One reply from f (a socket's makefile("rb")) -> (status line, body)."""
    status = f.readline()
    n = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        if h[:15].lower() == b"content-length:":
            n = int(h[15:])
    return status, f.read(n)


def send_all(args):
    """args = (host, port, requests, ok): send each pre-encoded request on one
    keep-alive connection and read its reply; -> how many replies' status
    did not start with ok (b"201", b"2", ...). One argument, for Pool.map."""
    host, port, reqs, ok = args
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    bad = 0
    for r in reqs:
        s.sendall(r)
        status, _ = read_reply(f)
        if not status[9:].startswith(ok):
            bad += 1
    s.close()
    return bad
