"""cairn install / uninstall against kubesim, checked with the real kubectl.

- the --dry-run -o yaml manifest applies in one `kubectl apply -f -` on a
  fresh cluster (it holds no custom resource: a server started as the
  StatefulSet runs it creates the default location) and a second apply
  reports every object unchanged;
- `cairn install` itself creates everything, and a second run writes
  nothing (only GETs in kubesim's request log) and says unchanged;
- the objects carry what the issue asks: StatefulSet running `cairn
  server` with POD_NAME from the downward API, journal on a per-replica
  volume, probes, small resources, headless Service, least-privilege RBAC,
  credentials Secret and default BackupStorageLocation; 1 replica for a
  local directory (more refused, pinned to the node holding it), 2 for S3;
  non-root, read-only, no capabilities, RuntimeDefault seccomp; the web
  endpoint closed by a generated token Secret (kept by a re-run);
- uninstall removes what install made and keeps CRDs, namespace and
  Backups; --purge removes those too, after stripping the cleanup
  finalizers so storage is never cleaned.
"""
import base64
import json
import os
import subprocess
import urllib.error
import urllib.request

import yaml

from cairntest import BIN, case, main, cairn, free_port, wait_for

WRITES = ("POST", "PUT", "PATCH", "DELETE")


def kubectl(t, sim, *args, input=None, check=True):
    # A fresh discovery cache per call: kubectl caches /apis for a while and
    # would not see the CRDs created a moment ago.
    cache = t.mkdir("kcache-%d" % len(os.listdir(t.dir)))
    argv = ["kubectl", "--kubeconfig", sim.kubeconfig, "--cache-dir", cache] + list(args)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, input=input)
    if check and r.returncode != 0:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), r.stderr[-1500:]))
    return r


def cairn_ok(*args, **kw):
    r = cairn(*args, **kw)
    if r.returncode != 0:
        raise AssertionError("cairn %s -> %d: %s %s" % (" ".join(args), r.returncode,
                                                         r.stdout[-800:], r.stderr[-1500:]))
    return r


def get(sim, path):
    st, obj, _ = sim.get(path)
    return obj if st == 200 else None


def doc(docs, kind):
    return next(d for d in docs if d["kind"] == kind)


def token_of(secret):
    return base64.b64decode(secret["data"]["token"]).decode()


@case
def dry_run_manifest_applies_with_kubectl(t):
    sim = t.kubesim()
    out = cairn_ok("install", "--dry-run", "-o", "yaml").stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in docs]
    t.eq(kinds[0], "Namespace", "first object")
    t.eq(kinds.count("CustomResourceDefinition"), 6, "CRDs in the manifest")
    for k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
              "StatefulSet", "Service"):
        t.check(k in kinds, "%s missing from the manifest" % k)
    # kubectl maps every kind of a stream before it creates anything, so a
    # custom resource next to its CRD fails on a fresh cluster: none here.
    t.check("BackupStorageLocation" not in kinds, "a custom resource in the manifest")
    # The embedded CRDs are exactly schema/crds/ (plus the component label).
    src = {}
    crd_dir = os.path.join(os.environ["CAIRN_SRCDIR"], "schema", "crds")
    for f in sorted(os.listdir(crd_dir)):
        for d in yaml.safe_load_all(open(os.path.join(crd_dir, f))):
            if d:
                src[d["metadata"]["name"]] = d
    for d in docs:
        if d["kind"] == "CustomResourceDefinition":
            want = json.loads(json.dumps(src[d["metadata"]["name"]]))
            want["metadata"]["labels"]["app.kubernetes.io/component"] = "crd"
            t.eq(d, want, "embedded CRD %s" % d["metadata"]["name"])

    crds = cairn_ok("install", "--dry-run", "-o", "yaml", "-l",
                    "app.kubernetes.io/component=crd").stdout
    t.eq([d["kind"] for d in yaml.safe_load_all(crds) if d],
         ["CustomResourceDefinition"] * 6, "objects selected by -l")
    r = kubectl(t, sim, "apply", "-f", "-", input=out)
    t.eq(r.stdout.count(" created"), len(docs), "objects created by one apply on a fresh cluster")
    r = kubectl(t, sim, "apply", "-f", "-", input=out)
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    t.eq(len(lines), len(docs), "one line per object")
    t.check(all(l.endswith(" unchanged") for l in lines),
            "second apply changed something: %s" % [l for l in lines if not l.endswith("unchanged")])

    ss = get(sim, "/apis/apps/v1/namespaces/cairn-system/statefulsets/cairn")
    t.eq(ss["spec"]["replicas"], 1, "replicas of a local-directory install")
    pod = ss["spec"]["template"]["spec"]
    c = pod["containers"][0]
    # Non-root (the image's uid), read-only, nothing to escalate with.
    t.eq(pod["securityContext"], {"runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                                  "seccompProfile": {"type": "RuntimeDefault"}}, "pod securityContext")
    t.eq(c["securityContext"], {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
         "server securityContext")
    # The hostPath directory is made root-owned by the kubelet: an init
    # container (root, CHOWN and DAC_OVERRIDE only) hands it to uid 65532.
    init = pod["initContainers"][0]
    t.eq(init["command"], ["chown", "-R", "65532:65532", "/var/lib/cairn/backups"], "init command")
    t.eq(init["securityContext"]["capabilities"], {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE"]},
         "init capabilities")
    t.eq(ss["metadata"]["labels"]["cairn.io/pod-security"], "privileged", "level label (hostPath)")
    # The web endpoint: the token from the Secret, mounted read-only.
    sec = doc(docs, "Secret")
    t.eq(sec["metadata"]["name"], "cairn-web-token", "token Secret")
    t.check(len(token_of(sec)) == 64, "a 256-bit token in hex: %r" % token_of(sec))
    tf = c["args"][c["args"].index("--web-token-file") + 1]
    tv = [v for v in pod["volumes"] if "secret" in v][0]
    t.eq(tv["secret"]["secretName"], "cairn-web-token", "token volume")
    t.check(any(m["name"] == tv["name"] and m.get("readOnly") and tf == m["mountPath"] + "/token"
                for m in c["volumeMounts"]), "--web-token-file %s is the mounted Secret" % tf)
    t.eq(doc(docs, "Service")["spec"]["clusterIP"], "None", "headless Service")
    t.eq(ss["spec"]["serviceName"], "cairn", "serviceName names the headless Service")
    t.eq(c["args"][0], "server", "container runs cairn server")
    t.eq(c["args"][c["args"].index("--listen") + 1], "0.0.0.0:8085",
         "the web endpoint the probes use is served on the container port")
    t.eq(c["ports"][0]["containerPort"], 8085, "container port")
    t.check({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            in c["env"], "POD_NAME from the downward API")
    t.eq(c["livenessProbe"]["httpGet"]["path"], "/healthz", "liveness probe")
    t.eq(c["readinessProbe"]["httpGet"]["path"], "/readyz", "readiness probe")
    t.eq(c["resources"], {"requests": {"cpu": "10m", "memory": "24Mi"},
                          "limits": {"memory": "64Mi"}}, "resources")
    t.eq(ss["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "journal",
         "journal on a per-replica volume")
    t.check(any(m["name"] == "journal" for m in c["volumeMounts"]), "journal mounted")
    t.eq(pod["serviceAccountName"], "cairn", "service account")
    # A server started as the StatefulSet starts it creates the location.
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    t.check("CAIRN_DEFAULT_LOCATION" in env, "the location spec is in the env: %s" % env)
    t.spawn([BIN] + c["args"][:c["args"].index("--listen")] +
            ["--kubeconfig", sim.kubeconfig, "--server-id", "cairn-0",
             "--journal", t.path("journal.db"), "--retry-period", "200ms"],
            env={"CAIRN_DEFAULT_LOCATION": env["CAIRN_DEFAULT_LOCATION"]},
            name="server")
    path = "/apis/cairn.io/v1/namespaces/cairn-system/backupstoragelocations/default"
    wait_for(lambda: get(sim, path) is not None, 30, "the server to create the default location")
    bsl = get(sim, path)
    t.eq(bsl["spec"]["provider"], "fs", "no --provider: local directory")
    t.eq(bsl["spec"]["config"]["path"], "/var/lib/cairn/backups", "fs path")
    t.check(bsl["spec"]["default"] is True, "default location")
    hp = [v for v in pod["volumes"] if "hostPath" in v]
    t.eq(hp[0]["hostPath"]["path"], "/var/lib/cairn/backups", "hostPath of the fs location")
    svc = get(sim, "/api/v1/namespaces/cairn-system/services/cairn")
    t.eq(svc["spec"]["ports"][0]["port"], 8085, "service port")
    role = get(sim, "/apis/rbac.authorization.k8s.io/v1/namespaces/cairn-system/roles/cairn")
    t.check(any("leases" in r["resources"] for r in role["rules"]), "leases in the Role")
    cr = get(sim, "/apis/rbac.authorization.k8s.io/v1/clusterroles/cairn")
    t.check(not any("delete" in r["verbs"] and "*" in r["resources"] for r in cr["rules"]),
            "no cluster-wide delete")
    t.check("DaemonSet" not in kinds, "no node-agent unless --use-node-agent")
    # More than one server on a local directory is refused, clearly.
    r = cairn("install", "--dry-run", "--replicas", "3")
    t.eq(r.returncode, 2, "--replicas 3 with fs refused")
    t.check("exactly 1 server" in r.stderr and "--provider s3" in r.stderr, r.stderr)
    # S3 (shared storage): two servers, and they pass "restricted".
    docs3 = [d for d in yaml.safe_load_all(cairn_ok("install", "--dry-run", "-o", "yaml", "--provider", "s3",
                                                    "--bucket", "b").stdout) if d]
    ss3 = doc(docs3, "StatefulSet")
    t.eq(ss3["spec"]["replicas"], 2, "replicas of an S3 install")
    t.eq(ss3["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"], True, "runAsNonRoot (s3)")
    t.check("initContainers" not in ss3["spec"]["template"]["spec"], "no init container for s3")
    t.eq(ss3["metadata"]["labels"]["cairn.io/pod-security"], "restricted", "level label (s3)")
    # --image and --image-pull-policy reach every container.
    docs4 = [d for d in yaml.safe_load_all(cairn_ok(
        "install", "--dry-run", "-o", "yaml", "--image", "registry.local/cairn:9", "--image-pull-policy",
        "Never", "--use-node-agent").stdout) if d]
    for d in docs4:
        if d["kind"] in ("StatefulSet", "DaemonSet"):
            ps = d["spec"]["template"]["spec"]
            for cc in ps.get("initContainers", []) + ps["containers"]:
                t.eq((cc["image"], cc["imagePullPolicy"]), ("registry.local/cairn:9", "Never"),
                     "%s %s image" % (d["kind"], cc["name"]))
    r = cairn("install", "--dry-run", "--image-pull-policy", "Sometimes")
    t.eq(r.returncode, 2, "bad --image-pull-policy refused")

    # --use-node-agent: a DaemonSet of cairn node-agent, one per node.
    out = cairn_ok("install", "--dry-run", "-o", "yaml", "--use-node-agent",
                   "--volume-dirs", "/var/lib/rancher/k3s/storage,/srv/vols").stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in docs]
    t.check(kinds.index("StatefulSet") < kinds.index("DaemonSet"), "DaemonSet after the servers")
    r = kubectl(t, sim, "apply", "-f", "-", input=out)
    t.check("daemonset.apps/cairn-node-agent created" in r.stdout, r.stdout)
    ds = get(sim, "/apis/apps/v1/namespaces/cairn-system/daemonsets/cairn-node-agent")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    t.eq(c["args"][0], "node-agent", "container runs cairn node-agent")
    t.check({"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
            in c["env"], "NODE_NAME from spec.nodeName")
    t.eq(c["args"][c["args"].index("--volume-root") + 1], "/host", "--volume-root")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    hostp = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    for d in ("/var/lib/rancher/k3s/storage", "/srv/vols"):
        t.check(any(hostp.get(n) == d and mounts.get(n) == "/host" + d for n in hostp),
                "host %s mounted at /host%s: %s %s" % (d, d, hostp, mounts))
    jr = c["args"][c["args"].index("--journal") + 1]
    t.check(any(jr.startswith(mounts[n] + "/") for n in hostp if n in mounts),
            "the node-agent journal %s is on a hostPath" % jr)
    t.eq(pod["serviceAccountName"], "cairn", "node-agent service account")
    # Privileged where it must be, said on the object; probed; on every node.
    t.eq(ds["metadata"]["labels"]["cairn.io/pod-security"], "privileged", "node-agent level label")
    t.check("hostPath" in ds["metadata"]["annotations"]["cairn.io/pod-security-reason"], "reason given")
    t.eq(pod["tolerations"], [{"operator": "Exists"}], "tolerates every taint")
    t.eq(c["livenessProbe"]["httpGet"]["path"], "/healthz", "node-agent liveness probe")
    t.eq(c["readinessProbe"]["httpGet"]["path"], "/readyz", "node-agent readiness probe")
    t.check("--web-token-file" in c["args"], "node-agent endpoint needs the token too")
    r = cairn("install", "--dry-run", "--use-node-agent", "--volume-dirs", "relative/dir")
    t.eq(r.returncode, 2, "relative --volume-dirs refused")


@case
def install_is_idempotent(t):
    sim = t.kubesim()
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--wait")
    created = [l for l in r.stdout.splitlines() if l.endswith(" created")]
    t.eq(len(created), 16, "objects created (%s)" % r.stdout)
    tok = token_of(get(sim, "/api/v1/namespaces/cairn-system/secrets/cairn-web-token"))
    crd = get(sim, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/schedules.cairn.io")
    t.check(any(c["type"] == "Established" and c["status"] == "True"
                for c in crd["status"]["conditions"]), "CRD established")
    seq = sim.requests()[-1]["seq"]
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--wait")
    lines = [l for l in r.stdout.splitlines() if l.endswith((" created", " configured",
                                                             " unchanged"))]
    t.eq(len(lines), 16, "one line per object")
    t.check(all(l.endswith(" unchanged") for l in lines), "second run changed: %s" % r.stdout)
    t.check("nothing changed" in r.stdout, "summary says nothing changed")
    writes = [q for q in sim.requests() if q["seq"] > seq and q["method"] in WRITES]
    t.eq(writes, [], "writes during the second install")
    t.eq(token_of(get(sim, "/api/v1/namespaces/cairn-system/secrets/cairn-web-token")), tok,
         "the token survives a re-run")
    # A change of one flag updates only that object, and kubectl agrees.
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--image-pull-policy", "Always")
    changed = [l for l in r.stdout.splitlines() if l.endswith(" configured")]
    t.eq(changed, ["statefulsets.apps/cairn configured"], "objects changed by --image-pull-policy")
    ss = get(sim, "/apis/apps/v1/namespaces/cairn-system/statefulsets/cairn")
    t.eq(ss["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "Always", "after the update")
    svc = get(sim, "/api/v1/namespaces/cairn-system/services/cairn")
    t.eq(svc["spec"].get("clusterIP"), "None", "headless Service")
    # A token of one's own (--web-token-file) replaces the Secret's, and the
    # pods roll (their template carries the token's hash).
    with open(t.path("token"), "w") as f:
        f.write("my-own-token\n")
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--image-pull-policy", "Always",
                 "--web-token-file", t.path("token"))
    changed = sorted(l for l in r.stdout.splitlines() if l.endswith(" configured"))
    t.eq(changed, ["secrets/cairn-web-token configured", "statefulsets.apps/cairn configured"],
         "objects changed by --web-token-file")
    t.eq(token_of(get(sim, "/api/v1/namespaces/cairn-system/secrets/cairn-web-token")), "my-own-token",
         "token from --web-token-file")


@case
def install_s3_with_credentials(t):
    sim = t.kubesim()
    cred = t.path("credentials")
    with open(cred, "w") as f:
        f.write("[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = s3cr3t\n")
    cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--namespace", "backup-ops",
             "--provider", "s3", "--bucket", "edge", "--prefix", "site-1",
             "--config", "region=eu-west-1,endpoint=http://127.0.0.1:9,forcePathStyle=true",
             "--credential-file", cred, "--image", "registry.local/cairn:test")
    sec = get(sim, "/api/v1/namespaces/backup-ops/secrets/cairn-credentials")
    t.eq(base64.b64decode(sec["data"]["cloud"]).decode(), open(cred).read(), "Secret content")
    bsl = get(sim, "/apis/cairn.io/v1/namespaces/backup-ops/backupstoragelocations/default")
    t.eq(bsl["spec"]["objectStorage"], {"bucket": "edge", "prefix": "site-1"}, "objectStorage")
    t.eq(bsl["spec"]["config"], {"region": "eu-west-1", "endpoint": "http://127.0.0.1:9",
                                 "forcePathStyle": "true"}, "config")
    t.eq(bsl["spec"]["credential"], {"name": "cairn-credentials", "key": "cloud"}, "credential")
    ss = get(sim, "/apis/apps/v1/namespaces/backup-ops/statefulsets/cairn")
    pod = ss["spec"]["template"]["spec"]
    t.eq(pod["containers"][0]["image"], "registry.local/cairn:test", "image")
    t.check("--namespace" in pod["containers"][0]["args"] and
            "backup-ops" in pod["containers"][0]["args"], "server namespace")
    t.check(not any("hostPath" in v for v in pod["volumes"]), "no hostPath for s3")
    t.check(pod["securityContext"].get("runAsNonRoot") is True, "non-root for s3")
    t.eq(ss["spec"]["replicas"], 2, "two servers on shared storage")
    rb = get(sim, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cairn")
    t.eq(rb["subjects"], [{"kind": "ServiceAccount", "name": "cairn",
                           "namespace": "backup-ops"}], "binding subject")
    # Bad usage is refused before anything is sent.
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--provider", "s3")
    t.eq(r.returncode, 2, "s3 without --bucket exit code")
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--credential-file", t.path("nope"))
    t.eq(r.returncode, 2, "missing credentials file exit code")


def http(port, path, token=None):
    """(status, body) of GET http://127.0.0.1:port/path."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def run_as_installed(t, sim, workload, name, token_file, **extra):
    """Start the container of workload as its pod would run it, on loopback."""
    c = workload["spec"]["template"]["spec"]["containers"][0]
    args = list(c["args"])
    port = free_port()
    args[args.index("--listen") + 1] = "127.0.0.1:%d" % port
    args[args.index("--web-token-file") + 1] = token_file
    args[args.index("--journal") + 1] = t.path(name + ".db")
    for k, v in extra.items():
        args += ["--" + k.replace("_", "-"), v]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    t.spawn([BIN] + args + ["--kubeconfig", sim.kubeconfig, "--retry-period", "200ms"], env=env, name=name)
    return port


@case
def web_endpoint_closed_by_default(t):
    """Installed, the servers' and node-agents' endpoints need the Secret's
    token for everything but the probes."""
    sim = t.kubesim()
    backups = t.mkdir("backups")
    cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--config", "path=" + backups, "--use-node-agent",
             "--wait")
    token = token_of(get(sim, "/api/v1/namespaces/cairn-system/secrets/cairn-web-token"))
    with open(t.path("token"), "w") as f:
        f.write(token)
    ss = get(sim, "/apis/apps/v1/namespaces/cairn-system/statefulsets/cairn")
    port = run_as_installed(t, sim, ss, "server", t.path("token"), server_id="cairn-0")
    wait_for(lambda: http(port, "/readyz")[0] == 200, 30, "the server's /readyz")
    t.eq(http(port, "/healthz")[0], 200, "/healthz without the token")
    for path in ("/status.json", "/metrics", "/status"):
        t.eq(http(port, path)[0], 401, "%s without the token" % path)
        t.eq(http(port, path, "wrong-token")[0], 401, "%s with a wrong token" % path)
    st, body = http(port, "/status.json", token)
    t.eq(st, 200, "/status.json with the token")
    t.eq(json.loads(body)["server"]["id"], "cairn-0", "status document")
    st, body = http(port, "/metrics", token)
    t.check(st == 200 and "cairn_" in body, "/metrics with the token: %d" % st)
    # The node-agent serves its probes and metrics the same way.
    ds = get(sim, "/apis/apps/v1/namespaces/cairn-system/daemonsets/cairn-node-agent")
    port = run_as_installed(t, sim, ds, "agent", t.path("token"), node_name="edge-1",
                            server_id="node-agent-edge-1")
    wait_for(lambda: http(port, "/readyz")[0] == 200, 30, "the node-agent's /readyz (its Lease held)")
    t.eq(http(port, "/healthz")[0], 200, "node-agent /healthz")
    t.eq(http(port, "/metrics")[0], 401, "node-agent /metrics without the token")
    t.eq(http(port, "/metrics", token)[0], 200, "node-agent /metrics with the token")


@case
def uninstall_keeps_backups(t):
    sim = t.kubesim()
    cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--wait", "--use-node-agent")
    b = {"apiVersion": "cairn.io/v1", "kind": "Backup",
         "metadata": {"name": "keep-me", "namespace": "cairn-system",
                      "finalizers": ["cairn.io/backup-cleanup"]}, "spec": {}}
    sim.ok("POST", "/apis/cairn.io/v1/namespaces/cairn-system/backups", b)
    r = cairn_ok("uninstall", "--kubeconfig", sim.kubeconfig)
    t.check("statefulsets.apps/cairn deleted" in r.stdout, "StatefulSet deleted: %s" % r.stdout)
    # It says what it keeps, and where the backups are.
    kept = r.stdout[r.stdout.index("Kept:"):]
    for what in ("the backups in storage, directory /var/lib/cairn/backups", "CRDs",
                 "PersistentVolumeClaims journal-cairn-N", "/var/lib/cairn/node-agent"):
        t.check(what in kept, "%r not said in %s" % (what, kept))
    for path in ("/api/v1/namespaces/cairn-system/secrets/cairn-web-token",
                 "/apis/apps/v1/namespaces/cairn-system/statefulsets/cairn",
                 "/apis/apps/v1/namespaces/cairn-system/daemonsets/cairn-node-agent",
                 "/api/v1/namespaces/cairn-system/services/cairn",
                 "/api/v1/namespaces/cairn-system/serviceaccounts/cairn",
                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/cairn",
                 "/apis/rbac.authorization.k8s.io/v1/namespaces/cairn-system/rolebindings/cairn",
                 "/apis/cairn.io/v1/namespaces/cairn-system/backupstoragelocations/default"):
        t.check(get(sim, path) is None, "%s still there" % path)
    t.check(get(sim, "/api/v1/namespaces/cairn-system") is not None, "namespace kept")
    t.check(get(sim, "/apis/cairn.io/v1/namespaces/cairn-system/backups/keep-me") is not None,
            "Backup kept")
    # Reinstall finds its Backups; then --purge removes everything.
    cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--wait")
    r = cairn_ok("uninstall", "--kubeconfig", sim.kubeconfig, "--purge")
    t.check(get(sim, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.cairn.io")
            is None, "CRD removed by --purge")
    ns = get(sim, "/api/v1/namespaces/cairn-system")
    t.check(ns is None or ns["status"].get("phase") == "Terminating", "namespace removed")
    r = cairn_ok("uninstall", "--kubeconfig", sim.kubeconfig)
    t.check("not found" in r.stdout, "second uninstall finds nothing")


main()
