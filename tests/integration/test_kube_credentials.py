"""Credentials users have (issue 17): kubeconfig exec plugins and client
certificates (k3s, kubeadm), for the CLI, `install` and the server, against
TLS kubesim.

The plugin is a shell script that prints a client.authentication.k8s.io/v1
ExecCredential carrying kubesim's token with an expirationTimestamp a few
seconds ahead and logs each run; kubesim's request log names the token of
every request.
"""
import base64
import json
import os
import subprocess
import time

from bkworld import World, NS
from cairntest import BIN, BUILDDIR, case, main

TOOL = os.path.join(BUILDDIR, "tests/helpers/kube_tool")

PLUGIN = r"""#!/bin/sh
# an exec credential plugin: logs its run, prints kubesim's token
d=$(dirname "$0")
echo "$(date +%s.%N) $* $PLUGIN_ENV" >> "$d/runs.log"
exp=$(date -u -d "+${TTL:-3600} seconds" +%Y-%m-%dT%H:%M:%SZ)
printf '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",'
printf '"status":{"token":"%s","expirationTimestamp":"%s"}}\n' "$(cat "$d/token")" "$exp"
"""


def exec_world(t, ttl):
    """kubesim (TLS, token admin) and a kubeconfig whose user is the plugin."""
    sim = t.kubesim(tokens={"admin": "admin-token"})
    with open(sim.kubeconfig) as f:
        ca = [ln.split(":", 1)[1].strip() for ln in f.read().splitlines()
              if "certificate-authority-data" in ln][0]
    d = t.mkdir("plugin")
    with open(os.path.join(d, "token"), "w") as f:
        f.write("admin-token")
    path = os.path.join(d, "get-token")
    with open(path, "w") as f:
        f.write(PLUGIN)
    os.chmod(path, 0o755)
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "cl", "cluster": {"server": sim.url,
                                                   "certificate-authority-data": ca}}],
           "contexts": [{"name": "c", "context": {"cluster": "cl", "user": "u"}}],
           "users": [{"name": "u", "user": {"exec": {
               "apiVersion": "client.authentication.k8s.io/v1",
               "command": "./get-token", "args": ["--region", "edge-1"],
               "env": [{"name": "PLUGIN_ENV", "value": "from-kubeconfig"},
                       {"name": "TTL", "value": str(ttl)}],
               "interactiveMode": "Never"}}}]}
    kc = os.path.join(d, "kubeconfig")
    with open(kc, "w") as f:
        json.dump(doc, f)
    return sim, kc, d


def server_as(t, kubeconfig):
    """cairn server with this kubeconfig."""
    return t.spawn([BIN, "server", "--kubeconfig", kubeconfig, "--namespace", NS,
                    "--server-id", "s1", "--journal", t.path("journal.db"),
                    "--retry-period", "200ms", "--log-level", "info"], name="server")


def runs(d):
    try:
        with open(os.path.join(d, "runs.log")) as f:
            return [ln.split() for ln in f.read().splitlines()]
    except FileNotFoundError:
        return []


def api_requests(sim, since=0):
    return [r for r in sim.requests() if not r["path"].startswith("/_sim") and r["seq"] > since]


@case
def exec_plugin_cli_and_install(t):
    sim, kc, d = exec_world(t, ttl=3600)
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    r = subprocess.run([TOOL, "--kubeconfig", kc, "get", "core", "v1", "namespaces", "-",
                        "default"], capture_output=True, text=True, env=env, timeout=60)
    t.eq(r.returncode, 0, "kube_tool get with the exec kubeconfig: %s %s" % (r.stdout, r.stderr))
    t.eq(len(runs(d)), 1, "plugin runs")
    t.eq(runs(d)[0][1:], ["--region", "edge-1", "from-kubeconfig"], "args and env of the kubeconfig")
    # `install` makes dozens of requests: one run, every request with its token
    seq = sim.requests()[-1]["seq"]
    r = subprocess.run([BIN, "install", "--kubeconfig", kc, "--wait"], capture_output=True,
                       text=True, env=env, timeout=120)
    t.eq(r.returncode, 0, "cairn install with the exec kubeconfig: %s %s" % (r.stdout[-800:],
                                                                           r.stderr[-800:]))
    reqs = api_requests(sim, seq)
    t.check(len(reqs) > 10, "install's requests: %d" % len(reqs))
    t.eq(sorted({q["token"] for q in reqs}), ["admin"], "tokens of install's requests")
    t.eq(len(runs(d)), 2, "plugin runs (one per process, cached)")
    # The CLI reads what install made.
    r = subprocess.run([BIN, "backup", "get", "--kubeconfig", kc, "--namespace", NS],
                       capture_output=True, text=True, env=env, timeout=60)
    t.eq(r.returncode, 0, "cairn backup get: %s %s" % (r.stdout, r.stderr))
    # A 401 (the token was revoked): the plugin runs again and the request
    # is sent once more with what it prints now.
    with open(os.path.join(d, "token"), "w") as f:
        f.write("admin-token")
    sim.faults({"token": "admin", "status": 401, "reason": "Unauthorized", "count": 1})
    before = len(runs(d))
    r = subprocess.run([TOOL, "--kubeconfig", kc, "get", "core", "v1", "namespaces", "-",
                        "default"], capture_output=True, text=True, env=env, timeout=60)
    t.eq(r.returncode, 0, "get after a 401: %s %s" % (r.stdout, r.stderr))
    t.eq(len(runs(d)) - before, 2, "plugin runs: the first, then after the 401")
    # A failing plugin is named in the error.
    with open(os.path.join(d, "get-token"), "w") as f:
        f.write("#!/bin/sh\necho 'please log in' >&2\nexit 4\n")
    r = subprocess.run([TOOL, "--kubeconfig", kc, "get", "core", "v1", "namespaces", "-",
                        "default"], capture_output=True, text=True, env=env, timeout=60)
    t.check(r.returncode != 0, "get with a failing plugin succeeded")
    t.check('user "u": exec' in r.stdout + r.stderr and "exited with status 4" in
            r.stdout + r.stderr, "error names the plugin: %s %s" % (r.stdout, r.stderr))


@case
def exec_plugin_server_renews_expired_token(t):
    """The server runs a backup with an exec kubeconfig whose credential
    expires every 2 s: the plugin runs again after expiry, not per request."""
    sim, kc, d = exec_world(t, ttl=2)
    w = World(t, sim=sim)
    w.fs_location(t.mkdir("store"))
    seq = sim.requests()[-1]["seq"]
    t0 = time.time()
    srv = server_as(t, kc)
    w.create_backup("b1")
    b = w.wait_backup("b1", srv=srv, timeout=60)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"])
    # keep the server up past a few expiries (Lease renewals go on)
    time.sleep(max(0, 7 - (time.time() - t0)))
    elapsed = time.time() - t0
    srv.stop()
    reqs = api_requests(sim, seq)
    t.eq(sorted({q["token"] for q in reqs}), ["admin"], "tokens of the server's requests")
    t.check(not [q for q in reqs if q["status"] == 401], "401s: the token was sent expired")
    n = len(runs(d))
    # three clients (API, Lease, status probe), each caching until expiry
    t.check(n >= 4, "plugin runs %d in %.1fs with a 2 s expiry: not renewed" % (n, elapsed))
    t.check(n <= 3 * (elapsed / 2 + 2), "plugin runs %d in %.1fs: more than once per expiry" %
            (n, elapsed))
    t.check(n * 5 < len(reqs), "plugin runs %d for %d requests: not cached" % (n, len(reqs)))



@case
def client_certificate_kubeconfig(t):
    """A k3s-style kubeconfig: the user is a client certificate and key
    (client-certificate-data / client-key-data), no token. kubesim is the
    CA and authenticates the certificate's CN."""
    sim = t.kubesim(client_certs=["admin"])
    with open(sim.kubeconfig) as f:
        text = f.read()
    t.check("client-certificate-data" in text and "token:" not in text,
            "the kubeconfig is certificate-only: %s" % text)
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    r = subprocess.run([TOOL, "--kubeconfig", sim.kubeconfig, "get", "core", "v1", "namespaces",
                        "-", "default"], capture_output=True, text=True, env=env, timeout=60)
    t.eq(r.returncode, 0, "kube_tool get: %s %s" % (r.stdout, r.stderr))
    seq = sim.requests()[-1]["seq"]
    r = subprocess.run([BIN, "install", "--kubeconfig", sim.kubeconfig, "--wait"],
                       capture_output=True, text=True, env=env, timeout=120)
    t.eq(r.returncode, 0, "cairn install: %s %s" % (r.stdout[-800:], r.stderr[-800:]))
    reqs = api_requests(sim, seq)
    t.eq(sorted({q["token"] for q in reqs}), ["admin"], "who install's requests came as")
    # the server backs up with it (to a location of its own: install made one)
    w = World(t, sim=sim)
    w.fs_location(t.mkdir("store"), name="here", default=False)
    srv = server_as(t, sim.kubeconfig)
    w.create_backup("b1", {"includedNamespaces": [NS], "storageLocation": "here"})
    b = w.wait_backup("b1", srv=srv, timeout=60)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"])


main()
