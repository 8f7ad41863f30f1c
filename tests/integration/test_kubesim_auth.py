#!/usr/bin/env python3
"""kubesim authenticates the ways real kubeconfigs do, checked with the real
kubectl: client certificates signed by the cluster CA (k3s, kubeadm) and exec
credential plugins handing out short-lived tokens (EKS, GKE, AKS)."""
import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main, SRCDIR  # noqa: E402


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


@case
def client_certificate_kubeconfig(t):
    need_kubectl(t)
    sim = t.kubesim(client_certs=["system:admin=system:masters"])
    with open(sim.kubeconfig) as f:
        kc = f.read()
    t.check("client-certificate-data:" in kc and "client-key-data:" in kc and "token:" not in kc,
            "a k3s-style kubeconfig: %s" % kc)
    sim.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}})
    t.check("c1" in sim.kubectl("get", "cm").stdout, "kubectl with the client certificate")
    t.check(any(e["token"] == "system:admin" for e in sim.requests()), "the request log names the certificate's CN")
    # no credentials: 401
    st, body, _ = sim.request("GET", "/api/v1/namespaces", headers={}, token="")
    t.eq(st, 200, "cairntest itself authenticates with the certificate")
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        urllib.request.urlopen(sim.url + "/api/v1/namespaces", context=ctx, timeout=10)
        t.check(False, "anonymous request accepted")
    except urllib.error.HTTPError as e:
        t.eq(e.code, 401, "anonymous request")
    # a certificate of another CA is refused
    d = t.mkdir("other-ca")
    key, crt = os.path.join(d, "k.pem"), os.path.join(d, "c.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=system:admin"], check=True,
                   capture_output=True)
    bad = t.path("bad-kubeconfig")
    with open(crt, "rb") as f, open(key, "rb") as g:
        c64, k64 = base64.b64encode(f.read()).decode(), base64.b64encode(g.read()).decode()
    lines = []
    for line in kc.splitlines():
        if "client-certificate-data:" in line:
            line = line.split(":")[0] + ": " + c64
        elif "client-key-data:" in line:
            line = line.split(":")[0] + ": " + k64
        lines.append(line)
    with open(bad, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = sim.kubectl("get", "cm", kubeconfig=bad, check=False)
    t.check(r.returncode != 0, "foreign certificate refused: %s" % r.stderr)


@case
def exec_credential_plugin(t):
    need_kubectl(t)
    sim = t.kubesim(exec_users=[("bot", 600)])
    with open(sim.kubeconfig) as f:
        kc = f.read()
    t.check("apiVersion: client.authentication.k8s.io/v1" in kc and "exec_credential.py" in kc, kc)
    sim.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "c1"}}))
    t.check("c1" in sim.kubectl("get", "cm").stdout, "kubectl through the exec plugin")
    toks = {e["token"] for e in sim.requests() if e["path"].startswith("/api")}
    t.eq(toks, {"bot"}, "requests authenticated as the plugin's user")
    # the plugin's output is a v1 ExecCredential with an expiry
    argv = [sys.executable, os.path.join(SRCDIR, "tests", "kubesim", "exec_credential.py"),
            "--server", sim.url, "--name", "bot", "--ttl", "1"]
    cred = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    t.eq((cred["apiVersion"], cred["kind"]), ("client.authentication.k8s.io/v1", "ExecCredential"), "credential")
    t.check(cred["status"]["expirationTimestamp"].endswith("Z"), "expiry: %s" % cred)
    tok = cred["status"]["token"]
    t.eq(sim.request("GET", "/api/v1/namespaces", token=tok)[0], 200, "fresh token")
    time.sleep(1.3)
    st, body, _ = sim.request("GET", "/api/v1/namespaces", token=tok)
    t.eq((st, body["reason"]), (401, "Unauthorized"), "expired token")


main()
