"""Restores end to end (issue 9): a realistic application set read out of one
kubesim into a Velero-layout tarball, restored by the restore controller into
a fresh kubesim and compared object by object; namespace mapping, filters,
both existing-resource policies, restoreStatus, validation; hostile archives;
kill -9 in the middle and resume."""
import base64
import gzip
import hashlib
import json
import os
import signal
import sqlite3
import sys
import tarfile
import time

from cairntest import case, main, wait_for, cairn, BUILDDIR, SRCDIR, CheckFailed

sys.path.insert(0, os.path.join(SRCDIR, "tests", "helpers"))
import restore_tarball as rt  # noqa: E402

RUNNER = os.path.join(BUILDDIR, "tests", "helpers", "restore_runner")
NS = "cairn-system"

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io"},
    "spec": {"group": "example.io", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                       "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


def post(sim, group, version, plural, obj, ns=None):
    base = rt.coll_path(group, version, plural)
    if ns:
        base = base.replace("/" + plural, "/namespaces/%s/%s" % (ns, plural))
    return sim.ok("POST", base, obj)


def make_app(sim):
    """A realistic application set in two labelled namespaces."""
    for ns, team in (("app1", "blue"), ("app2", "green")):
        post(sim, "", "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": ns, "labels": {"team": team},
                                                        "annotations": {"owner": "ops@example.com"}}})
    post(sim, "apiextensions.k8s.io", "v1", "customresourcedefinitions", WIDGET_CRD)
    wait_for(lambda: sim.get("/apis/example.io/v1")[0] == 200, 10, "widget CRD served")
    blob = bytes(range(256)) * 4
    for ns in ("app1", "app2"):
        post(sim, "", "v1", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "settings", "labels": {"tier": "web"},
                          "annotations": {"checksum": "abc"}},
             "data": {"mode": "prod", "nested.json": json.dumps({"a": [1, 2]})}}, ns)
        post(sim, "", "v1", "secrets", {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "creds", "labels": {"tier": "db"}}, "type": "Opaque",
             "data": {"bin": base64.b64encode(blob).decode(),
                      "password": base64.b64encode(b"s3cr\x00t").decode()}}, ns)
        post(sim, "", "v1", "serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": "runner"}}, ns)
        post(sim, "rbac.authorization.k8s.io", "v1", "roles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}, ns)
        post(sim, "rbac.authorization.k8s.io", "v1", "rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": ns}]}, ns)
        dep = post(sim, "apps", "v1", "deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"tier": "web"},
                         "annotations": {"deployment.kubernetes.io/revision": "3"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"serviceAccountName": "runner",
                                           "containers": [{"name": "web", "image": "nginx:1.27",
                                                           "ports": [{"containerPort": 80}]}]}}}}, ns)
        post(sim, "apps", "v1", "statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "labels": {"tier": "db"}},
            "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"accessModes": ["ReadWriteOnce"],
                                                        "resources": {"requests": {"storage": "1Gi"}}}}]}}, ns)
        post(sim, "", "v1", "services", {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "web", "labels": {"tier": "web"}},
             "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.%d" % (10 if ns == "app1" else 11),
                      "selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"}]}}, ns)
        post(sim, "", "v1", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "web-owned", "ownerReferences": [{
                 "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                 "uid": dep["metadata"]["uid"], "controller": True}]},
             "data": {"k": "v"}}, ns)
        post(sim, "", "v1", "persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-" + ns,
                     "resources": {"requests": {"storage": "1Gi"}}}}, ns)
        post(sim, "", "v1", "persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-" + ns},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/data/" + ns},
                     "claimRef": {"namespace": ns, "name": "data", "kind": "PersistentVolumeClaim",
                                  "apiVersion": "v1", "uid": "old-uid"}}})
        for i in range(3):
            w = post(sim, "example.io", "v1", "widgets", {
                "apiVersion": "example.io/v1", "kind": "Widget",
                "metadata": {"name": "w%d" % i, "labels": {"tier": "web"}},
                "spec": {"size": i, "colour": "red"}}, ns)
            w["status"] = {"state": "Ready", "observed": i}
            sim.ok("PUT", "/apis/example.io/v1/namespaces/%s/widgets/w%d/status" % (ns, i), w)
    post(sim, "rbac.authorization.k8s.io", "v1", "clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widget-admin", "labels": {"tier": "web"}},
        "rules": [{"apiGroups": ["example.io"], "resources": ["widgets"], "verbs": ["*"]}]})
    post(sim, "rbac.authorization.k8s.io", "v1", "clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "widget-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "widget-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "app1"}]})


APP_RESOURCES = rt.RESOURCES + [("example.io", "v1", "widgets", True)]


def backed_up_items(src):
    return rt.dump(src, APP_RESOURCES)


class World:
    """A fresh target kubesim with cairn's CRDs, an fs store and a runner."""

    def __init__(self, t, name="target", runner=True, store=None):
        self.t = t
        self.sim = t.kubesim(name=name)
        self.sim.install_crds(NS)
        self.store = store or t.mkdir(name + "-store")
        self.journal = t.path(name + "-journal.db")
        self.proc = None
        if runner:
            self.start()

    def start(self, server_id="srv-a", workers=8):
        self.proc = self.t.spawn([RUNNER, "--kubeconfig", self.sim.kubeconfig, "--namespace", NS,
                                  "--journal", self.journal, "--server-id", server_id,
                                  "--restore-workers", workers, "--period-ms", 100],
                                 name="runner")
        return self.proc

    def backup(self, name, tarball, phase="Completed", rlist="auto", parts=None):
        rt.install_backup(self.sim, self.store, name, tarball, phase=phase, rlist=rlist,
                          parts=parts)

    def restore(self, name, spec, timeout=60):
        rt.create_restore(self.sim, name, spec)
        return self.wait(name, timeout)

    def wait(self, name, timeout=60):
        def final():
            r = rt.get_restore(self.sim, name)
            return r if r.get("status", {}).get("phase") in rt.FINAL else None
        try:
            return wait_for(final, timeout, "restore %s to end" % name, interval=0.1)
        except CheckFailed:
            out = self.proc.output()[-3000:] if self.proc else ""
            raise CheckFailed("restore %s did not end; runner said: %s" % (name, out))

    def results(self, name):
        return rt.read_gz_json(self.store, "restores/%s/restore-%s-results.gz" % (name, name))

    def get(self, path):
        st, obj, _ = self.sim.get(path)
        return obj if st == 200 else None


def obj_path(group, version, plural, obj, ns_map=None):
    ns = obj["metadata"].get("namespace")
    name = obj["metadata"]["name"]
    if ns_map and ns:
        ns = ns_map.get(ns, ns)
    if plural == "namespaces" and ns_map:
        name = ns_map.get(name, name)
    base = rt.coll_path(group, version, plural)
    if ns:
        base = base.replace("/" + plural, "/namespaces/%s/%s" % (ns, plural))
    return base + "/" + name


def compare_all(t, w, items, ns_map=None, keep_status=()):
    bad = []
    for group, version, plural, obj in items:
        path = obj_path(group, version, plural, obj, ns_map)
        got = w.get(path)
        if got is None:
            bad.append("missing " + path)
            continue
        want = rt.normalize(obj, keep_status=plural in keep_status)
        if ns_map:
            want = json.loads(json.dumps(want).replace('"namespace": "app1"', '"namespace": "%s"'
                                                       % ns_map.get("app1", "app1")))
            if plural == "namespaces":
                want["metadata"]["name"] = ns_map.get(want["metadata"]["name"],
                                                      want["metadata"]["name"])
        have = rt.normalize(got, keep_status=plural in keep_status)
        if want != have:
            bad.append("%s differs:\n want %s\n have %s" % (path, json.dumps(want, sort_keys=True),
                                                             json.dumps(have, sort_keys=True)))
        lab = got["metadata"].get("labels", {})
        if lab.get("cairn.io/restore-name") is None or lab.get("cairn.io/backup-name") is None:
            bad.append("%s lacks the restore labels" % path)
    t.check(not bad, "%d objects wrong: %s" % (len(bad), "\n".join(bad[:5])))


def without_volume_names(items):
    """The items as a restore without their PVs makes them into a cluster
    that lacks those PVs: each PVC loses spec.volumeName and is
    provisioned anew (issue 18; Velero drops it for PVs it does not
    restore)."""
    out = []
    for g, v, p, o in items:
        if p == "persistentvolumeclaims":
            o = json.loads(json.dumps(o))
            o["spec"].pop("volumeName", None)
        out.append((g, v, p, o))
    return out


def source_with_app(t):
    src = t.kubesim(name="source")
    make_app(src)
    return src, backed_up_items(src)


@case
def round_trip_fresh_cluster(t):
    src, items = source_with_app(t)
    t.check(len(items) >= 33, "app set has %d objects" % len(items))
    w = World(t)
    w.backup("b1", rt.tar_bytes(rt.entries_for(items)))
    r = w.restore("r1", {"backupName": "b1"})
    t.eq(r["status"]["phase"], "Completed", "phase (results: %s)" % r["status"])
    t.eq(r["status"]["progress"]["totalItems"], len(items), "totalItems")
    t.eq(r["status"]["progress"]["itemsRestored"], len(items), "itemsRestored")
    t.eq(r["status"]["claim"]["holder"], "srv-a", "claim holder")
    compare_all(t, w, items)
    # status dropped without restoreStatus
    wid = w.get("/apis/example.io/v1/namespaces/app1/widgets/w1")
    t.check("status" not in wid or not wid["status"], "widget status restored without restoreStatus")
    # Velero's file names under restores/<name>/
    res = w.results("r1")
    t.check(set(res) == {"warnings", "errors"}, "results keys %s" % list(res))
    t.check(set(res["errors"]) == {"velero", "cluster", "namespaces"}, "results shape")
    rl = rt.read_gz_json(w.store, "restores/r1/restore-r1-resource-list.json.gz")
    t.check("apps/v1/Deployment" in rl and "app1/web(created)" in rl["apps/v1/Deployment"],
            "resource list %s" % list(rl)[:5])
    t.check(os.path.getsize(os.path.join(w.store, "restores/r1/restore-r1-logs.gz")) > 0, "logs")
    # order: CRD before namespaces before PVs ... before deployments, widgets last-ish
    posts = [e["path"] for e in w.sim.requests() if e["method"] == "POST" and e["status"] == 201
             and "/cairn.io/" not in e["path"]]
    def first(sub):
        return min(i for i, p in enumerate(posts) if p.endswith(sub))
    t.check(first("/customresourcedefinitions") < first("/namespaces")
            < first("/persistentvolumes") < first("/persistentvolumeclaims")
            < first("/serviceaccounts") < first("/secrets") < first("/configmaps")
            < first("/services") < first("/deployments") < first("/statefulsets")
            < first("/widgets"), "create order: %s" % posts[:12])


@case
def legacy_only_archive_and_preferred_wins(t):
    src, items = source_with_app(t)
    w = World(t)
    w.backup("legacy", rt.tar_bytes(rt.entries_for(items, preferred=False)))
    r = w.restore("r-legacy", {"backupName": "legacy"})
    t.eq(r["status"]["phase"], "Completed", "legacy-only phase")
    compare_all(t, w, items)
    # preferred beats legacy when both exist and differ
    cm = json.loads(json.dumps([o for g, v, p, o in items if p == "configmaps"][0]))
    cm["metadata"]["namespace"] = "app9"
    ents = [("metadata/version", b"1.1.0\n")]
    lp, pp = rt.item_paths("", "v1", "configmaps", cm)
    old = dict(cm, data={"which": "legacy"})
    new = dict(cm, data={"which": "preferred"})
    ents += [(pp, json.dumps(new).encode()), (lp, json.dumps(old).encode())]
    w.backup("both", rt.tar_bytes(ents))
    r = w.restore("r-both", {"backupName": "both"})
    t.eq(r["status"]["phase"], "Completed", "phase")
    got = w.get("/api/v1/namespaces/app9/configmaps/" + cm["metadata"]["name"])
    t.eq(got["data"], {"which": "preferred"}, "preferred-version entry used")


@case
def namespace_mapping(t):
    src, items = source_with_app(t)
    w = World(t)
    w.backup("b1", rt.tar_bytes(rt.entries_for(items)))
    r = w.restore("map", {"backupName": "b1", "includedNamespaces": ["app1"],
                          "namespaceMapping": {"app1": "copy1"}})
    t.eq(r["status"]["phase"], "Completed", "phase %s" % r["status"])
    nsobj = w.get("/api/v1/namespaces/copy1")
    t.check(nsobj is not None, "target namespace created")
    t.eq(nsobj["metadata"]["labels"].get("team"), "blue", "namespace made from the backed-up one")
    t.check(w.get("/api/v1/namespaces/app1") is None, "source namespace not created")
    t.check(w.get("/api/v1/namespaces/app2") is None, "other namespace not restored")
    mine = [(g, v, p, o) for g, v, p, o in items if o["metadata"].get("namespace") == "app1"]
    compare_all(t, w, without_volume_names(mine), ns_map={"app1": "copy1"})
    rb = w.get("/apis/rbac.authorization.k8s.io/v1/namespaces/copy1/rolebindings/reader")
    t.eq(rb["subjects"][0]["namespace"], "copy1", "rolebinding subject namespace mapped")
    # not all namespaces and includeClusterResources unset: no PVs, no ClusterRoles
    t.check(w.get("/api/v1/persistentvolumes/pv-app1") is None, "PV restored without all namespaces")
    # a namespace with no backed-up object is created blank
    r = w.restore("map2", {"backupName": "b1", "includedNamespaces": ["app2"],
                           "excludedResources": ["namespaces"],
                           "namespaceMapping": {"app2": "blank2"}})
    t.eq(r["status"]["phase"], "Completed", "phase map2")
    nsobj = w.get("/api/v1/namespaces/blank2")
    t.check(nsobj is not None and "team" in nsobj["metadata"].get("labels", {}),
            "namespace from the backed-up Namespace even when namespaces are excluded")


@case
def filters(t):
    src, items = source_with_app(t)
    w = World(t)
    w.backup("b1", rt.tar_bytes(rt.entries_for(items)))
    r = w.restore("f1", {"backupName": "b1", "includedNamespaces": ["app2"],
                         "excludedResources": ["secrets", "statefulsets.apps"],
                         "labelSelector": {"matchLabels": {"tier": "web"}},
                         "includeClusterResources": True})
    t.eq(r["status"]["phase"], "Completed", "phase %s" % r["status"])
    t.check(w.get("/api/v1/namespaces/app2/configmaps/settings") is not None, "web configmap")
    t.check(w.get("/apis/apps/v1/namespaces/app2/deployments/web") is not None, "web deployment")
    t.check(w.get("/api/v1/namespaces/app2/secrets/creds") is None, "excluded secret restored")
    t.check(w.get("/apis/apps/v1/namespaces/app2/statefulsets/db") is None, "excluded sts restored")
    t.check(w.get("/api/v1/namespaces/app2/configmaps/web-owned") is None,
            "unlabelled configmap restored despite the selector")
    t.check(w.get("/api/v1/namespaces/app1/configmaps/settings") is None, "app1 restored")
    t.check(w.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/widget-admin") is not None,
            "labelled cluster role with includeClusterResources")
    t.check(w.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/widget-admin") is None,
            "unlabelled cluster role binding restored")
    t.eq(r["status"]["progress"]["totalItems"], r["status"]["progress"]["itemsRestored"], "progress")


@case
def existing_resource_policies(t):
    src, items = source_with_app(t)
    w = World(t)
    w.backup("b1", rt.tar_bytes(rt.entries_for(items)))
    post(w.sim, "", "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": "app1"}})
    post(w.sim, "", "v1", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": "settings"},
                                         "data": {"mode": "changed-by-hand"}}, "app1")
    r = w.restore("none", {"backupName": "b1", "includedNamespaces": ["app1"],
                           "existingResourcePolicy": "none"})
    t.eq(r["status"]["phase"], "Completed", "phase none")
    t.check(r["status"].get("warnings", 0) >= 1, "warning counted")
    cm = w.get("/api/v1/namespaces/app1/configmaps/settings")
    t.eq(cm["data"], {"mode": "changed-by-hand"}, "policy none left the object alone")
    warns = w.results("none")["warnings"]["namespaces"].get("app1", [])
    t.check(any("configmaps app1/settings already exists" in m for m in warns), "warning %s" % warns)
    # the rest of app1 was restored; a second restore with policy update
    r = w.restore("upd", {"backupName": "b1", "includedNamespaces": ["app1"],
                          "existingResourcePolicy": "update"})
    t.eq(r["status"]["phase"], "Completed", "phase update")
    cm = w.get("/api/v1/namespaces/app1/configmaps/settings")
    want = [o for g, v, p, o in items if p == "configmaps" and o["metadata"]["name"] == "settings"
            and o["metadata"]["namespace"] == "app1"][0]
    t.eq(cm["data"], want["data"], "policy update restored the backed-up data")
    t.eq(cm["metadata"]["labels"].get("cairn.io/restore-name"), "upd", "labels of the update")
    rl = rt.read_gz_json(w.store, "restores/upd/restore-upd-resource-list.json.gz")
    t.check("app1/settings(updated)" in rl.get("v1/ConfigMap", []), "resource list %s" % rl.get("v1/ConfigMap"))
    # equal objects are no warning
    t.eq(w.results("upd")["warnings"]["namespaces"].get("app1", []), [], "warnings on update")


@case
def restore_status(t):
    src, items = source_with_app(t)
    w = World(t)
    w.backup("b1", rt.tar_bytes(rt.entries_for(items)))
    r = w.restore("st", {"backupName": "b1", "includedNamespaces": ["app1"],
                         "restoreStatus": {"includedResources": ["widgets.example.io"]}})
    t.eq(r["status"]["phase"], "Completed", "phase %s" % r["status"])
    wid = w.get("/apis/example.io/v1/namespaces/app1/widgets/w2")
    t.eq(wid.get("status"), {"state": "Ready", "observed": 2}, "widget status written after create")
    mine = [(g, v, p, o) for g, v, p, o in items if o["metadata"].get("namespace") == "app1"]
    compare_all(t, w, without_volume_names(mine), keep_status=("widgets",))


@case
def validation(t):
    w = World(t)
    w.backup("running", rt.tar_bytes([("metadata/version", b"1.1.0\n")]), phase="InProgress")
    w.backup("ok", rt.tar_bytes([("metadata/version", b"1.1.0\n")]))
    for name, spec, want in (
            ("nobackup", {"backupName": "missing"}, "backup missing not found"),
            ("notdone", {"backupName": "running"}, "is InProgress"),
            ("badmap", {"backupName": "ok", "namespaceMapping": {"a": "Not_OK"}}, "invalid namespace mapping"),
            ("badsel", {"backupName": "ok", "labelSelector": {"matchExpressions": [
                {"key": "a", "operator": "Maybe"}]}}, "labelSelector"),
            ("badpolicy", {"backupName": "ok", "existingResourcePolicy": "merge"}, "existingResourcePolicy")):
        # a CRD schema that enforces an enum (the strict kubesim, a real
        # server) refuses the value before cairn sees it; else cairn does
        st, body, _ = w.sim.request("POST", "/apis/cairn.io/v1/namespaces/%s/restores" % NS,
                                    {"apiVersion": "cairn.io/v1", "kind": "Restore",
                                     "metadata": {"name": name, "namespace": NS}, "spec": spec})
        if st == 422 and name in ("badsel", "badpolicy"):
            t.check(want in body.get("message", ""), "%s: 422 names the field: %s" % (name, body))
            continue
        t.eq(st, 201, "%s: restore create (%s)" % (name, body))
        r = w.wait(name)
        t.eq(r["status"]["phase"], "FailedValidation", name)
        t.check(any(want in e for e in r["status"].get("validationErrors", [])),
                "%s: validationErrors %s" % (name, r["status"].get("validationErrors")))


def hostile_cases():
    cases = []
    gn = [0]

    def next_good():
        gn[0] += 1
        n = "good-%02d" % gn[0]
        return ("resources/configmaps/namespaces/app1/%s.json" % n,
                json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": n, "namespace": "app1"}, "data": {"x": "1"}}).encode())


    def ti(name, type_, linkname="", size=0):
        x = tarfile.TarInfo(name)
        x.type = type_
        x.linkname = linkname
        x.size = size
        return x
    cases.append(("absolute", "PartiallyFailed", "/etc/cairn-evil.json",
                  rt.tar_bytes([next_good(), ("/etc/cairn-evil.json", b"{}")])))
    cases.append(("dotdot", "PartiallyFailed", "resources/../../cairn-evil.json",
                  rt.tar_bytes([next_good(), ("resources/../../cairn-evil.json", b"{}")])))
    cases.append(("symlink", "PartiallyFailed", "resources/configmaps/namespaces/app1/link.json",
                  rt.tar_bytes([next_good(), (ti("resources/configmaps/namespaces/app1/link.json",
                                          tarfile.SYMTYPE, "/etc/passwd"), None)])))
    cases.append(("hardlink", "PartiallyFailed", "resources/configmaps/namespaces/app1/hard.json",
                  rt.tar_bytes([next_good(), (ti("resources/configmaps/namespaces/app1/hard.json",
                                          tarfile.LNKTYPE, "resources/configmaps/namespaces/app1/good-01.json"),
                                       None)])))
    cases.append(("device", "PartiallyFailed", "resources/configmaps/namespaces/app1/dev.json",
                  rt.tar_bytes([next_good(), (ti("resources/configmaps/namespaces/app1/dev.json",
                                          tarfile.CHRTYPE), None)])))
    cases.append(("fifo", "PartiallyFailed", "resources/configmaps/namespaces/app1/fifo.json",
                  rt.tar_bytes([next_good(), (ti("resources/configmaps/namespaces/app1/fifo.json",
                                          tarfile.FIFOTYPE), None)])))
    # incompressible, so the size cap (not the ratio cap) is what refuses it
    big = b'"' + base64.b64encode(os.urandom(25 << 20)) + b'"'
    cases.append(("oversize", "PartiallyFailed", "resources/configmaps/namespaces/app1/big.json",
                  rt.tar_bytes([next_good(), ("resources/configmaps/namespaces/app1/big.json", big)])))
    cases.append(("badjson", "PartiallyFailed", "resources/configmaps/namespaces/app1/bad.json",
                  rt.tar_bytes([next_good(), ("resources/configmaps/namespaces/app1/bad.json", b"{\"a\":")])))
    cases.append(("deepjson", "PartiallyFailed", "resources/configmaps/namespaces/app1/deep.json",
                  rt.tar_bytes([next_good(), ("resources/configmaps/namespaces/app1/deep.json",
                                       b"[" * 5000 + b"]" * 5000)])))
    filler = os.urandom(300000).hex().encode()
    g = next_good()
    whole = rt.tar_bytes([g, ("resources/configmaps/namespaces/app1/filler.json",
                              b'"' + filler + b'"'),
                          ("resources/configmaps/namespaces/app1/after.json", g[1])])
    cases.append(("truncated", "Failed", "filler.json", whole[:len(whole) // 2]))
    corrupt = bytearray(whole)
    for i in range(len(corrupt) // 2, len(corrupt) // 2 + 200):
        corrupt[i] ^= 0x5A
    cases.append(("corrupt", "Failed", "filler.json", bytes(corrupt)))
    cases.append(("bomb", "Failed", "resources/configmaps/namespaces/app1/bomb.json",
                  rt.bomb_tarball([next_good()])))
    return cases


@case
def hostile_archives(t):
    w = World(t)
    before = os.listdir("/etc")
    for name, phase, entry, tarball in hostile_cases():
        w.backup("h-" + name, tarball)
        r = w.restore("h-" + name, {"backupName": "h-" + name}, timeout=90)
        st = r["status"]
        t.eq(st["phase"], phase, "%s phase (%s)" % (name, st))
        res = w.results("h-" + name)
        text = json.dumps(res) + st.get("failureReason", "")
        t.check(entry in text, "%s: entry %s not named in %s" % (name, entry, text[:600]))
        # nothing unplanned: only the good item (never for a fatal archive)
        got = w.get("/api/v1/namespaces/app1/configmaps")
        names = sorted(o["metadata"]["name"] for o in (got or {}).get("items", [])
                       if o["metadata"].get("labels", {}).get("cairn.io/restore-name") == "h-" + name)
        t.eq(len(names), 1 if phase == "PartiallyFailed" else 0, "%s created %s" % (name, names))
        t.check(all(n.startswith("good-") for n in names), "%s created %s" % (name, names))
    t.eq(os.listdir("/etc"), before, "files appeared in /etc")
    t.check(not os.path.exists("/tmp/cairn-evil.json") and not os.path.exists(
        os.path.join(w.store, "..", "cairn-evil.json")), "an entry name was written to disk")
    t.check(w.proc.alive(), "the restore controller died")
    # and it keeps serving other work
    src, items = source_with_app(t)
    w.backup("after", rt.tar_bytes(rt.entries_for(items)))
    r = w.restore("after", {"backupName": "after"})
    t.eq(r["status"]["phase"], "Completed", "restore after the hostile ones")


@case
def kill9_and_resume(t):
    src = t.kubesim(name="source")
    post(src, "", "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "many"}})
    src.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 100}}, 1500,
             name="cm-{i:05d}", namespace="many")
    items = rt.dump(src, [("", "v1", "namespaces", False), ("", "v1", "configmaps", True)])
    items = [x for x in items if x[3]["metadata"]["name"] != "kube-root-ca.crt"]
    w = World(t, runner=False)
    w.backup("big", rt.tar_bytes(rt.entries_for(items)))
    # slow creates so the kill lands in the middle
    w.sim.faults({"method": "POST", "path": "/namespaces/many/configmaps", "delay": 0.01})
    w.start(workers=4)
    rt.create_restore(w.sim, "big", {"backupName": "big"})

    def progressed():
        r = rt.get_restore(w.sim, "big")
        return r.get("status", {}).get("progress", {}).get("itemsRestored", 0) >= 300
    wait_for(progressed, 60, "restore progress", interval=0.05)
    w.proc.kill9()
    db = sqlite3.connect(w.journal)
    done = {k for (k,) in db.execute("SELECT key FROM restore_items")}
    db.close()
    t.check(len(done) >= 300, "journaled %d" % len(done))
    w.sim.clear_faults()
    # kubesim logs a request when it completes, so a create the killed process
    # had in flight can be logged after the kill; tell the two apart by start time
    restarted = time.time()
    w.start()
    r = w.wait("big", 120)
    t.eq(r["status"]["phase"], "Completed", "phase after restart %s" % r["status"])
    t.eq(r["status"]["progress"]["itemsRestored"], len(items), "itemsRestored")
    log = w.sim.requests()
    cm_posts = [e for e in log if e["method"] == "POST"
                and e["path"] == "/api/v1/namespaces/many/configmaps"]
    t.eq(len([e for e in cm_posts if e["status"] == 201]), 1500,
         "successful creates (each object exactly once)")
    after = [e for e in cm_posts if e["time"] >= restarted]
    undone = len(items) - len(done)
    # done items are not sent again; at most the few in flight at the kill
    # (created, not yet journaled) come back as 409 AlreadyExists
    t.eq(len(after), undone, "creates after the restart (one per item not journaled as done)")
    cms = w.sim.ok("GET", "/api/v1/namespaces/many/configmaps")["items"]
    t.eq(len([c for c in cms if c["metadata"]["name"].startswith("cm-")]), 1500, "configmaps restored")

@case
def cli_create_wait_get_describe_logs(t):
    src, items = source_with_app(t)
    w = World(t)
    w.backup("b1", rt.tar_bytes(rt.entries_for(items)))
    kc = ["--kubeconfig", w.sim.kubeconfig]
    r = cairn("restore", "create", "r-cli", "--from-backup", "b1", "--include-namespaces", "app1",
              "--namespace-mappings", "app1:cli1", "--existing-resource-policy", "update",
              "--restore-status", "widgets.example.io", "-l", "tier in (web,db)", "--wait", *kc)
    t.eq(r.returncode, 0, "restore create --wait exit (%s %s)" % (r.stdout, r.stderr))
    t.check("Restore r-cli completed" in r.stdout, "create output: %s" % r.stdout)
    spec = rt.get_restore(w.sim, "r-cli")["spec"]
    t.eq(spec["namespaceMapping"], {"app1": "cli1"}, "mapping in spec")
    t.eq(spec["labelSelector"], {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["web", "db"]}]}, "selector in spec")
    t.eq(spec["restoreStatus"], {"includedResources": ["widgets.example.io"]}, "restoreStatus")
    t.eq(spec["existingResourcePolicy"], "update", "policy")
    t.check(w.get("/apis/example.io/v1/namespaces/cli1/widgets/w0")["status"]["state"] == "Ready",
            "status restored through the CLI flag")
    t.check(w.get("/api/v1/namespaces/cli1/configmaps/web-owned") is None, "selector applied")
    g = cairn("restore", "get", *kc)
    t.check(g.returncode == 0 and "r-cli" in g.stdout and "Completed" in g.stdout, "get: %s" % g.stdout)
    j = cairn("restore", "get", "r-cli", "-o", "json", *kc)
    t.eq(json.loads(j.stdout)["status"]["phase"], "Completed", "get -o json")
    d = cairn("restore", "describe", "r-cli", *kc)
    t.check(d.returncode == 0 and "app1 -> cli1" in d.stdout and "Warnings:" in d.stdout,
            "describe: %s %s" % (d.stdout, d.stderr))
    lg = cairn("restore", "logs", "r-cli", *kc)
    t.check(lg.returncode == 0 and "restoring widgets.example.io" in lg.stdout, "logs: %s" % lg.stdout[-500:])
    bad = cairn("restore", "create", "--from-backup", "b1", "--namespace-mappings", "nocolon", *kc)
    t.eq(bad.returncode, 2, "bad mapping is a usage error")
    missing = cairn("restore", "create", "--from-backup", "nope", *kc)
    t.eq(missing.returncode, 1, "missing backup")

@case
def takeover_with_empty_journal(t):
    """Another server takes an InProgress restore over (attempt+1, its own
    empty journal): items the first one created come back as AlreadyExists
    and equal, and count as done; nothing is created twice."""
    src = t.kubesim(name="source")
    post(src, "", "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "many"}})
    src.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 600,
             name="cm-{i:05d}", namespace="many")
    items = rt.dump(src, [("", "v1", "namespaces", False), ("", "v1", "configmaps", True)])
    w = World(t, runner=False)
    w.backup("big", rt.tar_bytes(rt.entries_for(items)))
    w.sim.faults({"method": "POST", "path": "/namespaces/many/configmaps", "delay": 0.01})
    w.start(server_id="srv-a", workers=4)
    rt.create_restore(w.sim, "big", {"backupName": "big"})
    wait_for(lambda: rt.get_restore(w.sim, "big").get("status", {}).get("progress", {})
             .get("itemsRestored", 0) >= 150, 60, "progress", interval=0.05)
    w.proc.kill9()
    w.sim.clear_faults()
    # what the server's takeover does once srv-a's Lease expired
    r = rt.get_restore(w.sim, "big")
    r["status"]["claim"] = {"holder": "srv-b", "worker": "srv-b/0", "attempt": 2,
                            "claimedAt": r["status"]["claim"]["claimedAt"]}
    w.sim.ok("PUT", "/apis/cairn.io/v1/namespaces/%s/restores/big/status" % NS, r)
    w.journal = t.path("srv-b-journal.db")
    w.start(server_id="srv-b")
    r = w.wait("big", 90)
    t.eq(r["status"]["phase"], "Completed", "phase after takeover %s" % r["status"])
    t.eq(r["status"]["claim"]["holder"], "srv-b", "holder")
    t.eq(r["status"]["progress"]["itemsRestored"], len(items), "itemsRestored")
    t.eq(r["status"].get("warnings", 0), 0, "equal objects are no warning")
    posts = [e for e in w.sim.requests() if e["method"] == "POST"
             and e["path"] == "/api/v1/namespaces/many/configmaps"]
    t.eq(len([e for e in posts if e["status"] == 201]), 600, "each object created once")
    t.check(len([e for e in posts if e["status"] == 409]) >= 150,
            "the new owner met the old owner's objects as AlreadyExists")

@case
def round_trip_real_backup_engine(t):
    """The same application set backed up by the real backup engine
    (`cairn server`), restored by the restore controller into a fresh
    cluster that shares the storage location."""
    store = t.mkdir("shared-store")
    src = t.kubesim(name="source")
    src.install_crds(NS)
    src.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "local"},
                 "config": {"path": store}, "default": True}})
    make_app(src)
    items = [x for x in backed_up_items(src)
             if not x[3]["metadata"]["name"].endswith(".cairn.io")]
    srv = t.spawn([os.environ.get("CAIRN_BIN") or os.path.join(BUILDDIR, "cairn"), "server",
                   "--kubeconfig", src.kubeconfig, "--namespace", NS, "--server-id", "bk",
                   "--journal", t.path("bk-journal.db"), "--retry-period", "200ms"], name="server")
    src.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": "real", "namespace": NS},
        "spec": {"includedNamespaces": ["app1", "app2"], "includeClusterResources": True,
                 "snapshotVolumes": False}})

    def backed_up():
        b = src.ok("GET", "/apis/cairn.io/v1/namespaces/%s/backups/real" % NS)
        return b if b.get("status", {}).get("phase") in rt.FINAL else None
    try:
        b = wait_for(backed_up, 60, "backup by cairn server", interval=0.2)
    except CheckFailed:
        raise CheckFailed("backup did not end: %s" % srv.output()[-2000:])
    t.eq(b["status"]["phase"], "Completed", "backup phase %s" % b["status"])
    t.check(os.path.exists(os.path.join(store, "backups/real/real.tar.gz")), "tarball in storage")
    w = World(t, store=store)
    # the target learns about the backup (what the sync controller does)
    w.sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "local"},
                 "config": {"path": store}, "default": True}})
    nb = w.sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % NS, {
        "apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": "real", "namespace": NS},
        "spec": b["spec"]})
    nb["status"] = {"phase": "Completed"}
    w.sim.ok("PUT", "/apis/cairn.io/v1/namespaces/%s/backups/real/status" % NS, nb)
    r = w.restore("from-real", {"backupName": "real"})
    t.check(r["status"]["phase"] == "Completed", "restore phase %s results %s" % (
        r["status"], json.dumps(w.results("from-real"))[:800]))
    compare_all(t, w, items)


def cm_entry(name, data=None, ns="app1", api_version="v1", raw=None):
    """A ConfigMap item entry at its preferred-version path."""
    obj = {"apiVersion": api_version, "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns}, "data": data or {"k": name}}
    path = "resources/configmaps/v1-preferredversion/namespaces/%s/%s.json" % (ns, name)
    return (path, raw if raw is not None else json.dumps(obj, separators=(",", ":")).encode())


def restored_cms(w, restore):
    got = w.get("/api/v1/namespaces/app1/configmaps") or {"items": []}
    return {o["metadata"]["name"]: o for o in got["items"]
            if o["metadata"].get("labels", {}).get("cairn.io/restore-name") == restore}


def failed_creating_nothing(t, w, name, msg):
    """Restore backup name as r-<name>: Failed, msg in failureReason, and
    no ConfigMap created."""
    st = w.restore("r-" + name, {"backupName": name})["status"]
    t.eq(st["phase"], "Failed", "%s: phase (%s)" % (name, st))
    t.check(msg in st.get("failureReason", ""), "%s: %r not in %r" % (
        name, msg, st.get("failureReason")))
    t.eq(sorted(restored_cms(w, "r-" + name)), [], "%s: created something" % name)


@case
def changed_part_fails_before_any_create(t):
    """A part whose bytes differ from the SHA-256 the backup recorded fails
    the restore before anything is created, and the reason names the part,
    also in a location that does not encrypt and when the changed part is
    valid gzip and tar (a part swapped for another attempt's, an object
    edited in storage), which no gzip CRC or tar check can see."""
    w = World(t)
    ents = [("metadata/version", b"1.1.0\n")] + [cm_entry("cm-%d" % i, {"v": "good"})
                                                  for i in range(1, 5)]
    raw, ends = rt.tar_raw(ents)
    edited = raw[:ends[2]] + raw[ends[2]:].replace(b'"v":"good"', b'"v":"evil"')
    p1, p2 = gzip.compress(raw[:ends[2]]), gzip.compress(raw[ends[2]:])

    def recorded(*members):
        return [{"number": i + 1, "bytes": len(m), "sha256": hashlib.sha256(m).hexdigest()}
                for i, m in enumerate(members)]
    changed = gzip.compress(edited[ends[2]:])
    cases = (("edited", p1 + changed, "part 2 (tarball bytes %d..%d): SHA-256 " % (
                  len(p1), len(p1) + len(p2))),
             ("cut-out", p1, "inside part 2 of the 2 recorded"))
    for name, tb, msg in cases:
        w.backup(name, tb, parts=recorded(p1, p2))
        failed_creating_nothing(t, w, name, msg)
    # the same bytes as recorded restore whole
    w.backup("whole", p1 + p2, parts=recorded(p1, p2))
    r = w.restore("r-whole", {"backupName": "whole"})
    t.eq(r["status"]["phase"], "Completed", "recorded parts (%s)" % r["status"])
    cms = restored_cms(w, "r-whole")
    t.eq(sorted(cms), ["cm-1", "cm-2", "cm-3", "cm-4"], "restored")
    t.eq({o["data"]["v"] for o in cms.values()}, {"good"}, "the recorded data")


@case
def archive_integrity(t):
    """Issue 18: a tarball cut at a gzip-member boundary or at a tar header,
    with a bad CRC or without its end-of-archive blocks, is Failed with a
    message naming the problem and nothing created; duplicates and a
    resource list that does not match are errors naming the items; strings
    with U+0000 come back byte for byte; an item nested at the depth limit
    is restored, one level more is refused; a hostile apiVersion never
    reaches a URL."""
    w = World(t)
    ents = [("metadata/version", b"1.1.0\n")] + [cm_entry("cm-%d" % i) for i in range(1, 4)]
    raw, ends = rt.tar_raw(ents)
    rlist = {"v1/ConfigMap": ["app1/cm-1", "app1/cm-2", "app1/cm-3"]}
    e2 = "resources/configmaps/v1-preferredversion/namespaces/app1/cm-2.json"
    e3 = "resources/configmaps/v1-preferredversion/namespaces/app1/cm-3.json"
    one, flush_at = rt.gzip_flushed(raw, ends[2])
    bad_crc = bytearray(gzip.compress(raw))
    bad_crc[-8] ^= 1
    fatal = (
        # parts 1-3 of 4 uploaded: gzip members end at entry boundaries
        ("member-cut", gzip.compress(raw[:ends[2]]),
         'the tarball is truncated: it ends after entry "%s" without the tar '
         'end-of-archive blocks' % e2),
        ("header-cut", one[:flush_at],
         "the tarball is truncated: its data ends inside gzip member 1"),
        ("bad-crc", bytes(bad_crc),
         "the tarball is corrupt: gzip member 1: incorrect data check"),
        ("no-end-blocks", gzip.compress(raw[:ends[3]]),
         'it ends after entry "%s" without the tar end-of-archive blocks' % e3),
    )
    for name, tb, msg in fatal:
        w.backup(name, tb)
        failed_creating_nothing(t, w, name, msg)
    # the whole one is fine
    w.backup("whole", gzip.compress(raw), rlist=rlist)
    r = w.restore("r-whole", {"backupName": "whole"})
    t.eq(r["status"]["phase"], "Completed", "whole tarball (%s)" % r["status"])
    t.eq(sorted(restored_cms(w, "r-whole")), ["cm-1", "cm-2", "cm-3"], "whole tarball restored")

    # a duplicate entry: the last copy wins, the restore says so
    w.sim.ok("DELETE", "/api/v1/namespaces/app1")
    wait_for(lambda: w.get("/api/v1/namespaces/app1") is None, 30, "app1 gone")
    dup = [("metadata/version", b"1.1.0\n"), cm_entry("dup", {"v": "first"}),
           cm_entry("other"), cm_entry("dup", {"v": "last"})]
    w.backup("dup", rt.tar_bytes(dup))
    r = w.restore("r-dup", {"backupName": "dup"})
    t.eq(r["status"]["phase"], "PartiallyFailed", "duplicate phase (%s)" % r["status"])
    errs = json.dumps(w.results("r-dup")["errors"])
    t.check("configmaps/v1-preferredversion/namespaces/app1/dup.json\\\" appears more than "
            "once: the last copy is used" in errs, "duplicate error: %s" % errs)
    cms = restored_cms(w, "r-dup")
    t.eq(sorted(cms), ["dup", "other"], "duplicate restore created")
    t.eq(cms["dup"]["data"], {"v": "last"}, "the last copy of a duplicate")

    # the resource list names an item the tarball lacks, and not another
    ents = [("metadata/version", b"1.1.0\n"), cm_entry("listed"), cm_entry("unlisted")]
    w.backup("count", rt.tar_bytes(ents), rlist={"v1/ConfigMap": ["app1/listed", "app1/lost"]})
    r = w.restore("r-count", {"backupName": "count"})
    t.eq(r["status"]["phase"], "PartiallyFailed", "count phase (%s)" % r["status"])
    errs = w.results("r-count")["errors"]["velero"]
    t.check(any("the tarball lacks items the backup's resource list names: v1/ConfigMap "
                "app1/lost (1 in all)" in e for e in errs), "missing item named: %s" % errs)
    t.check(any("the tarball holds items the backup's resource list does not name: "
                "configmaps app1/unlisted (1 in all)" in e for e in errs), "extra item named: %s" % errs)
    t.eq(sorted(restored_cms(w, "r-count")), ["listed", "unlisted"], "count restore created")

    # strings holding U+0000 come back byte for byte
    nul = {"a": "before\u0000after", "b": "\u0000", "c": "x\u0000y\u0000z"}
    w.backup("nul", rt.tar_bytes([("metadata/version", b"1.1.0\n"), cm_entry("nul", nul)]))
    r = w.restore("r-nul", {"backupName": "nul"})
    t.eq(r["status"]["phase"], "Completed", "NUL phase (%s)" % r["status"])
    t.eq(restored_cms(w, "r-nul")["nul"]["data"], nul, "NUL strings restored byte for byte")

    # nesting: at the limit restored, one level more refused by name
    post(w.sim, "apiextensions.k8s.io", "v1", "customresourcedefinitions", WIDGET_CRD)
    wait_for(lambda: w.sim.get("/apis/example.io/v1")[0] == 200, 10, "widget CRD served")

    def widget(name, depth):
        # the object nests `depth` levels: itself, then its spec's lists
        inner = "[" * (depth - 1) + "]" * (depth - 1)
        text = ('{"apiVersion":"example.io/v1","kind":"Widget","metadata":{"name":"%s",'
                '"namespace":"app1"},"spec":%s}' % (name, inner)).encode()
        return ("resources/widgets.example.io/v1-preferredversion/namespaces/app1/%s.json" % name,
                text)
    w.backup("deep", rt.tar_bytes([("metadata/version", b"1.1.0\n"), widget("at-limit", 512),
                                   widget("too-deep", 513)]))
    r = w.restore("r-deep", {"backupName": "deep"})
    t.eq(r["status"]["phase"], "PartiallyFailed", "deep phase (%s)" % r["status"])
    errs = json.dumps(w.results("r-deep")["errors"])
    t.check("too-deep.json" in errs and "JSON nests deeper than 512 levels" in errs,
            "too deep named: %s" % errs)
    got = w.get("/apis/example.io/v1/namespaces/app1/widgets") or {"items": []}
    t.eq(sorted(o["metadata"]["name"] for o in got["items"]), ["at-limit"], "widgets created")

    # an apiVersion that would change the URL is refused before any request
    hostile = [("metadata/version", b"1.1.0\n"), cm_entry("plain"),
               cm_entry("bad-group", api_version="v1/../../apis/apps/v1"),
               cm_entry("bad-version", api_version="v1?dryRun=All"),
               cm_entry("bad-hash", api_version="v1#x")]
    before = len(w.sim.requests())
    w.backup("hostile-av", rt.tar_bytes(hostile))
    r = w.restore("r-hostile-av", {"backupName": "hostile-av"})
    t.eq(r["status"]["phase"], "PartiallyFailed", "hostile apiVersion phase (%s)" % r["status"])
    errs = w.results("r-hostile-av")["errors"]["namespaces"].get("app1", [])
    t.check(any("configmaps app1/bad-group: its apiVersion \"v1/../../apis/apps/v1\" is not of "
                "the API group of configmaps" in e for e in errs), "bad group: %s" % errs)
    t.check(any("configmaps app1/bad-version: its apiVersion \"v1?dryRun=All\" names no "
                "version" in e for e in errs), "bad version: %s" % errs)
    t.check(any("bad-hash" in e for e in errs), "bad hash: %s" % errs)
    t.eq(sorted(restored_cms(w, "r-hostile-av")), ["plain"], "only the plain item created")
    paths = [e["path"] for e in w.sim.requests()[before:]]
    t.check(not any("dryRun" in p or "/apis/apps/v1" in p or "#" in p for p in paths),
            "a request went where an apiVersion said: %s" % [p for p in paths if "apps" in p])


main()
