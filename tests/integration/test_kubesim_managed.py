#!/usr/bin/env python3
"""kubesim keeps metadata.managedFields as the real server's field manager
does: one entry per manager and operation, FieldsV1 sets, managers from
fieldManager or the User-Agent, omitted managedFields kept, [{}] strips them,
server-side apply conflicts; driven with the real kubectl where it can."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


def cm(name, data, labels=None):
    md = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}


def entries(obj):
    return {(e["manager"], e["operation"], e.get("subresource", "")): e for e in obj["metadata"].get("managedFields", [])}


@case
def writes_are_recorded_per_manager(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.kubectl("create", "-f", "-", input=json.dumps(cm("c1", {"a": "1", "b": "2"}, {"app": "web"})))
    obj = sim.ok("GET", CM + "/c1")
    mf = obj["metadata"]["managedFields"]
    t.eq(len(mf), 1, "one entry")
    e = mf[0]
    t.eq((e["manager"], e["operation"], e["apiVersion"], e["fieldsType"]), ("kubectl-create", "Update", "v1", "FieldsV1"),
         "entry")
    t.eq(e["fieldsV1"], {"f:data": {".": {}, "f:a": {}, "f:b": {}},
                         "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}, "FieldsV1")
    t.check(e["time"].endswith("Z") and len(e["time"]) == 20, "time in RFC 3339 seconds: %s" % e["time"])
    t.eq(list(obj["metadata"])[-1], "managedFields", "managedFields last in ObjectMeta")
    # another manager takes a field away from the first
    sim.kubectl("patch", "cm", "c1", "-p", '{"data":{"a":"9"}}')
    obj = sim.ok("GET", CM + "/c1")
    es = entries(obj)
    t.eq(es[("kubectl-patch", "Update", "")]["fieldsV1"], {"f:data": {"f:a": {}}}, "patch owns data.a")
    t.eq(es[("kubectl-create", "Update", "")]["fieldsV1"]["f:data"], {".": {}, "f:b": {}}, "create lost data.a")
    # manager from the User-Agent prefix, or fieldManager
    sim.ok("POST", CM, cm("c2", {"k": "v"}), headers={"User-Agent": "cairn/0.1.0 (linux/amd64)"})
    t.eq(list(entries(sim.ok("GET", CM + "/c2"))), [("cairn", "Update", "")], "manager from User-Agent")
    sim.ok("POST", CM + "?fieldManager=restorer", cm("c3", {"k": "v"}))
    t.eq(list(entries(sim.ok("GET", CM + "/c3"))), [("restorer", "Update", "")], "fieldManager wins")
    # a no-op write changes nothing
    before = sim.ok("GET", CM + "/c1")
    after = sim.ok("PUT", CM + "/c1?fieldManager=noop", before)
    t.eq((after["metadata"]["resourceVersion"], after["metadata"]["managedFields"]),
         (before["metadata"]["resourceVersion"], before["metadata"]["managedFields"]), "no-op update")


@case
def omitted_managed_fields_are_kept(t):
    sim = t.kubesim(tls=False)
    sim.ok("POST", CM + "?fieldManager=one", cm("c1", {"a": "1"}))
    o = sim.ok("GET", CM + "/c1")
    del o["metadata"]["managedFields"]
    o["data"]["b"] = "2"
    o = sim.ok("PUT", CM + "/c1?fieldManager=two", o)
    es = entries(o)
    t.eq(sorted(es), [("one", "Update", ""), ("two", "Update", "")], "an update without managedFields keeps them")
    t.eq(es[("two", "Update", "")]["fieldsV1"], {"f:data": {"f:b": {}}}, "two owns what it added")
    # [{}] removes them all
    o["metadata"]["managedFields"] = [{}]
    o["data"]["c"] = "3"
    o = sim.ok("PUT", CM + "/c1?fieldManager=two", o)
    t.check("managedFields" not in o["metadata"], "[{}] strips managedFields: %s" % o["metadata"])
    # entries a client sends replace the stored ones on update, and the write is tracked on top
    helm = [{"manager": "helm", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}, "f:c": {}}}}]
    o["metadata"]["managedFields"] = helm
    o["data"]["d"] = "4"
    o = sim.ok("PUT", CM + "/c1?fieldManager=two", o)
    es = entries(o)
    t.eq(sorted(es), [("helm", "Update", ""), ("two", "Update", "")], "provided entries replace the stored ones")
    t.eq(es[("helm", "Update", "")]["time"], "2024-01-01T00:00:00Z", "their time is kept")
    t.eq(es[("two", "Update", "")]["fieldsV1"], {"f:data": {"f:d": {}}}, "the writer owns what it added")
    # a create with managedFields (a restore of a backup that kept them): every field is
    # new, so the creator takes them all from the sent managers (Updater.update)
    o = sim.ok("POST", CM + "?fieldManager=cairn", dict(cm("c2", {"a": "1", "b": "2", "c": "3"}),
                                                        metadata={"name": "c2", "managedFields": helm}))
    t.eq(list(entries(o)), [("cairn", "Update", "")], "only the creator is left")


@case
def status_subresource_and_manager_cap(t):
    sim = t.kubesim(tls=False)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx",
                                                          "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
           "status": {"replicas": 5}}
    D = "/apis/apps/v1/namespaces/default/deployments"
    o = sim.ok("POST", D + "?fieldManager=deployer", dep)
    f = entries(o)[("deployer", "Update", "")]["fieldsV1"]
    t.check("f:status" not in f, "the main endpoint does not own status: %s" % f)
    t.eq(f["f:spec"]["f:template"]["f:spec"]["f:containers"],
         {'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {},
                             "f:ports": {".": {}, 'k:{"containerPort":80,"protocol":"TCP"}': {
                                 ".": {}, "f:containerPort": {}, "f:protocol": {}}}}},
         "associative lists by their keys")
    o["status"] = {"replicas": 1}
    o = sim.ok("PUT", D + "/d/status?fieldManager=kube-controller-manager", o)
    e = entries(o)[("kube-controller-manager", "Update", "status")]
    t.eq((e["subresource"], e["fieldsV1"]), ("status", {"f:status": {"f:replicas": {}}}), "status entry")
    # more than 10 Update managers: the oldest merge into ancient-changes
    for i in range(12):
        sim.ok("PATCH", D + "/d?fieldManager=m%02d" % i, {"metadata": {"annotations": {"k%d" % i: "v"}}},
               content_type="application/merge-patch+json")
    es = entries(sim.ok("GET", D + "/d"))
    ups = [k for k in es if k[1] == "Update"]
    t.eq(len(ups), 10, "at most 10 Update managers: %s" % sorted(es))
    t.check(("ancient-changes", "Update", "") in es, "ancient-changes bucket: %s" % sorted(es))


@case
def server_side_apply_conflicts(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.kubectl("create", "-f", "-", input=json.dumps(cm("c1", {"a": "1"})))
    r = sim.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(cm("c1", {"a": "2"})), check=False)
    t.check(r.returncode != 0 and 'Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a'
            in r.stderr, "conflict: %s" % r.stderr)
    st, body, _ = sim.request("PATCH", CM + "/c1?fieldManager=applier", json.dumps(cm("c1", {"a": "3"})),
                              content_type="application/apply-patch+yaml")
    t.eq((st, body["reason"], body["details"]["causes"]),
         (409, "Conflict", [{"reason": "FieldManagerConflict", "message": 'conflict with "kubectl-create" using v1',
                             "field": ".data.a"}]), "409 body")
    sim.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(cm("c1", {"a": "2"})))
    es = entries(sim.ok("GET", CM + "/c1"))
    t.eq(es[("kubectl", "Apply", "")]["fieldsV1"], {"f:data": {".": {}, "f:a": {}}}, "the applier owns data.a")
    t.eq(sorted(es), [("kubectl", "Apply", ""), ("kubectl-create", "Update", "")], "managers")
    # same value: no conflict, shared ownership
    sim.kubectl("apply", "--server-side", "--field-manager=other", "-f", "-", input=json.dumps(cm("c1", {"a": "2"})))


@case
def custom_resources_follow_their_schema(t):
    sim = t.kubesim(tls=False)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.io"},
           "spec": {"group": "example.io", "scope": "Namespaced",
                    "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                      "type": "object", "properties": {
                                          "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                                    "x-kubernetes-list-map-keys": ["name"],
                                                    "items": {"type": "object", "properties": {
                                                        "name": {"type": "string"}, "port": {"type": "integer"}}}},
                                          "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                                   "items": {"type": "string"}},
                                          "args": {"type": "array", "items": {"type": "string"}},
                                          "env": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}]}}
    sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    o = sim.ok("POST", "/apis/example.io/v1/namespaces/default/things?fieldManager=me",
               {"apiVersion": "example.io/v1", "kind": "Thing", "metadata": {"name": "t1"},
                "spec": {"ports": [{"name": "http", "port": 80}], "tags": ["a"], "args": ["-v"], "env": {"X": "1"}}})
    t.eq(o["metadata"]["managedFields"][0]["fieldsV1"], {"f:spec": {
        "f:args": {}, "f:env": {".": {}, "f:X": {}},
        "f:ports": {".": {}, 'k:{"name":"http"}': {".": {}, "f:name": {}, "f:port": {}}},
        "f:tags": {".": {}, 'v:"a"': {}}}}, "CR FieldsV1")


main()
