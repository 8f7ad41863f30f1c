"""The kube client's configuration against a real TLS kubesim with tokens.

Every kubeconfig variant (CA data and file, insecure, tls-server-name,
token and tokenFile, client certificate and key as data and files, the
KUBECONFIG colon list, --context) and the in-cluster path (environment plus
service-account files in a temp dir, token rotation) is driven through
tests/helpers/kube_tool; the kubesim request log shows which credential
arrived.
"""
import base64
import json
import os
import subprocess
import time

from cairntest import BUILDDIR, case, main, wait_for

TOOL = os.path.join(BUILDDIR, "tests/helpers/kube_tool")


def tool(*args, env=None, timeout=60, clean_env=True):
    full = dict(os.environ)
    if clean_env:
        for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                  "CAIRN_SERVICEACCOUNT_DIR", "POD_NAMESPACE"):
            full.pop(k, None)
    if env:
        full.update({k: str(v) for k, v in env.items()})
    return subprocess.run([TOOL] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=full)


def ok(r, what):
    if r.returncode != 0:
        raise AssertionError("%s: exit %d: %s %s" % (what, r.returncode, r.stdout[-800:],
                                                    r.stderr[-800:]))
    return r.stdout


def sim_with_ca(t, tokens=None):
    sim = t.kubesim(tokens=tokens or {"admin": "admin-token", "viewer": "viewer-token"})
    with open(sim.kubeconfig) as f:
        text = f.read()
    b64 = [ln.split(":", 1)[1].strip() for ln in text.splitlines()
           if "certificate-authority-data" in ln][0]
    ca_pem = base64.b64decode(b64).decode()
    return sim, b64, ca_pem


def write(path, content):
    with open(path, "w") as f:
        f.write(content)
    return path


def kubeconfig(path, server, cluster, user, namespace=None, ctx="c", extra_ctx=()):
    """A kubeconfig written as JSON (valid YAML: libyaml reads flow style)."""
    context = {"cluster": "cl", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    cluster = dict(cluster, server=server)
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": ctx,
           "clusters": [{"name": "cl", "cluster": cluster}],
           "contexts": [{"name": ctx, "context": context}] + list(extra_ctx),
           "users": [{"name": "u", "user": user}]}
    return write(path, json.dumps(doc, indent=1))


def last_token(sim):
    reqs = [r for r in sim.requests() if not r["path"].startswith("/_sim")]
    return reqs[-1]["token"] if reqs else None


@case
def kubeconfig_yaml_ca_data_and_token(t):
    sim, _, _ = sim_with_ca(t)
    out = ok(tool("--kubeconfig", sim.kubeconfig, "get", "core", "v1", "namespaces", "-",
                  "default"), "get namespace")
    t.eq(json.loads(out)["metadata"]["name"], "default", "namespace name")
    t.eq(last_token(sim), "admin", "token used")
    cfg = json.loads(ok(tool("--kubeconfig", sim.kubeconfig, "config"), "config"))
    t.check("admin-token" not in json.dumps(cfg), "config dump leaks the token")
    t.eq(cfg["namespace"], "default", "namespace")
    # --context picks kubesim's second user.
    ok(tool("--kubeconfig", sim.kubeconfig, "--context", "kubesim-viewer", "get", "core", "v1",
            "namespaces", "-", "default"), "get as viewer")
    t.eq(last_token(sim), "viewer", "token used with --context")
    r = tool("--kubeconfig", sim.kubeconfig, "--context", "nope", "get", "core", "v1",
             "namespaces", "-", "default")
    t.check(r.returncode != 0 and 'context "nope" not found' in r.stdout, r.stdout)


@case
def kubeconfig_ca_file_and_token_file(t):
    sim, _, ca = sim_with_ca(t)
    d = t.mkdir("cfg")
    write(os.path.join(d, "ca.pem"), ca)
    write(os.path.join(d, "token"), "viewer-token\n")
    kc = kubeconfig(os.path.join(d, "kc"), sim.url, {"certificate-authority": "ca.pem"},
                    {"tokenFile": "token"}, namespace="team-a")
    out = ok(tool("--kubeconfig", kc, "config"), "config")
    cfg = json.loads(out)
    t.eq(cfg["ca"], os.path.join(d, "ca.pem"), "CA path resolved next to the kubeconfig")
    t.eq(cfg["namespace"], "team-a", "context namespace")
    ok(tool("--kubeconfig", kc, "get", "core", "v1", "namespaces", "-", "default"), "get")
    t.eq(last_token(sim), "viewer", "token from tokenFile")
    # A missing CA file is named with its field.
    kc2 = kubeconfig(os.path.join(d, "kc2"), sim.url, {"certificate-authority": "nope.pem"},
                     {"token": "x"})
    r = tool("--kubeconfig", kc2, "config")
    t.check(r.returncode != 0 and "certificate-authority" in r.stdout and kc2 in r.stdout,
            r.stdout)


@case
def kubeconfig_insecure_and_untrusted(t):
    sim, _, _ = sim_with_ca(t)
    d = t.mkdir("cfg")
    kc = kubeconfig(os.path.join(d, "insecure"), sim.url, {"insecure-skip-tls-verify": True},
                    {"token": "admin-token"})
    ok(tool("--kubeconfig", kc, "get", "core", "v1", "namespaces", "-", "default"),
       "insecure get")
    kc = kubeconfig(os.path.join(d, "noca"), sim.url, {}, {"token": "admin-token"})
    r = tool("--kubeconfig", kc, "--retries", "0", "get", "core", "v1", "namespaces", "-",
             "default")
    t.check(r.returncode != 0 and "http=0" in r.stdout, "untrusted server accepted: " + r.stdout)


@case
def kubeconfig_tls_server_name(t):
    sim, b64, _ = sim_with_ca(t)
    d = t.mkdir("cfg")
    # The certificate names 127.0.0.1 and localhost: verifying as localhost works...
    kc = kubeconfig(os.path.join(d, "good"), sim.url,
                    {"certificate-authority-data": b64, "tls-server-name": "localhost"},
                    {"token": "admin-token"})
    ok(tool("--kubeconfig", kc, "get", "core", "v1", "namespaces", "-", "default"),
       "tls-server-name localhost")
    # ...verifying as another name fails, so the field is honoured.
    kc = kubeconfig(os.path.join(d, "bad"), sim.url,
                    {"certificate-authority-data": b64, "tls-server-name": "other.example"},
                    {"token": "admin-token"})
    r = tool("--kubeconfig", kc, "--retries", "0", "get", "core", "v1", "namespaces", "-",
             "default")
    t.check(r.returncode != 0 and "http=0" in r.stdout,
            "tls-server-name other.example accepted: " + r.stdout)


@case
def kubeconfig_client_certificates(t):
    sim, b64, _ = sim_with_ca(t)
    d = t.mkdir("cfg")
    for n in ("a", "b"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=client-" + n,
                        "-days", "1", "-keyout", os.path.join(d, n + ".key"),
                        "-out", os.path.join(d, n + ".crt")],
                       check=True, capture_output=True)

    def data(name):
        with open(os.path.join(d, name), "rb") as f:
            return base64.b64encode(f.read()).decode()

    kc = kubeconfig(os.path.join(d, "files"), sim.url, {"certificate-authority-data": b64},
                    {"token": "admin-token", "client-certificate": "a.crt",
                     "client-key": "a.key"})
    ok(tool("--kubeconfig", kc, "get", "core", "v1", "namespaces", "-", "default"),
       "client cert files")
    kc = kubeconfig(os.path.join(d, "data"), sim.url, {"certificate-authority-data": b64},
                    {"token": "admin-token", "client-certificate-data": data("a.crt"),
                     "client-key-data": data("a.key")})
    ok(tool("--kubeconfig", kc, "get", "core", "v1", "namespaces", "-", "default"),
       "client cert data")
    cfg = json.loads(ok(tool("--kubeconfig", kc, "config"), "config"))
    t.check(cfg["clientKey"].startswith("<redacted"), "key not redacted: %r" % cfg["clientKey"])
    # A key that does not match the certificate makes the TLS setup fail,
    # which shows the blobs really reach libcurl.
    kc = kubeconfig(os.path.join(d, "mismatch"), sim.url, {"certificate-authority-data": b64},
                    {"token": "admin-token", "client-certificate-data": data("a.crt"),
                     "client-key-data": data("b.key")})
    r = tool("--kubeconfig", kc, "--retries", "0", "get", "core", "v1", "namespaces", "-",
             "default")
    t.check(r.returncode != 0 and "http=0" in r.stdout, "mismatched key accepted: " + r.stdout)
    # Half a pair is a config error naming the field.
    kc = kubeconfig(os.path.join(d, "half"), sim.url, {"certificate-authority-data": b64},
                    {"client-certificate-data": data("a.crt")})
    r = tool("--kubeconfig", kc, "config")
    t.check(r.returncode != 0 and "client-key" in r.stdout, r.stdout)


@case
def kubeconfig_env_list_merge(t):
    sim, b64, _ = sim_with_ca(t)
    d = t.mkdir("cfg")
    # First file: current-context and the user; second: context and cluster,
    # and a conflicting user that must lose.
    a = write(os.path.join(d, "a"), json.dumps({
        "current-context": "merged",
        "users": [{"name": "u", "user": {"token": "viewer-token"}}]}))
    b = write(os.path.join(d, "b"), json.dumps({
        "current-context": "other",
        "contexts": [{"name": "merged", "context": {"cluster": "cl", "user": "u",
                                                    "namespace": "from-b"}}],
        "clusters": [{"name": "cl", "cluster": {"server": sim.url,
                                                "certificate-authority-data": b64}}],
        "users": [{"name": "u", "user": {"token": "admin-token"}}]}))
    env = {"KUBECONFIG": "%s:%s:%s" % (a, os.path.join(d, "missing"), b), "HOME": d}
    cfg = json.loads(ok(tool("config", env=env), "config"))
    t.eq(cfg["context"], "merged", "current-context from the first file")
    t.eq(cfg["namespace"], "from-b", "context from the second file")
    ok(tool("get", "core", "v1", "namespaces", "-", "default", env=env), "get")
    t.eq(last_token(sim), "viewer", "user from the first file wins")
    # ~/.kube/config is the fallback when KUBECONFIG is unset.
    os.makedirs(os.path.join(d, ".kube"), exist_ok=True)
    with open(sim.kubeconfig) as f:
        write(os.path.join(d, ".kube", "config"), f.read())
    ok(tool("get", "core", "v1", "namespaces", "-", "default", env={"HOME": d}), "home config")
    t.eq(last_token(sim), "admin", "token from ~/.kube/config")
    r = tool("get", "core", "v1", "namespaces", "-", "default", env={"HOME": t.mkdir("empty")})
    t.check(r.returncode != 0 and "no cluster configuration" in r.stdout, r.stdout)


@case
def in_cluster_with_rotating_token(t):
    sim, _, ca = sim_with_ca(t, tokens={"sa1": "tok-1", "sa2": "tok-2"})
    sa = t.mkdir("sa")
    write(os.path.join(sa, "ca.crt"), ca)
    write(os.path.join(sa, "token"), "tok-1\n")
    write(os.path.join(sa, "namespace"), "apps\n")
    port = sim.url.rsplit(":", 1)[1]
    env = {"HOME": t.mkdir("home"), "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": port, "CAIRN_SERVICEACCOUNT_DIR": sa}
    cfg = json.loads(ok(tool("config", env=env), "config"))
    t.eq(cfg["source"], "in-cluster", "source")
    t.eq(cfg["namespace"], "apps", "namespace from the service account")
    t.eq(cfg["server"], "https://127.0.0.1:" + port, "server")
    cfg = json.loads(ok(tool("config", env=dict(env, POD_NAMESPACE="pods-ns")), "config"))
    t.eq(cfg["namespace"], "pods-ns", "POD_NAMESPACE wins")

    # A long-running client picks up the rotated token; when the old one is
    # refused at once (401), it re-reads the file and retries.
    log = t.path("poll.out")
    full = dict(os.environ)
    full.pop("KUBECONFIG", None)
    full.update(env)
    with open(log, "w") as out:
        p = subprocess.Popen([TOOL, "poll-get", "core", "v1", "namespaces", "-", "default",
                              "40", "100"], stdout=out, stderr=subprocess.STDOUT, env=full)
    try:
        wait_for(lambda: "ok 3" in open(log).read(), 20, "first polls")
        write(os.path.join(sa, "token.new"), "tok-2\n")
        os.rename(os.path.join(sa, "token.new"), os.path.join(sa, "token"))
        sim.faults({"token": "sa1", "status": 401, "reason": "Unauthorized"})
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    text = open(log).read()
    t.eq(p.returncode, 0, "poll exit code")
    t.check("error" not in text, "a request failed across the rotation: " + text[-500:])
    t.eq(text.count("ok "), 40, "successful polls")
    toks = [r["token"] for r in sim.requests() if r["path"] == "/api/v1/namespaces/default"]
    t.eq(toks[0], "sa1", "first token")
    t.eq(toks[-1], "sa2", "token after rotation")
    # Missing token file: one clear error naming it.
    os.unlink(os.path.join(sa, "token"))
    r = tool("config", env=env)
    t.check(r.returncode != 0 and "in-cluster config: token" in r.stdout and sa in r.stdout,
            r.stdout)


main()
