#!/usr/bin/env python3
"""The real kubectl (v1.32, via its version dispatcher) against tests/kubesim over
TLS with a bearer token and a fresh --cache-dir: the acceptance list of issue 3."""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main, wait_for, CheckFailed  # noqa: E402

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "backups.example.io"},
    "spec": {"group": "example.io", "scope": "Namespaced",
             "names": {"plural": "backups", "singular": "backup", "kind": "Backup", "listKind": "BackupList",
                       "shortNames": ["bk"]},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}},
                           "additionalPrinterColumns": [
                               {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                               {"name": "Items", "type": "integer", "jsonPath": ".spec.items"},
                               {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]},
}
CLUSTER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "locations.example.io"},
    "spec": {"group": "example.io", "scope": "Cluster",
             "names": {"plural": "locations", "singular": "location", "kind": "Location"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def backup(name, items=1, labels=None):
    return {"apiVersion": "example.io/v1", "kind": "Backup",
            "metadata": {"name": name, "labels": labels or {}}, "spec": {"items": items}}


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


def sim_with_crd(t):
    need_kubectl(t)
    sim = t.kubesim()           # TLS + token "admin"
    sim.apply(CRD)
    return sim


def table(out):
    lines = [l for l in out.splitlines() if l.strip()]
    head = lines[0].split()
    return head, [l.split() for l in lines[1:]]


@case
def crd_apply_and_discovery(t):
    sim = sim_with_crd(t)
    out = sim.kubectl("api-resources", "--api-group=example.io").stdout
    t.check("backups" in out and "bk" in out and "Backup" in out, "api-resources: %s" % out)
    sim.apply(CLUSTER_CRD)
    # a fresh cache dir sees the new resource immediately (discovery is dynamic)
    out = sim.kubectl("api-resources", "--api-group=example.io", "--cache-dir", t.mkdir("cache2")).stdout
    t.check("locations" in out and "false" in out, "cluster-scoped CRD in discovery: %s" % out)
    crd = json.loads(sim.kubectl("get", "crd", "backups.example.io", "-o", "json").stdout)
    conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    t.eq((conds.get("Established"), conds.get("NamesAccepted")), ("True", "True"), "CRD conditions")
    sim.kubectl("wait", "--for=condition=Established", "crd/backups.example.io", "--timeout=10s")
    sim.apply({"apiVersion": "example.io/v1", "kind": "Location", "metadata": {"name": "edge-1"}, "spec": {}})
    t.check("edge-1" in sim.kubectl("get", "locations").stdout, "cluster-scoped CR listed")
    # the request log shows kubectl authenticated with the token over TLS
    log = sim.requests()
    t.check(any(e["token"] == "admin" and e["path"] == "/apis" for e in log), "kubectl discovery logged with token")
    sim.kubectl("delete", "crd", "locations.example.io")
    groups = json.loads(sim.kubectl("get", "--raw", "/apis/example.io").stdout)
    t.eq([v["version"] for v in groups["versions"]], ["v1"], "group still served by the other CRD")
    res = json.loads(sim.kubectl("get", "--raw", "/apis/example.io/v1").stdout)["resources"]
    t.eq(sorted(r["name"] for r in res), ["backups", "backups/status"], "locations gone from discovery")
    # a wrong token is refused
    bad = t.path("bad-kubeconfig")
    with open(sim.kubeconfig) as f, open(bad, "w") as g:
        g.write(f.read().replace("token: " + sim.token, "token: wrong"))
    r = subprocess.run(["kubectl", "--kubeconfig", bad, "--cache-dir", t.mkdir("cache3"), "get", "cm"],
                       capture_output=True, text=True, timeout=60)
    t.check(r.returncode != 0 and ("Unauthorized" in r.stderr or "provide credentials" in r.stderr),
            "wrong token: %s" % r.stderr)


@case
def apply_get_columns_json_and_patches(t):
    sim = sim_with_crd(t)
    sim.apply(backup("b1", 3, {"tier": "gold"}))
    head, rows = table(sim.kubectl("get", "backups").stdout)
    t.eq(head, ["NAME", "PHASE", "ITEMS", "AGE"], "printer columns")
    t.eq(rows[0][:2], ["b1", "3"], "row (empty phase)")
    obj = json.loads(sim.kubectl("get", "backup", "b1", "-o", "json").stdout)
    t.eq((obj["metadata"]["generation"], obj["spec"]["items"]), (1, 3), "-o json")
    t.check(obj["metadata"]["uid"] and obj["metadata"]["creationTimestamp"].endswith("Z"), "uid/creationTimestamp")
    sim.kubectl("patch", "backup", "b1", "--type", "merge", "-p", '{"spec":{"items":5}}')
    sim.kubectl("patch", "backup", "b1", "--type", "json", "-p",
                '[{"op":"test","path":"/spec/items","value":5},{"op":"replace","path":"/spec/items","value":7}]')
    r = sim.kubectl("patch", "backup", "b1", "--type", "json", "-p",
                    '[{"op":"test","path":"/spec/items","value":99}]', check=False)
    t.check(r.returncode != 0 and "test failed" in r.stderr, "failed json patch test: %s" % r.stderr)
    r = sim.kubectl("patch", "backup", "b1", "-p", '{"spec":{"items":1}}', check=False)
    t.check(r.returncode != 0 and "strategic-merge-patch" in r.stderr, "SMP on CR refused: %s" % r.stderr)
    sim.kubectl("patch", "backup", "b1", "--subresource=status", "--type", "merge", "-p",
                '{"status":{"phase":"Completed"},"spec":{"items":100}}')
    head, rows = table(sim.kubectl("get", "backups").stdout)
    t.eq(rows[0][:3], ["b1", "Completed", "7"], "after status patch (spec untouched)")
    obj = json.loads(sim.kubectl("get", "backup", "b1", "-o", "json").stdout)
    t.eq(obj["metadata"]["generation"], 3, "generation: 2 spec changes")
    sim.kubectl("label", "backup", "b1", "env=prod")
    sim.kubectl("label", "backup", "b1", "tier=silver", "--overwrite")
    obj = json.loads(sim.kubectl("get", "backup", "b1", "-o", "json").stdout)
    t.eq(obj["metadata"]["labels"], {"env": "prod", "tier": "silver"}, "labels")
    t.eq(obj["metadata"]["generation"], 3, "labels do not bump generation")
    # apply again with a change: client-side apply (merge patch for CRs)
    sim.apply(backup("b1", 9, {"tier": "gold"}))
    obj = json.loads(sim.kubectl("get", "backup", "b1", "-o", "json").stdout)
    t.eq((obj["spec"]["items"], obj["status"]["phase"]), (9, "Completed"), "re-apply keeps status")
    # server-side apply
    sim.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(backup("b2", 2)))
    t.eq(json.loads(sim.kubectl("get", "backup", "b2", "-o", "json").stdout)["spec"]["items"], 2, "server-side apply")


@case
def delete_with_finalizer(t):
    sim = sim_with_crd(t)
    b = backup("fin", 1)
    b["metadata"]["finalizers"] = ["example.io/keep"]
    sim.apply(b)
    r = sim.kubectl("delete", "backup", "fin", "--wait=false")
    t.check("deleted" in r.stdout, r.stdout)
    obj = json.loads(sim.kubectl("get", "backup", "fin", "-o", "json").stdout)
    t.check(obj["metadata"].get("deletionTimestamp"), "deletionTimestamp must be set")
    t.eq(obj["metadata"]["finalizers"], ["example.io/keep"], "finalizers kept")
    sim.kubectl("patch", "backup", "fin", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    r = sim.kubectl("get", "backup", "fin", check=False)
    t.check(r.returncode != 0 and "NotFound" in r.stderr, "object gone: %s" % r.stderr)
    # a plain object deletes (and kubectl delete --wait works on it)
    sim.apply(backup("plain", 1))
    sim.kubectl("delete", "backup", "plain", "--timeout=20s")
    t.check(sim.kubectl("get", "backup", "plain", check=False).returncode != 0, "plain deleted")


def parse_json_stream(text):
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        o, i = dec.raw_decode(text, i)
        out.append(o)


@case
def get_watch_prints_events(t):
    sim = sim_with_crd(t)
    sim.apply(backup("pre", 1))
    argv = ["kubectl", "--kubeconfig", sim.kubeconfig, "--cache-dir", sim.cache_dir,
            "get", "backups", "-w", "--output-watch-events", "-o", "json"]
    w = t.spawn(argv, name="kubectl-watch-json")
    argv2 = ["kubectl", "--kubeconfig", sim.kubeconfig, "--cache-dir", sim.cache_dir,
             "get", "backups", "-w", "--output-watch-events"]
    w2 = t.spawn(argv2, name="kubectl-watch-table")
    wait_for(lambda: sum(1 for e in sim.requests() if e.get("watch") and "backups" in e["path"]) >= 2, 30,
             "two kubectl watches")
    sim.apply(backup("w1", 1))
    sim.kubectl("patch", "backup", "w1", "--type", "merge", "-p", '{"spec":{"items":2}}')
    sim.kubectl("delete", "backup", "w1")

    def events():
        try:
            return [(e["type"], e["object"]["metadata"]["name"]) for e in parse_json_stream(w.output())]
        except ValueError:
            return None
    want = [("ADDED", "pre"), ("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    wait_for(lambda: events() == want, 20, "watch events %r (got %r)" % (want, events()))
    wait_for(lambda: "DELETED" in w2.output(), 20, "table watch output")
    rows = [l.split()[:2] for l in w2.output().splitlines() if l.strip()]
    t.eq(rows[0][:2], ["EVENT", "NAME"], "table watch header: %r" % rows)
    t.eq([r for r in rows[1:]], [["ADDED", "pre"], ["ADDED", "w1"], ["MODIFIED", "w1"], ["DELETED", "w1"]],
         "table watch rows")
    t.check(w.alive() and w2.alive(), "kubectl -w must keep watching")


@case
def chunk_size_paging_and_selectors(t):
    need_kubectl(t)
    sim = t.kubesim()
    items = []
    for i in range(1, 8):
        labels = {"n": str(i)}
        if i > 5:
            labels["odd"] = "x"
        items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm%d" % i, "labels": labels},
                      "data": {"i": str(i)}})
    # a stream of JSON documents (kind: List would need /openapi/v2 in protobuf for client-side validation)
    sim.kubectl("apply", "-f", "-", input="\n".join(json.dumps(i) for i in items))
    sim.ok("DELETE", "/_sim/requests")
    out = sim.kubectl("get", "cm", "--chunk-size=2", "-o", "name").stdout.split()
    t.eq(out, ["configmap/cm%d" % i for i in range(1, 8)], "all items through pages")
    gets = [e for e in sim.requests() if e["method"] == "GET" and e["path"] == "/api/v1/namespaces/default/configmaps"]
    t.eq(len(gets), 4, "4 pages of 2 (requests: %r)" % [g["query"] for g in gets])
    t.check(all("limit=2" in g["query"] for g in gets) and all("continue=" in g["query"] for g in gets[1:]),
            "limit/continue in queries")
    head, rows = table(sim.kubectl("get", "cm", "--chunk-size=3").stdout)
    t.eq(head, ["NAME", "DATA", "AGE"], "built-in table columns")
    t.eq([r[0] for r in rows], ["cm%d" % i for i in range(1, 8)], "table through pages")

    def names(sel):
        return sim.kubectl("get", "cm", "-l", sel, "-o", "name").stdout.split()
    t.eq(names("n in (1,2,6)"), ["configmap/cm1", "configmap/cm2", "configmap/cm6"], "in")
    t.eq(names("n notin (1,2,3,4)"), ["configmap/cm5", "configmap/cm6", "configmap/cm7"], "notin")
    t.eq(names("n,!odd"), ["configmap/cm%d" % i for i in range(1, 6)], "!key")
    t.eq(names("odd"), ["configmap/cm6", "configmap/cm7"], "exists")
    t.eq(names("n!=1,odd!=x"), ["configmap/cm%d" % i for i in range(2, 6)], "!=")
    t.eq(sim.kubectl("get", "cm", "--field-selector", "metadata.name=cm3", "-o", "name").stdout.split(),
         ["configmap/cm3"], "field selector")


@case
def deployment_apply_keeps_both_containers(t):
    need_kubectl(t)
    sim = t.kubesim()

    def dep(img_a, extra_env=None):
        c1 = {"name": "a", "image": img_a, "ports": [{"containerPort": 80}]}
        if extra_env:
            c1["env"] = extra_env
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [c1, {"name": "b", "image": "busybox:1"}]}}}}
    sim.apply(dep("nginx:1"))
    sim.ok("DELETE", "/_sim/requests")
    sim.apply(dep("nginx:2", [{"name": "X", "value": "1"}]))
    patches = [e for e in sim.requests() if e["method"] == "PATCH"]
    t.check(patches and "strategic-merge-patch" in patches[0]["contentType"],
            "kubectl apply should send a strategic merge patch: %r" % patches)
    obj = json.loads(sim.kubectl("get", "deploy", "web", "-o", "json").stdout)
    cs = obj["spec"]["template"]["spec"]["containers"]
    t.eq([(c["name"], c["image"]) for c in cs], [("a", "nginx:2"), ("b", "busybox:1")], "both containers kept")
    t.eq(cs[0].get("env"), [{"name": "X", "value": "1"}], "env added")
    t.eq(obj["metadata"]["generation"], 2, "generation bumped once")
    # removing container b from the manifest removes it (last-applied three-way patch)
    d = dep("nginx:2", [{"name": "X", "value": "1"}])
    d["spec"]["template"]["spec"]["containers"].pop()
    sim.apply(d)
    obj = json.loads(sim.kubectl("get", "deploy", "web", "-o", "json").stdout)
    t.eq([c["name"] for c in obj["spec"]["template"]["spec"]["containers"]], ["a"], "container removed by apply")
    sim.kubectl("scale", "deploy", "web", "--replicas=3")
    head, rows = table(sim.kubectl("get", "deploy").stdout)
    t.eq(head[:2], ["NAME", "READY"], "deployment columns")
    t.eq(rows[0][:2], ["web", "0/3"], "scaled to 3")


main()
