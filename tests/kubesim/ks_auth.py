"""Authentication kinds real kubeconfigs use, besides static bearer tokens.

- Client certificates (k8s.io/apiserver pkg/authentication/request/x509: the
  user is the subject CN, the groups its O values), the kind of kubeconfig
  k3s (/etc/rancher/k3s/k3s.yaml) and kubeadm (admin.conf) write:
  client-certificate-data / client-key-data, signed by the cluster CA.
  kubesim plays the CA: it signs its serving certificate and one client
  certificate per --client-cert NAME[=GROUP,...] with the `openssl` command.
- Short-lived tokens as exec credential plugins hand out
  (client.authentication.k8s.io/v1 ExecCredential with an expiry, EKS/GKE/AKS
  style): POST /_sim/tokens mints one; exec_credential.py is the plugin; an
  expired token gets 401 as an expired OIDC/IAM token does."""

import base64
import os
import re
import secrets
import subprocess
import sys
import threading
import time


def _openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _san(host):
    san = "IP:127.0.0.1,DNS:localhost"
    if host not in ("127.0.0.1", "localhost", "0.0.0.0", ""):
        san += (",IP:" if re.match(r"^[0-9.]+$|:", host) else ",DNS:") + host
    return san


def gen_self_signed(tmp, host):
    """The plain --tls case: one self-signed serving certificate (also the CA)."""
    key, crt = os.path.join(tmp, "key.pem"), os.path.join(tmp, "cert.pem")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
             "-out", crt, "-days", "30", "-subj", "/CN=kubesim", "-addext", "subjectAltName=" + _san(host))
    return crt, key


def gen_ca_and_certs(tmp, host, clients):
    """A CA, a serving certificate it signs, and a client certificate per
    (name, [groups]). -> (server crt path, server key path, CA path, CA PEM,
    {name: (cert PEM, key PEM)})."""
    ca_key, ca_crt = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.crt")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", ca_key,
             "-out", ca_crt, "-days", "30", "-subj", "/CN=kubesim-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue(base, subj, ext):
        key, csr, crt, extf = (os.path.join(tmp, base + s) for s in (".key", ".csr", ".crt", ".ext"))
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                 "-out", csr, "-subj", subj)
        with open(extf, "w") as f:
            f.write(ext)
        _openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
                 "-days", "30", "-extfile", extf)
        return crt, key

    srv_crt, srv_key = issue("server", "/CN=kubesim", "subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % _san(host))
    out = {}
    for i, (name, groups) in enumerate(clients):
        subj = "".join("/O=%s" % g.replace("/", "\\/") for g in groups) + "/CN=" + name.replace("/", "\\/")
        crt, key = issue("client%d" % i, subj, "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")
        with open(crt, "rb") as f, open(key, "rb") as g:
            out[name] = (f.read(), g.read())
    with open(ca_crt, "rb") as f:
        ca_pem = f.read()
    return srv_crt, srv_key, ca_crt, ca_pem, out


def cert_user(sock):
    """The user a verified client certificate names: (CN, [O...]) or None."""
    try:
        cert = sock.getpeercert()
    except (ValueError, AttributeError, OSError):
        return None
    if not cert:
        return None
    cn, groups = None, []
    for rdn in cert.get("subject", ()):
        for k, v in rdn:
            if k == "commonName":
                cn = v
            elif k == "organizationName":
                groups.append(v)
    return (cn, groups) if cn else None


class MintedTokens:
    """Tokens with an expiry, as an exec plugin obtains them (POST /_sim/tokens)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = {}        # token -> (name, expiry epoch)

    def mint(self, name, ttl):
        tok = "ks-" + secrets.token_urlsafe(24)
        exp = time.time() + float(ttl)
        with self.lock:
            self.tokens[tok] = (name, exp)
        return tok, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))

    def lookup(self, tok):
        """-> (name, expired) or None."""
        with self.lock:
            hit = self.tokens.get(tok)
        if hit is None:
            return None
        return hit[0], time.time() >= hit[1]


def b64(data):
    return base64.b64encode(data).decode()


def kubeconfig(url, users, ca_pem):
    """users: [(name, {"token": T} | {"cert": (crt, key)} | {"exec": argv})];
    the first is the current context `kubesim`, the others `kubesim-NAME`."""
    cl = "    server: %s\n" % url
    if ca_pem:
        cl += "    certificate-authority-data: %s\n" % b64(ca_pem)
    users = list(users) or [("kubesim", {})]
    out = "apiVersion: v1\nkind: Config\npreferences: {}\nclusters:\n- name: kubesim\n  cluster:\n" + cl
    out += "contexts:\n"
    for i, (name, _) in enumerate(users):
        out += "- name: %s\n  context:\n    cluster: kubesim\n    user: %s\n    namespace: default\n" % (
            "kubesim" if i == 0 else "kubesim-" + name, name)
    out += "current-context: kubesim\nusers:\n"
    for name, how in users:
        if "token" in how:
            out += "- name: %s\n  user:\n    token: %s\n" % (name, how["token"])
        elif "cert" in how:
            out += "- name: %s\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n" % (
                name, b64(how["cert"][0]), b64(how["cert"][1]))
        elif "exec" in how:
            argv = how["exec"]
            out += ("- name: %s\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                    "      command: %s\n      args:\n" % (name, _q(argv[0])))
            out += "".join("      - %s\n" % _q(a) for a in argv[1:])
            out += "      interactiveMode: Never\n      provideClusterInfo: false\n"
        else:
            out += "- name: %s\n  user: {}\n" % name
    return out


def _q(s):
    return "'" + str(s).replace("'", "''") + "'"


def exec_argv(url, name, ttl):
    here = os.path.dirname(os.path.abspath(__file__))
    return [sys.executable, os.path.join(here, "exec_credential.py"), "--server", url, "--name", name,
            "--ttl", str(ttl)]
