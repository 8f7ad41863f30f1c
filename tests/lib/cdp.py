"""cdp: drive Debian's headless Chromium over the DevTools protocol.

Standard library only: a minimal RFC 6455 WebSocket client (text frames,
client masking, fragmentation, ping/pong, close) and a CDP session on top.

    from cdp import Chromium
    with Chromium(workdir) as br:
        page = br.page()
        page.navigate("http://127.0.0.1:8080/status")
        page.evaluate("document.title")
        page.screenshot("/tmp/shot.png")

Chromium is started with --remote-debugging-port=0 and a fresh
--user-data-dir; the port is read from the DevToolsActivePort file it
writes there. Nothing leaves loopback: the flags turn off background
networking, component updates, sync and QUIC.
"""
import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.parse
import urllib.request

CHROMIUM = os.environ.get("CAIRN_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WS_MAX_MESSAGE = 64 << 20  # a full-page screenshot fits


class CDPError(Exception):
    pass


class WebSocket:
    """A blocking WebSocket client connection (ws:// on loopback only)."""

    def __init__(self, url, timeout=30.0):
        u = urllib.parse.urlparse(url)
        if u.scheme != "ws":
            raise CDPError("only ws:// URLs: %s" % url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n" % (path, u.hostname, u.port or 80, key))
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise CDPError("connection closed during WebSocket handshake")
            head += chunk
            if len(head) > 65536:
                raise CDPError("handshake answer too long")
        head, self._rest = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise CDPError("WebSocket handshake refused: %s" % lines[0])
        hdrs = {k.strip().lower(): v.strip() for k, v in
                (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
        want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            raise CDPError("bad Sec-WebSocket-Accept")

    def _read(self, n):
        out = self._rest[:n]
        self._rest = self._rest[n:]
        while len(out) < n:
            chunk = self.sock.recv(max(65536, n - len(out)))
            if not chunk:
                raise CDPError("WebSocket connection closed")
            out += chunk
        if len(out) > n:
            self._rest = out[n:] + self._rest
            out = out[:n]
        return out

    def _send_frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def recv(self, timeout=None):
        """The next whole text message, or raise socket.timeout."""
        self.sock.settimeout(timeout)
        parts = []
        size = 0
        while True:
            b0, b1 = self._read(2)
            fin, opcode = b0 & 0x80, b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            size += n
            if size > WS_MAX_MESSAGE:
                raise CDPError("WebSocket message over %d bytes" % WS_MAX_MESSAGE)
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x8:
                raise CDPError("WebSocket closed by peer")
            if opcode == 0x9:
                self._send_frame(0xA, data)
                continue
            if opcode == 0xA:
                continue
            parts.append(data)
            if fin:
                return b"".join(parts).decode("utf-8")

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class Page:
    """A CDP session attached to one page target."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []

    def call(self, method, params=None, timeout=30.0):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise CDPError("%s: no answer in %.0fs" % (method, timeout))
            msg = json.loads(self.ws.recv(timeout=left))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CDPError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expr, timeout=30.0):
        """Value of a JavaScript expression (JSON-able), promises awaited."""
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise CDPError("JS exception: %s" % json.dumps(r["exceptionDetails"])[:800])
        return r.get("result", {}).get("value")

    def wait_js(self, expr, timeout=15.0, what=None):
        """Poll a JS expression until it is truthy; return its value."""
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            last = self.evaluate(expr)
            if last:
                return last
            time.sleep(0.1)
        raise CDPError("timed out after %.0fs waiting for %s (last value %r)" % (
            timeout, what or expr, last))

    def navigate(self, url, timeout=30.0):
        self.call("Page.enable")
        r = self.call("Page.navigate", {"url": url}, timeout=timeout)
        if r.get("errorText"):
            raise CDPError("navigate %s: %s" % (url, r["errorText"]))
        self.wait_js("document.readyState === 'complete'", timeout, "page load")

    def viewport(self, width, height, scale=1, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile})

    def screenshot(self, path, full_page=True):
        """Save a PNG of the page (the whole scroll height when full_page)."""
        params = {"format": "png"}
        if full_page:
            m = self.call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m["contentSize"]
            vp = m.get("cssLayoutViewport") or m["layoutViewport"]
            params["captureBeyondViewport"] = True
            params["clip"] = {"x": 0, "y": 0, "width": vp["clientWidth"],
                              "height": max(size["height"], vp["clientHeight"]), "scale": 1}
        data = self.call("Page.captureScreenshot", params, timeout=60)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        self.ws.close()


class Chromium:
    """Headless Chromium in its own process group with a fresh profile."""

    def __init__(self, workdir, width=1280, height=900):
        self.dir = os.path.join(workdir, "chromium-profile")
        if os.path.exists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(self.dir)
        self.log = open(os.path.join(workdir, "chromium.log"), "ab")
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--disable-dev-shm-usage",
                "--password-store=basic", "--use-mock-keychain", "--hide-scrollbars",
                "--window-size=%d,%d" % (width, height),
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                "--user-data-dir=" + self.dir, "about:blank"]
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        port_file = os.path.join(self.dir, "DevToolsActivePort")
        end = time.monotonic() + 30
        while True:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    lines = f.read().split("\n")
                if len(lines) >= 2 and lines[0].strip().isdigit():
                    self.port = int(lines[0])
                    break
            if self.proc.poll() is not None:
                raise CDPError("chromium exited with %s (see %s)" % (self.proc.returncode, self.log.name))
            if time.monotonic() > end:
                self.close()
                raise CDPError("chromium did not write DevToolsActivePort in 30s")
            time.sleep(0.05)

    def page(self):
        """A session on the first page target (the about:blank tab)."""
        end = time.monotonic() + 15
        while True:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % self.port, timeout=10) as r:
                targets = json.loads(r.read())
            pages = [x for x in targets if x.get("type") == "page" and x.get("webSocketDebuggerUrl")]
            if pages:
                return Page(pages[0]["webSocketDebuggerUrl"])
            if time.monotonic() > end:
                raise CDPError("no page target")
            time.sleep(0.1)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, 9)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
