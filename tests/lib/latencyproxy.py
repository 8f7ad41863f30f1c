"""latencyproxy.py: a TCP proxy that adds network latency, to show how a
client behaves against a remote API server (benchmarks).

Every byte is forwarded after delay_ms / 2 in each direction, so one
request and its reply on a kept-alive connection take delay_ms more (one
round trip), a new connection's TCP and TLS handshakes their round trips
too (TLS passes through untouched). Order is kept; bandwidth is not
limited. It runs as its own process (asyncio), so it does not compete
with the benchmark's Python for the GIL.

    from latencyproxy import LatencyProxy
    p = LatencyProxy(t, upstream_port, delay_ms=5)   # killed with the case
    p.port, p.kubeconfig(sim.kubeconfig)              # a kubeconfig through it

or from a shell: python3 latencyproxy.py --upstream 127.0.0.1:PORT
--delay-ms 5 [--port-file F] (prints the port it listens on).
"""
import argparse
import asyncio
import os
import re
import sys
import time

CHUNK = 256 << 10


async def pump(reader, writer, delay):
    """Copy reader to writer, each chunk no sooner than delay after it came."""
    q = asyncio.Queue(maxsize=64)  # 16 MiB in flight per direction at most

    async def read():
        try:
            while True:
                data = await reader.read(CHUNK)
                await q.put((time.monotonic() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await q.put((0, b""))

    task = asyncio.ensure_future(read())
    try:
        while True:
            due, data = await q.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        task.cancel()
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass


async def serve(upstream, delay_ms, port_file, port=0):
    uh, up = upstream.rsplit(":", 1)
    one_way = delay_ms / 2000.0

    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection(uh, int(up))
        except OSError:
            cw.close()
            return
        if one_way > 0:
            await asyncio.sleep(one_way * 2)  # the TCP handshake's round trip
        await asyncio.gather(pump(cr, sw, one_way), pump(sr, cw, one_way))
        cw.close()
        sw.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    p = srv.sockets[0].getsockname()[1]
    if port_file:
        with open(port_file + ".tmp", "w") as f:
            f.write(str(p))
        os.rename(port_file + ".tmp", port_file)
    print(p, flush=True)
    async with srv:
        await srv.serve_forever()


class LatencyProxy:
    """The proxy as a process of case t, between 127.0.0.1:port and
    127.0.0.1:upstream_port."""

    def __init__(self, t, upstream_port, delay_ms, name=None):
        self.delay_ms = delay_ms
        pf = t.path("latencyproxy-%s.port" % (name or "%d-%d" % (upstream_port, delay_ms)))
        self.proc = t.spawn([sys.executable, os.path.abspath(__file__), "--upstream",
                             "127.0.0.1:%d" % upstream_port, "--delay-ms", str(delay_ms),
                             "--port-file", pf], name=name or "latencyproxy")
        end = time.monotonic() + 20
        while not os.path.exists(pf):
            if time.monotonic() > end:
                raise RuntimeError("latency proxy did not start")
            time.sleep(0.02)
        with open(pf) as f:
            self.port = int(f.read())

    def kubeconfig(self, kubeconfig, out=None):
        """A copy of kubeconfig whose server is this proxy; its path."""
        with open(kubeconfig) as f:
            text = f.read()
        text = re.sub(r"(server:\s*https?://)[^/\s:]+:\d+", r"\g<1>127.0.0.1:%d" % self.port, text)
        out = out or kubeconfig + ".latency-%d" % self.port
        with open(out, "w") as f:
            f.write(text)
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="HOST:PORT")
    ap.add_argument("--delay-ms", type=float, default=5.0, help="added per round trip")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    a = ap.parse_args()
    try:
        asyncio.run(serve(a.upstream, a.delay_ms, a.port_file, a.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
