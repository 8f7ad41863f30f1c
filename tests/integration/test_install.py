"""cairn install / uninstall against kubesim, checked with the real kubectl.

- the --dry-run -o yaml manifest applies in one `kubectl apply -f -` on a
  fresh cluster (it holds no custom resource: a server started as the
  StatefulSet runs it creates the default location) and a second apply
  reports every object unchanged;
- `cairn install` itself creates everything, and a second run writes
  nothing (only GETs in kubesim's request log) and says unchanged;
- the objects carry what the issue asks: StatefulSet of N replicas running
  `cairn server` with POD_NAME from the downward API, journal on a
  per-replica volume, probes, small resources, Service, least-privilege
  RBAC, credentials Secret and default BackupStorageLocation;
- uninstall removes what install made and keeps CRDs, namespace and
  Backups; --purge removes those too, after stripping the cleanup
  finalizers so storage is never cleaned.
"""
import base64
import json
import os
import subprocess

import yaml

from cairntest import BIN, case, main, cairn, wait_for

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


@case
def dry_run_manifest_applies_with_kubectl(t):
    sim = t.kubesim()
    out = cairn_ok("install", "--dry-run", "-o", "yaml", "--replicas", "3").stdout
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
    t.eq(ss["spec"]["replicas"], 3, "replicas")
    pod = ss["spec"]["template"]["spec"]
    c = pod["containers"][0]
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
    r = cairn("install", "--dry-run", "--use-node-agent", "--volume-dirs", "relative/dir")
    t.eq(r.returncode, 2, "relative --volume-dirs refused")


@case
def install_is_idempotent(t):
    sim = t.kubesim()
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--wait")
    created = [l for l in r.stdout.splitlines() if l.endswith(" created")]
    t.eq(len(created), 15, "objects created (%s)" % r.stdout)
    crd = get(sim, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/schedules.cairn.io")
    t.check(any(c["type"] == "Established" and c["status"] == "True"
                for c in crd["status"]["conditions"]), "CRD established")
    seq = sim.requests()[-1]["seq"]
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--wait")
    lines = [l for l in r.stdout.splitlines() if l.endswith((" created", " configured",
                                                             " unchanged"))]
    t.eq(len(lines), 15, "one line per object")
    t.check(all(l.endswith(" unchanged") for l in lines), "second run changed: %s" % r.stdout)
    t.check("nothing changed" in r.stdout, "summary says nothing changed")
    writes = [q for q in sim.requests() if q["seq"] > seq and q["method"] in WRITES]
    t.eq(writes, [], "writes during the second install")
    # A change of one flag updates only that object, and kubectl agrees.
    r = cairn_ok("install", "--kubeconfig", sim.kubeconfig, "--replicas", "1")
    changed = [l for l in r.stdout.splitlines() if l.endswith(" configured")]
    t.eq(changed, ["statefulsets.apps/cairn configured"], "objects changed by --replicas 1")
    ss = get(sim, "/apis/apps/v1/namespaces/cairn-system/statefulsets/cairn")
    t.eq(ss["spec"]["replicas"], 1, "replicas after the update")
    svc = get(sim, "/api/v1/namespaces/cairn-system/services/cairn")
    t.check(svc["spec"].get("clusterIP"), "clusterIP kept by the merge")


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
    rb = get(sim, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cairn")
    t.eq(rb["subjects"], [{"kind": "ServiceAccount", "name": "cairn",
                           "namespace": "backup-ops"}], "binding subject")
    # Bad usage is refused before anything is sent.
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--provider", "s3")
    t.eq(r.returncode, 2, "s3 without --bucket exit code")
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--credential-file", t.path("nope"))
    t.eq(r.returncode, 2, "missing credentials file exit code")


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
    for path in ("/apis/apps/v1/namespaces/cairn-system/statefulsets/cairn",
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
