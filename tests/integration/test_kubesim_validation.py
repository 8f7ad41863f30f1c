#!/usr/bin/env python3
"""kubesim validates as kube-apiserver does, with its messages: ObjectMeta
(names, labels, annotations), structural CRD schemas, and custom resources
pruned and validated against their schema (422 Invalid, or 400 under
fieldValidation=Strict), driven with the real kubectl where it can."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"
GADGETS = "/apis/example.io/v1/namespaces/default/gadgets"
LABEL_RE = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


def cm(name, labels=None, annotations=None):
    md = {"name": name}
    if labels is not None:
        md["labels"] = labels
    if annotations is not None:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"k": "v"}}


@case
def object_meta_rules(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.apply(cm("c1"))
    long = "v" * 64
    # (kubectl label checks on the client; apply lets the server say it)
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(cm("c1", {"app": long})), check=False)
    t.check(r.returncode != 0 and ('The ConfigMap "c1" is invalid: metadata.labels: Invalid value: "%s": must be no '
                                   'more than 63 characters' % long) in r.stderr, "kubectl apply: %s" % r.stderr)
    st, body, _ = sim.post(CM, cm("c2", {"app": "bad value!"}))
    t.eq((st, body["reason"]), (422, "Invalid"), "bad label value")
    t.eq(body["message"], 'ConfigMap "c2" is invalid: metadata.labels: Invalid value: "bad value!": a valid label '
         "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
         "an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '%s')"
         % LABEL_RE, "message")
    t.eq(body["details"], {"name": "c2", "kind": "ConfigMap", "causes": [
        {"reason": "FieldValueInvalid", "field": "metadata.labels", "message": body["message"].split("metadata.labels: ", 1)[1]}]},
        "details")
    st, body, _ = sim.post(CM, cm("c3", {"example.com/x/y": "v", ("k" * 64): "v"}))
    t.check(st == 422 and body["message"].startswith('ConfigMap "c3" is invalid: [metadata.labels: Invalid value: '
                                                      '"example.com/x/y": a qualified name must consist of')
            and "name part must be no more than 63 characters" in body["message"], "bad label keys: %s" % body)
    t.eq(len(body["details"]["causes"]), 2, "one cause per error")
    big = {"a": "x" * (256 * 1024)}
    st, body, _ = sim.post(CM, cm("c4", annotations=big))
    t.eq((st, body["message"]), (422, 'ConfigMap "c4" is invalid: metadata.annotations: Too long: may not be more '
                                      'than 262144 bytes'), "annotations over 256 KiB")
    st, body, _ = sim.post(CM, cm("Bad_Name"))
    t.check(st == 422 and 'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain' in body["message"],
            "name: %s" % body)
    st, body, _ = sim.post("/api/v1/namespaces/default/services",
                           {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1svc"},
                            "spec": {"ports": [{"port": 80}]}})
    t.check(st == 422 and 'a DNS-1035 label must consist of lower case alphanumeric characters' in body["message"],
            "service names are DNS-1035 labels: %s" % body)
    st, body, _ = sim.post(CM, dict(cm("c5"), metadata={"name": "c5", "finalizers": ["bad finalizer"]}))
    t.check(st == 422 and "metadata.finalizers: Invalid value: \"bad finalizer\"" in body["message"], "finalizer: %s" % body)
    st, body, _ = sim.post("/api/v1/namespaces/default/events",
                           {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"}, "reason": "R",
                            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}})
    t.eq((st, body.get("message")), (422, 'Event "e1" is invalid: involvedObject.namespace: Invalid value: "other": '
                                          'does not match event.namespace'), "event namespace")


def gadget_crd(schema, name="gadgets"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name + ".example.io"},
            "spec": {"group": "example.io", "scope": "Namespaced",
                     "names": {"plural": name, "singular": name[:-1], "kind": name[:-1].capitalize()},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": schema}}]}}


SCHEMA = {"type": "object", "properties": {
    "metadata": {"type": "object"},
    "spec": {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "minimum": 1},
        "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
        "when": {"type": "string", "format": "date-time"},
        "note": {"type": "string", "nullable": True},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "limits": {"type": "object", "additionalProperties": {"type": "integer"}}}},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}


def gadget(name, spec, **top):
    o = {"apiVersion": "example.io/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}
    o.update(top)
    return o


@case
def crds_must_be_structural(t):
    need_kubectl(t)
    sim = t.kubesim()
    bad = gadget_crd({"type": "object", "properties": {"spec": {"properties": {"size": {"type": "integer"}}}}})
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    t.check(r.returncode != 0 and 'The CustomResourceDefinition "gadgets.example.io" is invalid: '
            'spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for '
            'specified object fields' in r.stderr, "non-structural CRD: %s" % r.stderr)
    none = gadget_crd(None)
    del none["spec"]["versions"][0]["schema"]
    st, body, _ = sim.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", none)
    t.eq((st, body["message"]), (422, 'CustomResourceDefinition.apiextensions.k8s.io "gadgets.example.io" is invalid: '
                                      'spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required'),
         "schema required")
    meta = gadget_crd({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "labels": {"type": "object"}}}}})
    st, body, _ = sim.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", meta)
    t.check(st == 422 and "spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify "
            "anything other than name and generateName, but metadata is implicitly specified" in body["message"],
            "metadata schema: %s" % body)
    sim.apply(gadget_crd(SCHEMA))


@case
def custom_resources_are_pruned_and_validated(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.apply(gadget_crd(SCHEMA))
    # kubectl validates strictly on the server: an undeclared field is an error
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(gadget("g1", {"size": 2, "colour": "red"})), check=False)
    t.check(r.returncode != 0 and 'Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: '
            'unknown field "spec.colour"' in r.stderr, "strict: %s" % r.stderr)
    # a client that does not ask: pruned, with a warning; defaults applied
    g1 = gadget("g1", {"size": 2, "colour": "red", "extra": {"any": {"thing": 1}}, "limits": {"cpu": 2}}, junk=1)
    g1["metadata"].update({"labels": {"app": "x"}, "annotations": {"a": "b"}, "bogus": 1})
    st, body, hdrs = sim.post(GADGETS, g1)
    t.eq(st, 201, "created: %s" % body)
    t.eq((body["metadata"]["labels"], body["metadata"]["annotations"], "bogus" in body["metadata"]),
         ({"app": "x"}, {"a": "b"}, False), "metadata is ObjectMeta, whatever the schema says of it")
    t.eq(body["spec"], {"size": 2, "mode": "safe", "extra": {"any": {"thing": 1}}, "limits": {"cpu": 2}},
         "pruned, defaulted, preserved subtree kept")
    t.check("junk" not in body, "undeclared top-level field pruned")
    warns = hdrs.get_all("Warning") or []
    t.eq(sorted(warns), ['299 - "unknown field \\"junk\\""', '299 - "unknown field \\"metadata.bogus\\""',
                         '299 - "unknown field \\"spec.colour\\""'], "warnings")
    st, body, _ = sim.post(GADGETS + "?fieldValidation=Ignore", gadget("g2", {"size": 1, "colour": "red"}))
    t.eq((st, "colour" in body["spec"]), (201, False), "Ignore prunes silently")
    # 422 with the real messages
    cases = [
        ({"size": "two"}, 'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"'),
        ({"size": 0}, "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ({"size": 1, "mode": "slow"}, 'spec.mode: Unsupported value: "slow": supported values: "fast", "safe"'),
        ({"size": 1, "when": "yesterday"},
         'spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"'),
        ({}, "spec.size: Required value"),
        ({"size": 1, "tags": ["a", 3]},
         'spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer"'),
        ({"size": 1, "mode": None}, 'spec.mode: Invalid value: "null": spec.mode in body must be of type string: "null"'),
        ({"size": 1, "limits": {"cpu": "lots"}},
         'spec.limits.cpu: Invalid value: "string": spec.limits.cpu in body must be of type integer: "string"'),
    ]
    for i, (spec, msg) in enumerate(cases):
        st, body, _ = sim.post(GADGETS, gadget("bad-%d" % i, spec))
        t.eq((st, body.get("message")), (422, 'Gadget.example.io "bad-%d" is invalid: %s' % (i, msg)), "case %d" % i)
    st, body, _ = sim.post(GADGETS, gadget("null-ok", {"size": 1, "note": None}))
    t.eq(st, 201, "nullable accepts null")
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(gadget("g3", {"size": -1})), check=False)
    t.check(r.returncode != 0 and 'The Gadget "g3" is invalid: spec.size: Invalid value: -1: spec.size in body should '
            'be greater than or equal to 1' in r.stderr, "kubectl shows it: %s" % r.stderr)
    # the status subresource is validated too, and pruned
    g = sim.ok("GET", GADGETS + "/g1")
    g["status"] = {"phase": 7}
    st, body, _ = sim.put(GADGETS + "/g1/status", g)
    t.eq((st, body.get("message")), (422, 'Gadget.example.io "g1" is invalid: status.phase: Invalid value: "integer": '
                                          'status.phase in body must be of type string: "integer"'), "status")
    g["status"] = {"phase": "Ready", "other": 1}
    st, body, _ = sim.put(GADGETS + "/g1/status", g)
    t.eq((st, body.get("status")), (200, {"phase": "Ready"}), "status pruned")


main()
