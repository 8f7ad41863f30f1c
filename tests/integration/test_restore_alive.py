"""Restores that come back alive (issue 18), against the strict kubesim with
its namespace, pod, Job and PV controllers on (issue 16), everything done
by `cairn server`:

- a namespace (a StatefulSet with its bound PVC/PV pairs, one PV retained
  and one deleted with its claim, a Deployment, a CronJob's running Job and
  a completed one, a Succeeded Pod, a running Pod with a node and a token
  volume, a service-account token Secret the token controller would make
  and a hand-made one, a Service with a clusterIP) is backed up, the
  namespace deleted and the restore started at once: it waits out the
  termination and ends Completed with 0 errors; every PVC is Bound per
  kubesim's binder (none Lost, no PV Released); the Job is accepted, no
  finished Pod or Job and no controller-made token Secret comes back; the
  other objects compare equal; volume data is written only for the PV the
  restore created;
- the same backup restored with `--namespace-mappings app:app2` into the
  same cluster: the new claims bind to renamed PVs holding the restored
  data, and no data is written for a PV the restore leaves as it is;
- a Schedule whose name is 60 characters long: its backup (a 75-character
  name) and a restore of it, every label value shortened as Velero's
  GetValidName;
- a backup refuses an object nested deeper than a restore can read, by name.
"""
import hashlib
import inspect
import json
import os
import sys

from cairntest import BIN, SRCDIR, Kubesim, case, main, wait_for, cairn, CheckFailed

sys.path.insert(0, os.path.join(SRCDIR, "tests", "helpers"))
import restore_tarball as rt  # noqa: E402

NS = "cairn-system"
APP = "app"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = rt.FINAL
# the strict kubesim of issue 16: namespace, pod, Job and PV controllers, list-only kinds
STRICT = "namespace_delete_seconds" in inspect.signature(Kubesim.__init__).parameters


def label_value(name):
    """Velero's GetValidName."""
    if len(name) <= 63:
        return name
    return name[:57] + hashlib.sha256(name.encode()).hexdigest()[:6]


def nspath(ns, plural, name=None, group=""):
    base = rt.coll_path(group, "v1", plural).replace("/" + plural, "/namespaces/%s/%s" % (ns, plural))
    return base + ("/" + name if name else "")


class Cluster:
    """A strict kubesim, an fs location and a `cairn server`."""

    def __init__(self, t, controllers=True):
        self.t = t
        if controllers and not STRICT:
            t.skip("needs the strict kubesim of issue 16 (controllers, list-only kinds)")
        self.sim = t.kubesim(namespace_delete_seconds=3) if STRICT else t.kubesim()
        self.sim.install_crds(NS)
        self.store = t.mkdir("store")
        self.sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                                  "metadata": {"name": "default", "namespace": NS},
                                  "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                           "config": {"path": self.store}, "default": True}})
        self.srv = t.spawn([BIN, "server", "--kubeconfig", self.sim.kubeconfig, "--namespace", NS,
                            "--server-id", "s1", "--journal", t.path("journal.db"),
                            "--retry-period", "200ms", "--terminating-resource-timeout", "60s"],
                           name="server")

    def post(self, path, obj):
        return self.sim.ok("POST", path, obj)

    def get(self, path):
        st, obj, _ = self.sim.get(path)
        return obj if st == 200 else None

    def wait_final(self, coll, name, timeout=120):
        def final():
            o = self.get("%s/%s" % (coll, name))
            return o if o and o.get("status", {}).get("phase") in FINAL else None
        try:
            return wait_for(final, timeout, "%s %s to end" % (coll.rsplit("/", 1)[1], name),
                            interval=0.2)
        except CheckFailed:
            raise CheckFailed("%s did not end; server said: %s" % (name, self.srv.output()[-3000:]))

    def backup(self, name, spec):
        self.post(BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                       "metadata": {"name": name, "namespace": NS}, "spec": spec})
        return self.wait_final(BK, name)

    def restore(self, name, spec, timeout=120):
        self.post(RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                       "metadata": {"name": name, "namespace": NS}, "spec": spec})
        return self.wait_final(RS, name, timeout)


def volume_dir(t, name, text):
    d = t.mkdir("vol-" + name)
    with open(os.path.join(d, "data.txt"), "w") as f:
        f.write(text)
    return d


def make_app(c, ns=APP, dirs=None):
    """The application of the acceptance test in namespace ns; returns the
    objects that must come back as they were ([(group, plural, obj)]) and
    the PV directories."""
    t = c.t
    c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": ns, "labels": {"team": "blue"}}})
    same = []

    def add(group, plural, obj):
        return c.post(nspath(ns, plural, group=group), obj)
    same.append(("", "serviceaccounts", add("", "serviceaccounts", {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci"}})))
    same.append(("", "configmaps", add("", "configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
        "data": {"mode": "prod"}})))
    # token Secrets: one the token controller made (skipped), one by hand
    add("", "secrets", {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                        "metadata": {"name": "ci-token-x7k2p", "annotations": {
                            "kubernetes.io/service-account.name": "ci",
                            "kubernetes.io/service-account.uid": "uid-1"}},
                        "data": {"token": "dG9rZW4=", "ca.crt": "Y2E=", "namespace": "YXBw"}})
    add("", "secrets", {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                        "metadata": {"name": "ci-deploy-key", "annotations": {
                            "kubernetes.io/service-account.name": "ci",
                            "kubernetes.io/service-account.uid": "uid-1"}},
                        "data": {"token": "dG9rZW4=", "ca.crt": "Y2E=", "namespace": "YXBw"}})
    # the StatefulSet's claims, bound by the binder to PVs made for them:
    # db-0's volume is retained, db-1's deleted with its claim
    dirs = dirs if dirs is not None else {}
    for i, policy in ((0, "Retain"), (1, "Delete")):
        pv = "pv-%s-db-%d" % (ns, i)
        dirs[pv] = volume_dir(t, pv, "data of db-%d in %s\n" % (i, ns))
        c.post("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv, "annotations": {"pv.kubernetes.io/provisioned-by": "rancher.io/local-path"}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": policy, "storageClassName": "local-path",
                     "hostPath": {"path": dirs[pv]},
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": ns, "name": "data-db-%d" % i}}})
        add("", "persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-%d" % i, "labels": {"app": "db"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                     "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for(lambda: all(c.get(nspath(ns, "persistentvolumeclaims", "data-db-%d" % i))
                         .get("status", {}).get("phase") == "Bound" for i in (0, 1)),
             20, "claims bound by kubesim's binder")
    same.append(("apps", "statefulsets", add("apps", "statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                     "resources": {"requests": {"storage": "1Gi"}}}}]}})))
    same.append(("apps", "deployments", add("apps", "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})))
    cj = add("batch", "cronjobs", {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "j", "image": "busybox"}]}}}}}})
    same.append(("batch", "cronjobs", cj))
    owner = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
              "uid": cj["metadata"]["uid"], "controller": True}]
    for jname in ("nightly-28000000", "nightly-27999999"):
        add("batch", "jobs", {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": jname, "ownerReferences": owner},
            "spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                           "containers": [{"name": "j", "image": "busybox"}]}}}})
    done = c.get(nspath(ns, "jobs", "nightly-27999999", group="batch"))
    done["status"] = {"startTime": "2024-01-01T03:00:00Z", "completionTime": "2024-01-01T03:01:00Z",
                      "succeeded": 1}
    c.sim.ok("PUT", nspath(ns, "jobs", "nightly-27999999", group="batch") + "/status", done)
    # pods: a finished one, a running one with a node and a token volume
    for pname, phase in (("migrate", "Succeeded"), ("tool", "Running")):
        p = add("", "pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pname},
            "spec": {"nodeName": "node-1", "priority": 0, "serviceAccountName": "ci",
                     "restartPolicy": "Never" if pname == "migrate" else "Always",
                     "containers": [{"name": "c", "image": "busybox", "volumeMounts": [
                         {"name": "kube-api-access-q8zrt", "mountPath":
                          "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}]}],
                     "volumes": [{"name": "kube-api-access-q8zrt", "projected": {"sources": [
                         {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                         {"configMap": {"name": "kube-root-ca.crt",
                                        "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]}})
        p["status"] = {"phase": phase}
        c.sim.ok("PUT", nspath(ns, "pods", pname) + "/status", p)
    add("", "services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                         "spec": {"type": "ClusterIP", "clusterIP": "10.43.0.10",
                                  "clusterIPs": ["10.43.0.10"], "selector": {"app": "web"},
                                  "ports": [{"name": "http", "port": 80, "targetPort": 80,
                                             "protocol": "TCP"}]}})
    return same, dirs


def check_same(t, c, same, ns):
    bad = []
    for group, plural, obj in same:
        got = c.get(nspath(ns, plural, obj["metadata"]["name"], group=group))
        if got is None:
            bad.append("missing %s %s" % (plural, obj["metadata"]["name"]))
            continue
        want = rt.normalize(obj)
        want["metadata"]["namespace"] = ns
        have = rt.normalize(got)
        if want != have:
            bad.append("%s differs:\n want %s\n have %s" % (
                plural, json.dumps(want, sort_keys=True), json.dumps(have, sort_keys=True)))
    t.check(not bad, "%d objects wrong: %s" % (len(bad), "\n".join(bad[:4])))


def check_volumes(t, c, ns):
    """Every claim of ns Bound per the binder; no PV Released, none Lost."""
    def settled():
        claims = c.get(nspath(ns, "persistentvolumeclaims"))["items"]
        return claims if claims and all(x.get("status", {}).get("phase") == "Bound"
                                        for x in claims) else None
    try:
        claims = wait_for(settled, 20, "claims of %s Bound" % ns, interval=0.2)
    except CheckFailed:
        claims = c.get(nspath(ns, "persistentvolumeclaims"))["items"]
        pvs = c.get("/api/v1/persistentvolumes")["items"]
        raise CheckFailed("claims of %s: %s; volumes: %s" % (
            ns, [(x["metadata"]["name"], x.get("status", {}).get("phase"),
                  x["spec"].get("volumeName")) for x in claims],
            [(p["metadata"]["name"], p.get("status", {}).get("phase"),
              p["spec"].get("claimRef")) for p in pvs]))
    pvs = c.get("/api/v1/persistentvolumes")["items"]
    t.check(not [p for p in pvs if p.get("status", {}).get("phase") in ("Released", "Failed")],
            "volumes Released or Failed: %s" % [(p["metadata"]["name"], p["status"]) for p in pvs])
    return claims, {p["metadata"]["name"]: p for p in pvs}


@case
def restore_into_a_namespace_being_deleted(t):
    c = Cluster(t)
    same, dirs = make_app(c)
    b = c.backup("b1", {"includedNamespaces": [APP]})
    t.eq(b["status"]["phase"], "Completed", "backup phase (%s)" % b["status"])
    c.sim.ok("DELETE", "/api/v1/namespaces/" + APP)
    t.eq(c.get("/api/v1/namespaces/" + APP)["status"]["phase"], "Terminating", "namespace terminating")
    r = c.restore("r1", {"backupName": "b1"})
    st = r["status"]
    t.eq(st["phase"], "Completed", "restore phase (%s)" % st)
    t.eq(st.get("errors", 0), 0, "errors")
    logs = cairn("restore", "logs", "r1", "--kubeconfig", c.sim.kubeconfig, "--namespace", NS).stdout
    t.check("waiting for namespace app to finish being deleted" in logs, "the wait is logged: %s"
            % logs[-1500:])
    t.check(c.get("/api/v1/namespaces/" + APP)["metadata"]["labels"].get("team") == "blue",
            "namespace made again from the backed-up one")
    claims, pvs = check_volumes(t, c, APP)
    t.eq(sorted((x["metadata"]["name"], x["spec"]["volumeName"]) for x in claims),
         [("data-db-0", "pv-app-db-0"), ("data-db-1", "pv-app-db-1")], "claims and their volumes")
    # the retained volume kept its data in place; the deleted one was made
    # again by this restore, its data restored next to the old path
    t.eq(pvs["pv-app-db-0"]["spec"]["hostPath"]["path"], dirs["pv-app-db-0"], "retained volume path")
    t.check(not os.path.exists(dirs["pv-app-db-0"] + "-r1"), "data written for a volume not created")
    p1 = pvs["pv-app-db-1"]["spec"]["hostPath"]["path"]
    t.eq(p1, dirs["pv-app-db-1"] + "-r1", "recreated volume points at its restored data")
    with open(os.path.join(p1, "data.txt")) as f:
        t.eq(f.read(), "data of db-1 in app\n", "restored volume data")
    # workloads
    job = c.get(nspath(APP, "jobs", "nightly-28000000", group="batch"))
    t.check(job is not None, "the running Job is restored (accepted by the batch strategy)")
    t.check(job["spec"]["selector"]["matchLabels"].get("batch.kubernetes.io/controller-uid")
            == job["metadata"]["uid"], "its selector is generated for its new uid")
    t.check(c.get(nspath(APP, "jobs", "nightly-27999999", group="batch")) is None,
            "a completed Job is not restored")
    t.check(c.get(nspath(APP, "pods", "migrate")) is None, "a Succeeded pod is not restored")
    tool = c.get(nspath(APP, "pods", "tool"))
    t.check(tool is not None, "the running pod is restored")
    t.check("nodeName" not in tool["spec"], "it comes back without its node: %s" % tool["spec"])
    t.check(not any(v["name"] == "kube-api-access-q8zrt" for v in tool["spec"].get("volumes", [])),
            "the old token volume is not restored: %s" % tool["spec"].get("volumes"))
    t.check(c.get(nspath(APP, "secrets", "ci-token-x7k2p")) is None,
            "the token controller's Secret is not restored")
    key = c.get(nspath(APP, "secrets", "ci-deploy-key"))
    t.check(key is not None and "token" not in key.get("data", {}) and
            "kubernetes.io/service-account.uid" not in key["metadata"].get("annotations", {}),
            "a hand-made token Secret comes back without its token: %s" % key)
    svc = c.get(nspath(APP, "services", "web"))
    t.check(svc["spec"].get("clusterIP") != "10.43.0.10", "the Service gets a new clusterIP: %s"
            % svc["spec"])
    check_same(t, c, same, APP)
    rl = rt.read_gz_json(c.store, "restores/r1/restore-r1-resource-list.json.gz")
    t.check("app/migrate(skipped)" in rl.get("v1/Pod", []), "resource list: %s" % rl.get("v1/Pod"))


@case
def mapping_into_the_same_cluster(t):
    c = Cluster(t)
    same, dirs = make_app(c)
    # a namespace left as it is by the restore: its volume is not touched
    c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "keep"}})
    kd = volume_dir(t, "pv-keep", "kept\n")
    c.post("/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-keep"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": kd},
                 "claimRef": {"namespace": "keep", "name": "data"}}})
    c.post(nspath("keep", "persistentvolumeclaims"), {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for(lambda: c.get(nspath("keep", "persistentvolumeclaims", "data")).get("status", {})
             .get("phase") == "Bound", 20, "keep/data bound")
    b = c.backup("b1", {"includedNamespaces": [APP, "keep"]})
    t.eq(b["status"]["phase"], "Completed", "backup phase (%s)" % b["status"])
    r = cairn("restore", "create", "r2", "--from-backup", "b1", "--namespace-mappings", "app:app2",
              "--wait", "--kubeconfig", c.sim.kubeconfig, "--namespace", NS, timeout=180)
    st = c.get(RS + "/r2")["status"]
    t.eq(st["phase"], "Completed", "restore phase (%s; %s)" % (st, r.stdout[-800:]))
    t.eq(st.get("errors", 0), 0, "errors")
    claims, pvs = check_volumes(t, c, "app2")
    for x in claims:
        vn = x["spec"]["volumeName"]
        pv = pvs[vn]
        orig = pv["metadata"].get("annotations", {}).get("cairn.io/original-pv-name")
        t.check(vn.startswith("cairn-clone-") and orig in ("pv-app-db-0", "pv-app-db-1"),
                "app2/%s is bound to a renamed volume: %s (%s)" % (x["metadata"]["name"], vn, orig))
        t.eq(pv["spec"]["claimRef"]["namespace"], "app2", "claimRef follows the mapping")
        path = pv["spec"]["hostPath"]["path"]
        t.eq(path, dirs[orig] + "-r2", "%s holds its own copy of the data" % vn)
        with open(os.path.join(path, "data.txt")) as f:
            t.eq(f.read(), "data of %s in app\n" % orig[len("pv-app-"):], "data of %s" % vn)
    # the originals are still bound to the claims of app
    check_volumes(t, c, APP)
    t.eq(pvs["pv-app-db-0"]["spec"]["claimRef"]["namespace"], APP, "original claimRef")
    # keep's volume exists: left as it is, no data written for it
    t.eq(pvs["pv-keep"]["spec"]["hostPath"]["path"], kd, "kept volume untouched")
    t.check(not os.path.exists(kd + "-r2"), "data written for a volume the restore skipped")
    check_same(t, c, same, "app2")


@case
def schedule_with_a_60_character_name(t):
    c = Cluster(t, controllers=False)
    c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "demo"}})
    c.post(nspath("demo", "configmaps"), {"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "c1"}, "data": {"a": "b"}})
    sched = "nightly-backup-of-the-demo-namespace-for-the-edge-site-no-42"
    t.eq(len(sched), 60, "schedule name length")
    r = cairn("schedule", "create", sched, "--schedule", "@every 1h", "--include-namespaces", "demo",
              "--kubeconfig", c.sim.kubeconfig, "--namespace", NS)
    t.eq(r.returncode, 0, "schedule create: %s" % r.stderr)

    def first():
        items = c.get(BK)["items"]
        return items[0] if items else None
    b = wait_for(first, 20, "the schedule's first backup")
    name = b["metadata"]["name"]
    t.eq(len(name), 75, "backup name <schedule>-<timestamp>")
    t.eq(b["metadata"]["labels"]["cairn.io/schedule-name"], sched, "a 60-character label value")
    b = c.wait_final(BK, name)
    t.eq(b["status"]["phase"], "Completed", "backup phase (%s)" % b["status"])
    d = cairn("schedule", "describe", sched, "--kubeconfig", c.sim.kubeconfig, "--namespace", NS)
    t.check(name in d.stdout, "schedule describe lists its backup: %s" % d.stdout)
    c.sim.ok("DELETE", "/api/v1/namespaces/demo/configmaps/c1")
    rname = name + "-restore"
    r = c.restore(rname, {"backupName": name})
    t.eq(r["status"]["phase"], "Completed", "restore phase (%s)" % r["status"])
    cm = c.get(nspath("demo", "configmaps", "c1"))
    t.eq(cm["data"], {"a": "b"}, "restored")
    labels = cm["metadata"]["labels"]
    t.eq(labels["cairn.io/backup-name"], label_value(name), "backup label shortened as Velero's")
    t.eq(labels["cairn.io/restore-name"], label_value(rname), "restore label shortened as Velero's")
    t.check(all(len(v) <= 63 for v in labels.values()), "label values: %s" % labels)


@case
def backup_refuses_what_a_restore_cannot_read(t):
    c = Cluster(t, controllers=False)
    c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "deep"}})
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "trees.example.io"},
           "spec": {"group": "example.io", "scope": "Namespaced",
                    "names": {"plural": "trees", "singular": "tree", "kind": "Tree", "listKind": "TreeList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}
    c.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    wait_for(lambda: c.sim.get("/apis/example.io/v1")[0] == 200, 10, "CRD served")
    for name, depth in (("at-limit", 512), ("too-deep", 513)):
        spec = []
        for _ in range(depth - 2):
            spec = [spec]
        c.post(nspath("deep", "trees", group="example.io"), {"apiVersion": "example.io/v1", "kind": "Tree", "metadata": {"name": name},
                "spec": spec})
    b = c.backup("b-deep", {"includedNamespaces": ["deep"]})
    t.eq(b["status"]["phase"], "PartiallyFailed", "backup phase (%s)" % b["status"])
    res = rt.read_gz_json(c.store, "backups/b-deep/b-deep-results.gz")
    t.check("trees deep/too-deep: not backed up: it nests deeper than 512 levels" in json.dumps(res),
            "the refused object is named: %s" % json.dumps(res)[:600])
    c.sim.ok("DELETE", "/api/v1/namespaces/deep")
    r = c.restore("r-deep", {"backupName": "b-deep"})
    t.eq(r["status"]["phase"], "Completed", "restore phase (%s)" % r["status"])
    got = c.get("/apis/example.io/v1/namespaces/deep/trees")["items"]
    t.eq([o["metadata"]["name"] for o in got], ["at-limit"], "what was backed up is restored")


@case
def kinds_without_a_create_verb_are_skipped(t):
    """List-only kinds a backup of a real cluster holds (componentstatuses,
    metrics.k8s.io pods) are skipped with one log line, never POSTed."""
    c = Cluster(t)
    ents = [("metadata/version", b"1.1.0\n")]
    for path, obj in (
            ("resources/componentstatuses/v1-preferredversion/cluster/scheduler.json",
             {"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "scheduler"},
              "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}),
            ("resources/pods.metrics.k8s.io/v1beta1-preferredversion/namespaces/app/web-1.json",
             {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
              "metadata": {"name": "web-1", "namespace": "app"}, "containers": []}),
            ("resources/configmaps/v1-preferredversion/namespaces/app/c1.json",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "namespace": "app"},
              "data": {"a": "b"}})):
        ents.append((path, json.dumps(obj).encode()))
    rt.install_backup(c.sim, c.store, "lo", rt.tar_bytes(ents), ns=NS)
    before = len(c.sim.requests())
    r = c.restore("r-lo", {"backupName": "lo", "includeClusterResources": True})
    t.eq(r["status"]["phase"], "Completed", "restore phase (%s)" % r["status"])
    t.eq(r["status"].get("errors", 0), 0, "errors")
    logs = cairn("restore", "logs", "r-lo", "--kubeconfig", c.sim.kubeconfig, "--namespace", NS).stdout
    for res in ("componentstatuses", "pods.metrics.k8s.io"):
        t.check("not restoring the 1 items of %s: the cluster does not allow creating them" % res
                in logs, "%s skip logged: %s" % (res, logs[-1500:]))
    posts = [e["path"] for e in c.sim.requests()[before:] if e["method"] == "POST"]
    t.check(not [p for p in posts if "componentstatuses" in p or "metrics.k8s.io" in p],
            "a list-only kind was POSTed: %s" % posts)
    t.eq(c.get(nspath("app", "configmaps", "c1"))["data"], {"a": "b"}, "the rest is restored")
    rl = rt.read_gz_json(c.store, "restores/r-lo/restore-r-lo-resource-list.json.gz")
    t.eq(rl.get("v1/ComponentStatus"), ["scheduler(skipped)"], "resource list: %s" % rl)


main()
