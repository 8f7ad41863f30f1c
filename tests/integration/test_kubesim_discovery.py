#!/usr/bin/env python3
"""kubesim's discovery as a real 1.32 cluster's, driven with the real kubectl:
per-resource verbs (405 MethodNotAllowed), list-only built-ins
(componentstatuses, metrics.k8s.io), events.k8s.io serving the core events,
aggregated (v2) and legacy discovery agreeing, a multi-version CRD group, an
aggregated API that is down (503 and a Stale group-version), and lists encoded
as the real server encodes them."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main  # noqa: E402

AGG = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
METRICS = "/apis/metrics.k8s.io/v1beta1"


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


def pod(name, ns="default", phase=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]}}


def crd(plural, kind, versions, group="example.io"):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, group)},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}
                                  for i, v in enumerate(versions)]}}


@case
def list_only_types_answer_405(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.apply(pod("web-1"))
    # metrics.k8s.io answers from the pods kubesim holds
    out = sim.kubectl("get", "podmetrics", "-n", "default").stdout
    t.check("web-1" in out and "CPU" in out.splitlines()[0], "kubectl get podmetrics: %s" % out)
    pm = sim.ok("GET", METRICS + "/namespaces/default/pods/web-1")
    t.eq((pm["kind"], pm["containers"][0]["name"]), ("PodMetrics", "main"), "PodMetrics of web-1")
    t.check(pm["containers"][0]["usage"]["cpu"].endswith("n"), "cpu usage in nanocores: %s" % pm)
    # kubectl create of a PodMetrics: 405 with go-restful's Status, as the real server
    r = sim.kubectl("create", "-f", "-", input=json.dumps(
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics", "metadata": {"name": "web-1"},
         "containers": []}), check=False)
    t.check(r.returncode != 0 and "Error from server (MethodNotAllowed)" in r.stderr
            and "the server does not allow this method on the requested resource" in r.stderr,
            "create PodMetrics: %s" % r.stderr)
    st, body, _ = sim.post(METRICS + "/namespaces/default/pods", {"metadata": {"name": "x"}})
    t.eq((st, body), (405, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "the server does not allow this method on the requested resource",
                            "reason": "MethodNotAllowed", "details": {}, "code": 405}), "405 body")
    st, body, _ = sim.get(METRICS + "/pods?watch=true")
    t.eq((st, body.get("message"), body.get("details")),
         (405, 'watch is not supported on resources of kind "pods.metrics.k8s.io"',
          {"group": "metrics.k8s.io", "kind": "pods"}), "watch of a list-only resource")
    # componentstatuses: get and list only, deprecated
    r = sim.kubectl("get", "componentstatuses")
    t.check("scheduler" in r.stdout and "Healthy" in r.stdout, "kubectl get cs: %s" % r.stdout)
    t.check("v1 ComponentStatus is deprecated in v1.19+" in r.stderr, "deprecation warning: %s" % r.stderr)
    r = sim.kubectl("delete", "componentstatus", "scheduler", check=False)
    t.check(r.returncode != 0 and "MethodNotAllowed" in r.stderr, "delete cs: %s" % r.stderr)
    # namespaces have no deletecollection
    st, body, _ = sim.delete("/api/v1/namespaces")
    t.eq((st, body["reason"]), (405, "MethodNotAllowed"), "deletecollection of namespaces")
    verbs = {r["name"]: r["verbs"] for r in sim.ok("GET", "/api/v1")["resources"]}
    t.eq(verbs["componentstatuses"], ["get", "list"], "componentstatuses verbs")
    t.check("deletecollection" not in verbs["namespaces"], "namespaces verbs: %s" % verbs["namespaces"])
    t.eq({r["name"]: r["verbs"] for r in sim.ok("GET", METRICS)["resources"]},
         {"nodes": ["get", "list"], "pods": ["get", "list"]}, "metrics verbs")


@case
def events_k8s_io_serves_the_core_events(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.apply(pod("web-1"))
    sim.apply({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-1.17f", "namespace": "default"},
               "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1", "apiVersion": "v1"},
               "reason": "Pulled", "message": "Container image pulled", "type": "Normal", "count": 2,
               "source": {"component": "kubelet"}, "firstTimestamp": "2025-01-01T00:00:00Z",
               "lastTimestamp": "2025-01-01T00:01:00Z"})
    ev = json.loads(sim.kubectl("get", "events.events.k8s.io", "web-1.17f", "-o", "json").stdout)
    t.eq((ev["apiVersion"], ev["regarding"]["name"], ev["note"], ev["deprecatedCount"],
          ev["deprecatedSource"], ev["deprecatedLastTimestamp"]),
         ("events.k8s.io/v1", "web-1", "Container image pulled", 2, {"component": "kubelet"}, "2025-01-01T00:01:00Z"),
         "core event seen through events.k8s.io")
    t.check("message" not in ev and "involvedObject" not in ev, "converted fields only: %s" % ev)
    out = sim.kubectl("get", "events.events.k8s.io").stdout
    t.check("Pulled" in out and "pod/web-1" in out, "table of events.k8s.io events: %s" % out)
    # written through events.k8s.io, read through core: one object
    sim.apply({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web-1.18a", "namespace": "default"},
               "eventTime": "2025-01-01T00:02:00.000000Z", "reportingController": "example.io/ctl",
               "reportingInstance": "ctl-1", "action": "Sync", "reason": "Synced", "type": "Normal",
               "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1"}, "note": "synced"})
    core = sim.ok("GET", "/api/v1/namespaces/default/events/web-1.18a")
    t.eq((core["message"], core["reportingComponent"], core["involvedObject"]["name"]), ("synced", "example.io/ctl", "web-1"),
         "events.k8s.io event seen through core")
    names = sorted(i["metadata"]["name"] for i in sim.ok("GET", "/apis/events.k8s.io/v1/namespaces/default/events")["items"])
    t.eq(names, ["web-1.17f", "web-1.18a"], "same objects under both groups")
    sim.kubectl("delete", "events.events.k8s.io", "web-1.17f")
    st, _, _ = sim.get("/api/v1/namespaces/default/events/web-1.17f")
    t.eq(st, 404, "deleted through events.k8s.io is gone from core")


def agg_index(doc):
    """-> {(group, version): {resource: (verbs, scope, kind, [subresources])}} of an aggregated document."""
    out = {}
    for g in doc["items"]:
        for v in g["versions"]:
            out[(g["metadata"].get("name", ""), v["version"])] = {
                r["resource"]: (r["verbs"], r["scope"], r["responseKind"]["kind"],
                                sorted(s["subresource"] for s in r.get("subresources", [])))
                for r in v.get("resources", [])}
    return out


def legacy_index(sim):
    out = {}
    gvs = [("", "v1")] + [(g["name"], v["version"]) for g in sim.ok("GET", "/apis")["groups"] for v in g["versions"]]
    for g, v in gvs:
        res = sim.ok("GET", "/apis/%s/%s" % (g, v) if g else "/api/v1")["resources"]
        idx = {}
        for r in res:
            if "/" in r["name"]:
                continue
            subs = sorted(x["name"].split("/", 1)[1] for x in res if x["name"].startswith(r["name"] + "/"))
            idx[r["name"]] = (r["verbs"], "Namespaced" if r["namespaced"] else "Cluster", r["kind"], subs)
        out[(g, v)] = idx
    return out


@case
def aggregated_and_legacy_discovery_agree(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.apply(crd("widgets", "Widget", ["v1"]))
    st, core, h = sim.get("/api", headers={"Accept": AGG})
    t.eq((st, h.get("Content-Type")), (200, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
         "aggregated /api content type")
    st, apis, _ = sim.get("/apis", headers={"Accept": AGG})
    agg = agg_index(core)
    agg.update(agg_index(apis))
    t.eq(agg, legacy_index(sim), "aggregated and legacy discovery")
    t.eq([g["name"] for g in sim.ok("GET", "/apis")["groups"]],
         [g["metadata"]["name"] for g in apis["items"]], "group order")
    t.check(("example.io", "v1") in agg and ("metrics.k8s.io", "v1beta1") in agg, "groups: %s" % sorted(agg))
    # kubectl uses the aggregated document
    out = sim.kubectl("api-resources").stdout
    t.check("widgets" in out and "componentstatuses" in out and "PodMetrics" in out, "api-resources: %s" % out)
    log = [e for e in sim.requests() if e["userAgent"].startswith("kubectl")]
    t.check(not any(e["path"] == "/api/v1" for e in log), "kubectl needed no legacy per-group requests")


@case
def multi_version_crd_group(t):
    """One group, CRD A served in v1, CRD B only in v1alpha1: B is listed
    under v1alpha1 only and kubectl finds it there."""
    need_kubectl(t)
    sim = t.kubesim()
    sim.apply(crd("gateways", "Gateway", ["v1"]))
    sim.apply(crd("envoyfilters", "EnvoyFilter", ["v1alpha1"]))
    grp = sim.ok("GET", "/apis/example.io")
    t.eq(([v["version"] for v in grp["versions"]], grp["preferredVersion"]["version"]), (["v1", "v1alpha1"], "v1"),
         "versions, preferred first")
    t.eq([r["name"] for r in sim.ok("GET", "/apis/example.io/v1")["resources"]], ["gateways"], "v1 resources")
    t.eq([r["name"] for r in sim.ok("GET", "/apis/example.io/v1alpha1")["resources"]], ["envoyfilters"],
         "v1alpha1 resources")
    _, apis, _ = sim.get("/apis", headers={"Accept": AGG})
    ex = next(g for g in apis["items"] if g["metadata"]["name"] == "example.io")
    t.eq([(v["version"], [r["resource"] for r in v["resources"]]) for v in ex["versions"]],
         [("v1", ["gateways"]), ("v1alpha1", ["envoyfilters"])], "aggregated example.io")
    out = sim.kubectl("api-resources", "--api-group=example.io").stdout
    t.check("example.io/v1alpha1" in out and "EnvoyFilter" in out, "api-resources: %s" % out)
    sim.apply({"apiVersion": "example.io/v1alpha1", "kind": "EnvoyFilter", "metadata": {"name": "f1"}, "spec": {}})
    t.check("f1" in sim.kubectl("get", "envoyfilters").stdout, "kubectl get envoyfilters")
    st, _, _ = sim.get("/apis/example.io/v1/namespaces/default/envoyfilters")
    t.eq(st, 404, "envoyfilters not served in v1")


@case
def unavailable_aggregated_api(t):
    """An APIService whose backend is down: its group-version answers 503
    (kube-aggregator's plain-text body) and aggregated discovery lists it
    without resources, freshness Stale."""
    need_kubectl(t)
    sim = t.kubesim()
    sim.faults({"groupVersion": "metrics.k8s.io/v1beta1", "status": 503})
    st, body, h = sim.get(METRICS)
    t.eq((st, body, h.get("Content-Type")), (503, "service unavailable\n", "text/plain; charset=utf-8"),
         "legacy discovery of the group-version")
    st, _, _ = sim.get(METRICS + "/pods")
    t.eq(st, 503, "list under it")
    t.eq(sim.get("/apis/metrics.k8s.io")[0], 200, "the group itself (from its APIService) answers")
    _, apis, _ = sim.get("/apis", headers={"Accept": AGG})
    m = next(g for g in apis["items"] if g["metadata"]["name"] == "metrics.k8s.io")
    t.eq(m["versions"], [{"version": "v1beta1", "freshness": "Stale"}], "stale group-version")
    # kubectl (client-go) drops a stale group-version and goes on with the rest
    r = sim.kubectl("api-resources", check=False)
    t.check("configmaps" in r.stdout and "PodMetrics" not in r.stdout, "the rest is listed: %s" % r.stdout)
    r = sim.kubectl("get", "--raw", METRICS + "/pods", check=False)
    t.check(r.returncode != 0 and "ServiceUnavailable" in r.stderr, "kubectl get --raw: %s" % r.stderr)
    sim.clear_faults()
    _, apis, _ = sim.get("/apis", headers={"Accept": AGG})
    m = next(g for g in apis["items"] if g["metadata"]["name"] == "metrics.k8s.io")
    t.eq(m["versions"][0]["freshness"], "Current", "back once the fault is cleared")


@case
def lists_are_encoded_as_the_real_server(t):
    sim = t.kubesim(tls=False)
    sim.ok("POST", "/api/v1/namespaces/default/configmaps",
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"k": "v"}})
    st, raw, _ = sim.request("GET", "/api/v1/namespaces/default/configmaps", headers={"Accept": "application/json"})
    t.eq(list(raw), ["kind", "apiVersion", "metadata", "items"], "typed list key order")
    t.check("kind" not in raw["items"][0] and "apiVersion" not in raw["items"][0],
            "typed list items carry no kind/apiVersion: %s" % raw["items"][0])
    t.eq(list(raw["items"][0]["metadata"])[:2], ["name", "namespace"], "ObjectMeta field order")
    # items in etcd key order: the bytes of "namespace/name"
    for n in ("app", "app-2"):
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
        sim.ok("POST", "/api/v1/namespaces/%s/configmaps" % n,
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    got = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in sim.ok("GET", "/api/v1/configmaps")["items"]]
    t.eq(got, [("app-2", "x"), ("app", "x"), ("default", "c1")], "etcd key order")
    page = sim.ok("GET", "/api/v1/configmaps?limit=1")
    page2 = sim.ok("GET", "/api/v1/configmaps?limit=1&continue=" + page["metadata"]["continue"])
    t.eq(page2["items"][0]["metadata"]["namespace"], "app", "continue follows the same order")
    sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("widgets", "Widget", ["v1"]))
    sim.ok("POST", "/apis/example.io/v1/namespaces/default/widgets",
           {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"z": 1, "a": 2}})
    st, raw, _ = sim.request("GET", "/apis/example.io/v1/namespaces/default/widgets")
    t.eq(list(raw), ["apiVersion", "items", "kind", "metadata"], "custom resource list: keys of a Go map")
    item = raw["items"][0]
    t.eq((item["kind"], item["apiVersion"]), ("Widget", "example.io/v1"), "custom resource items keep kind")
    t.eq(list(item), sorted(item), "custom resource keys sorted")
    t.eq(list(item["spec"]), ["a", "z"], "nested keys sorted")
    t.eq(list(item["metadata"]), sorted(item["metadata"]), "metadata keys sorted")


main()
