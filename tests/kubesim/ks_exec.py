"""pods/exec for kubesim: the WebSocket remote-command protocol, server side.

An independent implementation (RFC 6455 framing by hand, Python standard
library only) of what a client sees when it execs through kube-apiserver:

- `GET /api/v1/namespaces/NS/pods/NAME/exec?command=..&command=..&container=C
  &stdin=..&stdout=..&stderr=..&tty=..` with `Upgrade: websocket`. The
  subprotocols are `v5.channel.k8s.io` (what kube-apiserver's stream
  translator speaks since 1.30, and all kubectl 1.32 offers) and
  `v4.channel.k8s.io` (what kubelet's own WebSocket server speaks, reached
  when a client does not offer v5); the first the client lists that is
  supported wins, as golang.org/x/net/websocket picks.
- The checks of the pod registry's ExecLocation, with its messages: pod not
  found (404), at least one command (422), at least one of stdin, stdout,
  stderr (400), the container to use (the only one, else a
  container name must be given), a container of the pod, a node assigned.
  Those come as plain HTTP errors before any upgrade.
- Binary messages whose first byte is the channel: 0 stdin, 1 stdout,
  2 stderr, 3 the error channel (a metav1.Status as JSON), 4 resize
  (read and ignored). After the upgrade the server writes one empty message
  on the lowest writable channel (stdout, else stderr, else error), as the
  apiserver does; v5 clients close stdin with the message [255, 0].
- The end: the Status on channel 3 (`{"metadata":{},"status":"Success"}`,
  or Failure with reason NonZeroExitCode and a cause ExitCode carrying the
  code, or InternalError), then a close frame (1000); the server waits a
  little for the client's close and shuts the connection.

What runs: the command as a local process (no shell added), in a directory
per container, `<exec-root>/<namespace>/<pod>/<container>` (created on
demand), with HOSTNAME=<pod> and KUBESIM_NAMESPACE, KUBESIM_POD,
KUBESIM_CONTAINER in its environment, so tests can see markers, order,
output and exit codes. The container must be running, as kubelet finds
only running containers: `status.containerStatuses[name].state.running`,
or `status.phase == Running` when the pod has no container statuses;
otherwise the session ends with kubelet's "container not found" as an
InternalError Status (as the apiserver's translator reports a failed
upgrade to kubelet). A command that cannot be started ends likewise.

Approximations: no TTY (tty=true merges stderr into stdout, resize is
ignored); when the client goes away the process group is killed (a real
container keeps the process running); no v1-v3 or base64 subprotocols; no
SPDY (a request without a WebSocket upgrade gets 400 "Upgrade request
required", as the apiserver answers a non-upgrade connect).
"""

import base64
import hashlib
import json
import os
import select
import signal
import ssl
import struct
import subprocess
import time
from urllib.parse import parse_qs

from ks_core import ApiError

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
CH_STDIN, CH_STDOUT, CH_STDERR, CH_ERROR, CH_RESIZE, CH_CLOSE = 0, 1, 2, 3, 4, 255
MAX_FRAME = 16 << 20        # a client frame larger than this ends the session
CLOSE_WAIT = 5.0            # seconds to wait for the client's close frame


def _bool(q, key):
    v = (q.get(key) or [""])[-1]
    return v.lower() in ("true", "1", "t", "yes", "y")


def _containers(pod):
    return [c.get("name", "") for c in ((pod.get("spec") or {}).get("containers") or [])]


def _running(pod, container):
    st = pod.get("status") or {}
    cs = st.get("containerStatuses")
    if cs:
        for c in cs:
            if c.get("name") == container:
                return "running" in (c.get("state") or {})
        return False
    return st.get("phase") == "Running"


def check(sim, rt, ns, name, q):
    """ExecLocation's checks; returns (pod, container) or raises ApiError."""
    pod = json.loads(sim.get(rt, ns, name))
    cmd = q.get("command") or []
    if not cmd:
        raise ApiError(422, "Invalid", 'PodExecOptions "" is invalid: command: Required value: '
                       'you must specify at least one command for the container',
                       {"kind": "PodExecOptions", "causes": [{"reason": "FieldValueRequired",
                        "message": "Required value: you must specify at least one command for the container",
                        "field": "command"}]})
    if not (_bool(q, "stdin") or _bool(q, "stdout") or _bool(q, "stderr")):
        raise ApiError(400, "BadRequest", "you must specify at least 1 of stdin, stdout, stderr")
    names = _containers(pod)
    container = (q.get("container") or [""])[-1]
    if not container:
        if len(names) == 1:
            container = names[0]
        else:
            raise ApiError(400, "BadRequest", "a container name must be specified for pod %s, "
                           "choose one of: [%s]" % (name, " ".join(names)))
    elif container not in names:
        init = [c.get("name") for c in ((pod.get("spec") or {}).get("initContainers") or [])]
        if container not in init:
            raise ApiError(400, "BadRequest", "container %s is not valid for pod %s" % (container, name))
    if not (pod.get("spec") or {}).get("nodeName"):
        raise ApiError(400, "BadRequest", "pod %s does not have a host assigned" % name)
    return pod, container


class Session:
    """One upgraded connection: frames in and out, the process in between."""

    def __init__(self, handler, proto):
        self.h = handler
        self.sock = handler.connection
        self.proto = proto
        self.inbuf = b""
        self.closed_by_client = False

    # -------------------------------------------------------- framing
    def send_frame(self, opcode, payload=b""):
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        self.sock.sendall(head + payload)

    def send(self, channel, data=b""):
        self.send_frame(0x2, bytes([channel]) + data)

    def _recv(self):
        try:
            b = self.sock.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            return True
        if not b:
            return False
        self.inbuf += b
        return True

    def frames(self):
        """Complete frames in inbuf as (fin, opcode, payload); raises ValueError on a protocol error."""
        out = []
        while True:
            buf = self.inbuf
            if len(buf) < 2:
                return out
            b0, b1 = buf[0], buf[1]
            n, off = b1 & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    return out
                n, off = struct.unpack("!H", buf[2:4])[0], 4
            elif n == 127:
                if len(buf) < 10:
                    return out
                n, off = struct.unpack("!Q", buf[2:10])[0], 10
            if n > MAX_FRAME:
                raise ValueError("frame too large")
            if not b1 & 0x80:
                raise ValueError("client frame not masked")
            if len(buf) < off + 4 + n:
                return out
            mask = buf[off:off + 4]
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(buf[off + 4:off + 4 + n]))
            self.inbuf = buf[off + 4 + n:]
            out.append((bool(b0 & 0x80), b0 & 0x0F, data))

    # -------------------------------------------------------- the session
    def run(self, argv, cwd, env, want, tty):
        """Run argv; returns the Status object to send on the error channel."""
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True,
                                    stdin=subprocess.PIPE if want["stdin"] else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if want["stdout"] else subprocess.DEVNULL,
                                    stderr=(subprocess.STDOUT if tty else subprocess.PIPE)
                                    if want["stderr"] else subprocess.DEVNULL)
        except OSError as e:
            msg = ('failed to exec in container: failed to start exec: OCI runtime exec failed: exec failed: '
                   'unable to start container process: exec: "%s": %s: unknown' % (argv[0], e.strerror))
            return internal_error("error executing command in container: " + msg)
        outs = {}
        if proc.stdout is not None:
            outs[proc.stdout.fileno()] = CH_STDOUT
        if proc.stderr is not None:
            outs[proc.stderr.fileno()] = CH_STDERR
        stdin = proc.stdin
        frag = b""
        try:
            while outs or proc.poll() is None:
                pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0
                r, _, _ = select.select([self.sock] + list(outs), [], [], 0 if pending else 0.5)
                if pending and self.sock not in r:
                    r.append(self.sock)
                for fd in list(r):
                    if fd is self.sock:
                        if not self._recv():
                            raise ConnectionError("client went away")
                        for fin, op, data in self.frames():
                            if op == 0x8:
                                self.closed_by_client = True
                                raise ConnectionError("client closed")
                            if op == 0x9:
                                self.send_frame(0xA, data)
                                continue
                            if op == 0xA:
                                continue
                            frag += data
                            if not fin:
                                continue
                            msg, frag = frag, b""
                            if not msg:
                                continue
                            ch, data = msg[0], msg[1:]
                            if ch == CH_STDIN and stdin is not None:
                                try:
                                    stdin.write(data)
                                    stdin.flush()
                                except OSError:
                                    pass
                            elif ch == CH_CLOSE and self.proto.startswith("v5.") and data[:1] == b"\0":
                                if stdin is not None:
                                    stdin.close()
                                    stdin = None
                    else:
                        chunk = os.read(fd, 65536)
                        if chunk:
                            self.send(outs[fd], chunk)
                        else:
                            del outs[fd]
            code = proc.wait()
        except (ConnectionError, OSError, ValueError):
            kill(proc)
            raise
        finally:
            for f in (proc.stdin, proc.stdout, proc.stderr):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass
        if code == 0:
            return {"metadata": {}, "status": "Success"}
        if code < 0:
            code = 128 - code
        return {"metadata": {}, "status": "Failure",
                "message": "command terminated with non-zero exit code: error executing command %s, "
                           "exit code %d" % (fmt_argv(argv), code),
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}

    def finish(self, status):
        """Status on the error channel, close frame, wait for the client's close."""
        try:
            self.send(CH_ERROR, json.dumps(status, separators=(",", ":")).encode())
            self.send_frame(0x8, struct.pack("!H", 1000))
            deadline = time.time() + CLOSE_WAIT
            while not self.closed_by_client and time.time() < deadline:
                r, _, _ = select.select([self.sock], [], [], max(0.0, deadline - time.time()))
                if not r or not self._recv():
                    break
                for _, op, _ in self.frames():
                    if op == 0x8:
                        self.closed_by_client = True
        except (OSError, ValueError):
            pass


def fmt_argv(argv):
    return "[" + " ".join(argv) + "]"


def internal_error(msg):
    return {"metadata": {}, "status": "Failure", "message": "Internal error occurred: " + msg,
            "reason": "InternalError", "details": {"causes": [{"message": msg}]}, "code": 500}


def kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def serve(handler, rt, ns, name, method, query):
    """Handle .../pods/NAME/exec on a kubesim Handler (called from route())."""
    srv = handler.server
    q = parse_qs(query, keep_blank_values=True) if query else {}
    user = getattr(srv.authz.local, "user", None)
    if user is not None:
        # AuthorizePodWebsocketUpgradeCreatePermission (on since 1.31): an
        # upgrade GET on pods/exec needs create as well as get.
        srv.authz.authorize(user, "POST", handler.log_entry["path"], handler.q)
    pod, container = check(srv.sim, rt, ns, name, q)
    hdr = handler.headers
    upgrade = (hdr.get("Upgrade") or "").lower() == "websocket" and \
        "upgrade" in [x.strip().lower() for x in (hdr.get("Connection") or "").split(",")]
    if not upgrade or method != "GET":
        raise ApiError(400, "BadRequest", "Upgrade request required")
    offered = [p.strip() for p in (hdr.get("Sec-WebSocket-Protocol") or "").split(",") if p.strip()]
    served = [p for p in srv.opts.exec_protocols.split(",") if p in PROTOCOLS]
    proto = next((p for p in offered if p in served), None)
    key = hdr.get("Sec-WebSocket-Key") or ""
    if proto is None or hdr.get("Sec-WebSocket-Version") != "13" or len(base64.b64decode(key + "==")) < 16:
        raise ApiError(400, "BadRequest", "websocket: unsupported subprotocols %s; supports [%s]"
                       % (offered, " ".join(served)))
    accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    handler.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n"
                         % (accept, proto)).encode())
    handler.wfile.flush()
    handler.status_code = 101
    handler.close_connection = True
    want = {k: _bool(q, k) for k in ("stdin", "stdout", "stderr")}
    tty = _bool(q, "tty")
    s = Session(handler, proto)
    cwd = os.path.join(srv.opts.exec_root, ns, name, container)
    os.makedirs(cwd, exist_ok=True)
    env = dict(os.environ, HOSTNAME=name, KUBESIM_NAMESPACE=ns, KUBESIM_POD=name,
               KUBESIM_CONTAINER=container)
    try:
        s.send(CH_STDOUT if want["stdout"] else CH_STDERR if want["stderr"] else CH_ERROR)
        # The pod as it is now: a container that stopped meanwhile is gone.
        pod = json.loads(srv.sim.get(rt, ns, name))
        if not _running(pod, container):
            status = internal_error('unable to upgrade connection: container not found ("%s")' % container)
        else:
            status = s.run(q["command"], cwd, env, want, tty)
        s.finish(status)
    except (ConnectionError, OSError, ValueError):
        pass
