"""pods/exec: kubesim's WebSocket server side, the real kubectl against it,
and cairn's client (kube/exec.c through tests/helpers/exec_tool).

kubectl 1.32 execs over WebSocket (v5.channel.k8s.io) by default; kubesim
runs the command as a local process in EXEC_ROOT/NS/POD/CONTAINER. cairn's
client offers v5 then v4, captures stdout/stderr (capped), takes the exit
code from the Status on the error channel, and authenticates and verifies
TLS as the rest of the kube client does.
"""
import base64
import hashlib
import json
import os
import socket
import ssl
import subprocess
import threading
import time

from cairntest import BUILDDIR, case, main, wait_for

TOOL = os.path.join(BUILDDIR, "tests", "helpers", "exec_tool")
PODS = "/api/v1/namespaces/default/pods"


def start(t, extra=(), **kw):
    root = t.mkdir("exec-root")
    ks = t.kubesim(extra=["--exec-root", root] + list(extra), **kw)
    ks.exec_root = root
    return ks


def pod(ks, name, containers=("main",), running=True, node="node-1", statuses=None):
    spec = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    ks.ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    st = {"phase": "Running" if running else "Pending"}
    if statuses is not None:
        st["containerStatuses"] = statuses
    ks.patch(PODS + "/" + name + "/status", {"status": st})


def tool(ks, *args, kubeconfig=None, timeout=60):
    r = subprocess.run([TOOL, "--kubeconfig", kubeconfig or ks.kubeconfig] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError("exec_tool: %s" % r.stderr)
    return json.loads(r.stdout)


@case
def kubectl_exec_returns_output_and_exit_code(t):
    ks = start(t)
    pod(ks, "db")
    r = ks.kubectl("exec", "db", "--", "sh", "-c", "echo out-$HOSTNAME; echo err >&2; pwd; exit 3", check=False)
    t.eq(r.returncode, 3, "kubectl exit code")
    t.eq(r.stdout, "out-db\n%s\n" % os.path.join(ks.exec_root, "default", "db", "main"), "stdout")
    t.check("err\n" in r.stderr, "stderr: %r" % r.stderr)
    r = ks.kubectl("exec", "db", "--", "true")
    t.eq(r.returncode, 0, "exit 0")
    r = ks.kubectl("exec", "-i", "db", "--", "sh", "-c", "cat > got; wc -c < got", input="hello\n")
    t.eq(r.stdout.strip(), "6", "stdin reached the command and was closed")
    req = [e for e in ks.requests() if e["path"].endswith("/exec")]
    t.check(req and all(e["method"] == "GET" and e["status"] == 101 for e in req),
            "kubectl used the WebSocket upgrade: %r" % req)
    # a container that is not running: kubelet's "container not found"
    pod(ks, "idle", running=False)
    r = ks.kubectl("exec", "idle", "--", "true", check=False)
    t.check(r.returncode != 0 and 'container not found ("main")' in r.stderr, r.stderr)


@case
def kubesim_exec_checks_like_the_apiserver(t):
    ks = start(t)
    pod(ks, "two", containers=("a", "b"))
    pod(ks, "nonode", node=None)
    st, body, _ = ks.get(PODS + "/two/exec?command=true&stdout=true")
    t.eq(st, 400, "no container for a two-container pod")
    t.eq(body["message"], "a container name must be specified for pod two, choose one of: [a b]", "message")
    st, body, _ = ks.get(PODS + "/two/exec?command=true&stdout=true&container=c")
    t.eq((st, body["message"]), (400, "container c is not valid for pod two"), "unknown container")
    st, body, _ = ks.get(PODS + "/two/exec?stdout=true&container=a")
    t.eq((st, body["reason"]), (422, "Invalid"), "no command")
    st, body, _ = ks.get(PODS + "/two/exec?command=true&container=a")
    t.eq(st, 400, "no stream")
    st, body, _ = ks.get(PODS + "/nonode/exec?command=true&stdout=true")
    t.eq((st, body["message"]), (400, "pod nonode does not have a host assigned"), "no node")
    st, body, _ = ks.get(PODS + "/missing/exec?command=true&stdout=true")
    t.eq(st, 404, "missing pod")
    st, body, _ = ks.get(PODS + "/two/exec?command=true&stdout=true&container=a")
    t.eq((st, body["message"]), (400, "Upgrade request required"), "no upgrade")


@case
def cairn_exec_v5_output_exit_code_and_cap(t):
    ks = start(t)
    pod(ks, "db", containers=("main", "side"),
        statuses=[{"name": "main", "state": {"running": {}}}, {"name": "side", "state": {"running": {}}}])
    r = tool(ks, "default", "db", "sh", "-c", "echo hi; echo oops >&2; touch marker; exit 7")
    t.eq((r["rc"], r["exit"], r["out"], r["err"]), ("ok", 7, "hi\n", "oops\n"), "result")
    t.eq((r["protocol"], r["container"]), ("v5.channel.k8s.io", "main"), "first container, v5")
    t.check(os.path.exists(os.path.join(ks.exec_root, "default", "db", "main", "marker")), "marker written")
    r = tool(ks, "--container", "side", "default", "db", "sh", "-c", "echo $KUBESIM_CONTAINER")
    t.eq((r["rc"], r["exit"], r["out"]), ("ok", 0, "side\n"), "--container")
    r = tool(ks, "--cap", "10", "default", "db", "seq", "1", "10000")
    t.eq((r["rc"], r["out"], r["outTotal"]), ("ok", "1\n2\n3\n4\n5\n", 48894), "capped output, total counted")
    r = tool(ks, "default", "db", "no-such-command")
    t.eq(r["rc"], "server error", "command that cannot start")
    t.check("no-such-command" in r["message"], r["message"])
    r = tool(ks, "default", "gone", "true")
    t.eq(r["rc"], "not found", "missing pod")
    r = tool(ks, "--container", "nope", "default", "db", "true")
    t.eq(r["rc"], "invalid input", "unknown container")
    t.check("containers: main side" in r["message"], r["message"])


@case
def cairn_exec_falls_back_to_v4(t):
    ks = start(t, extra=["--exec-protocols", "v4.channel.k8s.io"])
    pod(ks, "db")
    r = tool(ks, "default", "db", "sh", "-c", "echo four; exit 2")
    t.eq((r["rc"], r["exit"], r["out"], r["protocol"]), ("ok", 2, "four\n", "v4.channel.k8s.io"), "v4")


@case
def cairn_exec_timeout_ends_the_session(t):
    ks = start(t)
    pod(ks, "db")
    t0 = time.time()
    r = tool(ks, "--timeout-ms", "700", "default", "db", "sh", "-c", "echo $$ > pid; exec sleep 30")
    took = time.time() - t0
    t.eq(r["rc"], "timed out", "timeout")
    t.check(took < 10, "returned after %.1f s" % took)
    with open(os.path.join(ks.exec_root, "default", "db", "main", "pid")) as f:
        pid = int(f.read())
    wait_for(lambda: not os.path.exists("/proc/%d" % pid), 10, "kubesim kills the command of a closed session")


@case
def cairn_exec_tls_and_credentials(t):
    ks = start(t)
    pod(ks, "db")
    with open(ks.kubeconfig) as f:
        kc = f.read()

    def variant(name, text):
        p = t.path(name)
        with open(p, "w") as f:
            f.write(text)
        return p

    server_line = next(line for line in kc.splitlines() if line.strip().startswith("server:"))
    # --no-get: nothing but the WebSocket connection reaches the server
    sni_bad = variant("kc-sni-bad", kc.replace(server_line, server_line + "\n    tls-server-name: wrong.example"))
    r = tool(ks, "--no-get", "main", "default", "db", "true", kubeconfig=sni_bad)
    t.eq(r["rc"], "network error", "tls-server-name not in the certificate")
    t.check("hostname mismatch" in r["message"], r["message"])
    sni_ok = variant("kc-sni-ok", kc.replace(server_line, server_line + "\n    tls-server-name: localhost"))
    r = tool(ks, "--no-get", "main", "default", "db", "true", kubeconfig=sni_ok)
    t.eq((r["rc"], r["exit"]), ("ok", 0), "tls-server-name in the certificate")
    other_key, other_crt = t.path("o.key"), t.path("o.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", other_key, "-out", other_crt, "-days", "1", "-subj", "/CN=other"],
                   check=True, capture_output=True)
    import base64
    import re
    ca_now = re.search(r"certificate-authority-data: (\S+)", kc).group(1)
    with open(other_crt, "rb") as f:
        other = f.read()
    bad_ca = variant("kc-ca-bad", kc.replace(ca_now, base64.b64encode(other).decode()))
    r = tool(ks, "--no-get", "main", "default", "db", "true", kubeconfig=bad_ca)
    t.eq(r["rc"], "network error", "CA that did not sign the server certificate")
    t.check("certificate was refused" in r["message"], r["message"])
    bundle = variant("kc-ca-bundle", kc.replace(ca_now, base64.b64encode(other + base64.b64decode(ca_now)).decode()))
    r = tool(ks, "--no-get", "main", "default", "db", "true", kubeconfig=bundle)
    t.eq((r["rc"], r["exit"]), ("ok", 0), "the right CA second in a bundle")
    ca_file = t.path("ca.pem")
    with open(ca_file, "wb") as f:
        f.write(base64.b64decode(ca_now))
    tok_file = t.path("token")
    with open(tok_file, "w") as f:
        f.write(ks.token + "\n")
    files = re.sub(r"certificate-authority-data: \S+", "certificate-authority: " + ca_file, kc)
    files = re.sub(r"token: \S+", "tokenFile: " + tok_file, files)
    r = tool(ks, "--no-get", "main", "default", "db", "true", kubeconfig=variant("kc-files", files))
    t.eq((r["rc"], r["exit"]), ("ok", 0), "CA file and token file")
    bad_tok = variant("kc-tok-bad", re.sub(r"token: \S+", "token: not-the-token", kc))
    r = tool(ks, "--no-get", "main", "default", "db", "true", kubeconfig=bad_tok)
    t.eq(r["rc"], "not authorized", "bad token")
    t.check("HTTP 401" in r["message"], r["message"])
    ups = [e for e in ks.requests() if e["path"].endswith("/exec")]
    t.check(all(e["token"] in ("admin", None) for e in ups), "the token went with the upgrade")


@case
def cairn_exec_needs_create_on_pods_exec(t):
    sa = "system:serviceaccount:default:hooks"
    ks = start(t, tokens={"admin": "admin-token", sa: "sa-token"})
    pod(ks, "db")
    ks.ok("POST", "/api/v1/namespaces/default/serviceaccounts",
          {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "hooks"}})
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "exec"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/exec"], "verbs": ["get"]}]}
    ks.ok("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", role)
    ks.ok("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
          {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "exec"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "exec"},
           "subjects": [{"kind": "ServiceAccount", "name": "hooks", "namespace": "default"}]})
    kc = ks.kubeconfig_for(sa)
    r = tool(ks, "default", "db", "true", kubeconfig=kc)
    t.eq(r["rc"], "not authorized", "get without create on pods/exec")
    t.check("HTTP 403" in r["message"] and "pods/exec" in r["message"], r["message"])
    role["rules"][0]["verbs"] = ["get", "create"]
    role["metadata"]["resourceVersion"] = ks.ok("GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/exec")["metadata"]["resourceVersion"]
    ks.ok("PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/exec", role)
    r = tool(ks, "default", "db", "sh", "-c", "echo ok", kubeconfig=kc)
    t.eq((r["rc"], r["out"]), ("ok", "ok\n"), "get and create on pods/exec")


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


class CertOnlyServer:
    """A TLS server that requires a client certificate from its CA and
    answers one pods/exec WebSocket upgrade with a Success Status: enough
    to see that kube_exec() presents the kubeconfig's client certificate."""

    def __init__(self, t):
        d = t.mkdir("pki")
        self.ca, self.ca_key = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", self.ca_key, "-out", self.ca, "-days", "1", "-subj", "/CN=test-ca")
        self.paths = {}
        for who, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", None)):
            key, csr, crt = (os.path.join(d, who + x) for x in (".key", ".csr", ".crt"))
            subj = "/CN=%s" % ("cairn-client" if who == "client" else "127.0.0.1")
            openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", csr, "-subj", subj)
            extf = os.path.join(d, who + ".ext")
            with open(extf, "w") as f:
                f.write((ext or "extendedKeyUsage=clientAuth") + "\n")
            openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key, "-CAcreateserial",
                    "-out", crt, "-days", "1", "-extfile", extf)
            self.paths[who] = (crt, key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*self.paths["server"])
        ctx.load_verify_locations(self.ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
        self.ctx = ctx
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.peers = []     # CN of each client certificate that completed a handshake
        self.refused = 0    # handshakes that failed (no or bad certificate)
        threading.Thread(target=self.serve, daemon=True).start()
        t.on_cleanup(self.sock.close)

    def serve(self):
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            try:
                c = self.ctx.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                self.refused += 1
                raw.close()
                continue
            try:
                self.peers.append(dict(x[0] for x in c.getpeercert()["subject"])["commonName"])
                req = b""
                while b"\r\n\r\n" not in req:
                    req += c.recv(4096)
                key = [l.split(b":", 1)[1].strip() for l in req.split(b"\r\n")
                       if l.lower().startswith(b"sec-websocket-key:")][0]
                acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
                c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade"
                          b"\r\nSec-WebSocket-Accept: " + acc + b"\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n")
                for msg in (b"\x01cert-ok\n", b'\x03{"metadata":{},"status":"Success"}'):
                    c.sendall(bytes([0x82, len(msg)]) + msg)
                time.sleep(0.2)
            except (OSError, IndexError, KeyError):
                pass
            finally:
                c.close()

    def kubeconfig(self, t, name, files):
        crt, key = self.paths["client"]
        if files:
            user = "    client-certificate: %s\n    client-key: %s\n" % (crt, key)
            ca = "    certificate-authority: %s\n" % self.ca
        else:
            rd = lambda p: base64.b64encode(open(p, "rb").read()).decode()
            user = "    client-certificate-data: %s\n    client-key-data: %s\n" % (rd(crt), rd(key))
            ca = "    certificate-authority-data: %s\n" % rd(self.ca)
        path = t.path(name)
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                    "    server: https://127.0.0.1:%d\n%scontexts:\n- name: c\n  context:\n"
                    "    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n%s"
                    % (self.port, ca, user))
        return path


@case
def cairn_exec_presents_client_certificates(t):
    srv = CertOnlyServer(t)
    for name, files in (("kc-cert-data", False), ("kc-cert-files", True)):
        kc = srv.kubeconfig(t, name, files)
        r = subprocess.run([TOOL, "--kubeconfig", kc, "--no-get", "main", "default", "db", "true"],
                           capture_output=True, text=True, timeout=60)
        out = json.loads(r.stdout)
        t.eq((out["rc"], out["exit"], out["out"]), ("ok", 0, "cert-ok\n"), "%s: %s" % (name, out["message"]))
    t.eq(srv.peers, ["cairn-client", "cairn-client"], "the client certificate went with the upgrade")
    # without the certificate the server refuses the TLS handshake
    kc = srv.kubeconfig(t, "kc-nocert", False)
    with open(kc) as f:
        text = "".join(l for l in f if "client-" not in l).replace("  user:\n", "  user: {}\n")
    with open(kc, "w") as f:
        f.write(text)
    r = subprocess.run([TOOL, "--kubeconfig", kc, "--no-get", "main", "default", "db", "true"],
                       capture_output=True, text=True, timeout=60)
    t.eq(json.loads(r.stdout)["rc"], "network error", "no client certificate")


main()
