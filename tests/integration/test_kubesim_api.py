#!/usr/bin/env python3
"""Direct HTTP checks of tests/kubesim for what kubectl does not show:
exact Status bodies, RV rules, generation, Lease MicroTime, watch resume / 410,
fault rules per token, the request log and keep-alive connection ids."""
import http.client
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
WIDGETS = "/apis/example.io/v1/namespaces/default/widgets"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io"},
    "spec": {"group": "example.io", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                           "additionalPrinterColumns": [
                               {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                               {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}]}]},
}


def with_crd(sim):
    sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)


def watch_events(sim, path, timeout=10, token=None, on_open=None):
    """GET a watch URL (which must carry timeoutSeconds) and return the decoded events."""
    req = urllib.request.Request(sim.url + path, headers={"Authorization": "Bearer " + (token or sim.token)})
    evs = []
    with urllib.request.urlopen(req, context=sim._ctx, timeout=timeout) as r:
        if r.status != 200:
            raise AssertionError("watch status %d" % r.status)
        if on_open:
            on_open()
        for line in r:
            line = line.strip()
            if line:
                evs.append(json.loads(line))
    return evs


def conn(sim):
    u = urllib.parse.urlsplit(sim.url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=10)


@case
def stale_rv_conflict_exact_body(t):
    sim = t.kubesim()
    cm = sim.ok("POST", CM, {"metadata": {"name": "c1"}, "data": {"a": "1"}})
    rv = cm["metadata"]["resourceVersion"]
    sim.ok("PUT", CM + "/c1", dict(cm, data={"a": "2"}))
    st, body, _ = sim.put(CM + "/c1", dict(cm, data={"a": "3"}))
    t.eq(st, 409, "status of PUT with stale RV")
    t.eq(body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": 'Operation cannot be fulfilled on configmaps "c1": the object has been modified; '
                           'please apply your changes to the latest version and try again',
                "reason": "Conflict", "details": {"name": "c1", "kind": "configmaps"}, "code": 409},
         "409 body")
    # lease: group in details and message
    lease = sim.ok("POST", LEASES, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    sim.ok("PUT", LEASES + "/l", dict(lease, spec={"holderIdentity": "b"}))
    st, body, _ = sim.put(LEASES + "/l", dict(lease, spec={"holderIdentity": "c"}))
    t.eq(st, 409, "lease stale PUT")
    t.eq(body["message"], 'Operation cannot be fulfilled on leases.coordination.k8s.io "l": the object has been '
                          'modified; please apply your changes to the latest version and try again', "lease message")
    t.eq(body["details"], {"name": "l", "group": "coordination.k8s.io", "kind": "leases"}, "lease details")
    # already exists / not found bodies
    st, body, _ = sim.post(CM, {"metadata": {"name": "c1"}})
    t.eq((st, body["reason"], body["message"]), (409, "AlreadyExists", 'configmaps "c1" already exists'), "AlreadyExists")
    st, body, _ = sim.get(CM + "/nope")
    t.eq((st, body["reason"], body["message"], body["details"]),
         (404, "NotFound", 'configmaps "nope" not found', {"name": "nope", "kind": "configmaps"}), "NotFound")
    # no-op update keeps the RV
    cur = sim.ok("GET", CM + "/c1")
    same = sim.ok("PUT", CM + "/c1", cur)
    t.eq(same["metadata"]["resourceVersion"], cur["metadata"]["resourceVersion"], "no-op PUT RV")
    t.check(rv != cur["metadata"]["resourceVersion"], "RV must change on a real update")
    # PUT without RV is allowed for ConfigMaps
    cur["metadata"].pop("resourceVersion")
    cur["data"] = {"z": "1"}
    t.eq(sim.put(CM + "/c1", cur)[0], 200, "ConfigMap PUT without RV")


@case
def put_without_rv_refused_for_cr_and_lease(t):
    sim = t.kubesim()
    with_crd(sim)
    w = sim.ok("POST", WIDGETS, {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w1"},
                                 "spec": {"size": 1}})
    w["metadata"].pop("resourceVersion")
    st, body, _ = sim.put(WIDGETS + "/w1", w)
    t.eq(st, 422, "CR PUT without RV")
    t.eq(body["reason"], "Invalid", "reason")
    t.eq(body["message"], 'widgets.example.io "w1" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                          'must be specified for an update', "message")
    t.eq((body["details"]["group"], body["details"]["kind"]), ("example.io", "widgets"), "details")
    t.eq(body["details"]["causes"][0]["field"], "metadata.resourceVersion", "cause field")
    # Lease: PUT on a missing lease creates it (201); PUT without RV on an existing one is 422
    st, body, _ = sim.put(LEASES + "/new", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                             "metadata": {"name": "new"}, "spec": {"holderIdentity": "x"}})
    t.eq(st, 201, "Lease create-on-PUT")
    st, body, _ = sim.put(LEASES + "/new", {"metadata": {"name": "new"}, "spec": {"holderIdentity": "y"}})
    t.eq(st, 422, "Lease PUT without RV")
    t.check('leases.coordination.k8s.io "new" is invalid' in body["message"], body["message"])
    # ConfigMap PUT on missing -> 404; namespace mismatch -> 400; missing namespace -> 404
    t.eq(sim.put(CM + "/ghost", {"metadata": {"name": "ghost"}})[0], 404, "PUT missing ConfigMap")
    st, body, _ = sim.post(CM, {"metadata": {"name": "x", "namespace": "kube-system"}})
    t.eq((st, body["reason"]), (400, "BadRequest"), "namespace mismatch")
    st, body, _ = sim.post("/api/v1/namespaces/nowhere/configmaps", {"metadata": {"name": "x"}})
    t.eq((st, body["message"]), (404, 'namespaces "nowhere" not found'), "create in missing namespace")
    # SMP on a CR -> 415; JSON patch test failure -> 422
    st, body, _ = sim.patch(WIDGETS + "/w1", {"spec": {"size": 2}}, kind="strategic")
    t.eq((st, body["reason"]), (415, "UnsupportedMediaType"), "SMP on CR")
    st, body, _ = sim.patch(WIDGETS + "/w1", [{"op": "test", "path": "/spec/size", "value": 9}], kind="json")
    t.eq(st, 422, "failed JSON patch test op")
    # PATCH carrying a stale RV -> 409
    st, body, _ = sim.patch(WIDGETS + "/w1", {"metadata": {"resourceVersion": "1"}, "spec": {"size": 3}})
    t.eq(st, 409, "merge patch with stale RV")


@case
def generation_bumps_on_spec_change_only(t):
    sim = t.kubesim()
    with_crd(sim)
    w = sim.ok("POST", WIDGETS, {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"},
                                 "spec": {"size": 1}, "status": {"phase": "dropped"}})
    t.eq(w["metadata"].get("generation"), 1, "initial generation")
    t.check("status" not in w, "status must be dropped on create with a status subresource")
    w = sim.ok("PATCH", WIDGETS + "/w", {"metadata": {"labels": {"a": "b"}}}, content_type="application/merge-patch+json")
    t.eq(w["metadata"]["generation"], 1, "generation after label change")
    w = sim.ok("PATCH", WIDGETS + "/w/status", {"status": {"phase": "Running"}}, content_type="application/merge-patch+json")
    t.eq((w["metadata"]["generation"], w["status"]["phase"]), (1, "Running"), "after status change")
    w = sim.ok("PATCH", WIDGETS + "/w", {"spec": {"size": 2}, "status": {"phase": "Ignored"}},
               content_type="application/merge-patch+json")
    t.eq((w["metadata"]["generation"], w["status"]["phase"]), (2, "Running"), "after spec change via main endpoint")
    # status PUT takes only .status
    w["spec"]["size"] = 99
    w["status"] = {"phase": "Done"}
    w = sim.ok("PUT", WIDGETS + "/w/status", w)
    t.eq((w["spec"]["size"], w["status"]["phase"], w["metadata"]["generation"]), (2, "Done", 2), "status PUT")
    # client cannot set generation
    w["metadata"]["generation"] = 50
    w["metadata"]["annotations"] = {"x": "y"}
    w = sim.ok("PUT", WIDGETS + "/w", w)
    t.eq(w["metadata"]["generation"], 2, "client-set generation ignored")
    # ConfigMaps have no generation
    cm = sim.ok("POST", CM, {"metadata": {"name": "g"}, "data": {}})
    t.check("generation" not in cm["metadata"], "ConfigMap must have no generation")
    # Table output with printer columns
    sim.ok("PATCH", WIDGETS + "/w/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
           content_type="application/merge-patch+json")
    st, tab, _ = sim.get(WIDGETS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    t.eq(st, 200, "table status")
    t.eq([c["name"] for c in tab["columnDefinitions"]], ["Name", "Size", "Ready"], "table columns")
    t.eq(tab["rows"][0]["cells"], ["w", 2, "True"], "table cells")


@case
def lease_microtime_round_trip(t):
    sim = t.kubesim()
    spec = {"holderIdentity": "cairn-a", "leaseDurationSeconds": 15,
            "acquireTime": "2025-01-02T03:04:05.123456Z", "renewTime": "2025-01-02T03:04:06.000001Z",
            "leaseTransitions": 0}
    lease = sim.ok("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                    "metadata": {"name": "cairn-a"}, "spec": spec})
    t.eq(lease["spec"], spec, "spec after create")
    got = sim.ok("GET", LEASES + "/cairn-a")
    t.eq(got["spec"], spec, "spec after GET")
    t.check("generation" not in got["metadata"], "Lease has no generation")
    got["spec"]["renewTime"] = "2025-01-02T03:04:07.5+01:00"
    upd = sim.ok("PUT", LEASES + "/cairn-a", got)
    t.eq(upd["spec"]["renewTime"], "2025-01-02T02:04:07.500000Z", "MicroTime normalised to UTC, 6 digits")
    st, body, _ = sim.put(LEASES + "/cairn-a", dict(upd, spec=dict(upd["spec"], renewTime="yesterday")))
    t.eq(st, 400, "bad MicroTime")


@case
def watch_resume_and_410(t):
    sim = t.kubesim(extra=["--bookmark-interval", "0.3"])
    c = sim.ok("POST", CM, {"metadata": {"name": "w", "labels": {"sel": "yes"}}, "data": {"n": "0"}})
    rv0 = c["metadata"]["resourceVersion"]
    rvs = []
    for i in range(1, 4):
        c = sim.ok("PUT", CM + "/w", dict(c, data={"n": str(i)}))
        rvs.append(c["metadata"]["resourceVersion"])
    sim.ok("POST", CM, {"metadata": {"name": "other"}})
    evs = watch_events(sim, CM + "?watch=1&fieldSelector=metadata.name%3Dw&timeoutSeconds=1&resourceVersion=" + rv0)
    t.eq([(e["type"], e["object"]["data"]["n"], e["object"]["metadata"]["resourceVersion"]) for e in evs],
         [("MODIFIED", str(i + 1), rvs[i]) for i in range(3)], "events after rv0")
    # RV unset: synthetic ADDED for current objects
    evs = watch_events(sim, CM + "?watch=true&timeoutSeconds=1")
    t.eq(sorted((e["type"], e["object"]["metadata"]["name"]) for e in evs), [("ADDED", "other"), ("ADDED", "w")],
         "synthetic ADDED")
    # selector enter/leave as ADDED/DELETED, bookmarks
    got = []

    def writer():
        time.sleep(0.4)
        cur = sim.ok("GET", CM + "/w")
        cur["metadata"]["labels"] = {"sel": "no"}
        cur = sim.ok("PUT", CM + "/w", cur)
        cur["metadata"]["labels"] = {"sel": "yes"}
        sim.ok("PUT", CM + "/w", cur)
    th = threading.Thread(target=writer)
    th.start()
    got = watch_events(sim, CM + "?watch=1&labelSelector=sel%3Dyes&allowWatchBookmarks=true&timeoutSeconds=2"
                                 "&resourceVersion=" + rvs[-1])
    th.join()
    types = [e["type"] for e in got if e["type"] != "BOOKMARK"]
    t.eq(types, ["DELETED", "ADDED"], "selector leave/enter")
    bms = [e for e in got if e["type"] == "BOOKMARK"]
    t.check(bms and bms[-1]["object"]["kind"] == "ConfigMap" and bms[-1]["object"]["metadata"]["resourceVersion"],
            "bookmark expected: %r" % got)
    # too old RV: 200, one ERROR event carrying 410 Expired
    sim.ok("POST", "/_sim/compact", {})
    evs = watch_events(sim, CM + "?watch=1&timeoutSeconds=5&resourceVersion=" + rv0)
    t.eq(len(evs), 1, "one event for too-old RV")
    t.eq((evs[0]["type"], evs[0]["object"]["code"], evs[0]["object"]["reason"]), ("ERROR", 410, "Expired"),
         "410 ERROR event")
    t.check(evs[0]["object"]["message"].startswith("too old resource version: " + rv0), evs[0]["object"]["message"])


@case
def list_paging_and_expired_continue(t):
    sim = t.kubesim()
    sim.ok("POST", "/_sim/bulk", {"template": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}},
                                  "count": 25, "name": "p-{i:03d}", "start": 0})
    sim.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "zz"}})
    sim.ok("POST", "/api/v1/namespaces/zz/configmaps", {"metadata": {"name": "a-first"}})
    page = sim.ok("GET", CM + "?limit=10")
    t.eq(len(page["items"]), 10, "page size")
    t.eq(page["metadata"].get("remainingItemCount"), 15, "remainingItemCount")
    names = [i["metadata"]["name"] for i in page["items"]]
    tok = page["metadata"]["continue"]
    while tok:
        page = sim.ok("GET", CM + "?limit=10&continue=" + urllib.parse.quote(tok))
        names += [i["metadata"]["name"] for i in page["items"]]
        tok = page["metadata"].get("continue")
    t.eq(names, ["p-%03d" % i for i in range(25)], "all names in key order")
    allns = sim.ok("GET", "/api/v1/configmaps")
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in allns["items"]]
    t.eq(keys, sorted(keys), "cluster-wide list in (namespace, name) order")
    t.eq(allns["kind"], "ConfigMapList", "list kind")
    t.check(all("kind" not in i and "apiVersion" not in i for i in allns["items"]),
            "typed list items carry no kind/apiVersion, as kube-apiserver writes them")
    st, body, _ = sim.get(CM + "?fieldSelector=data.k%3Dv")
    t.eq(st, 400, "unsupported field selector")
    t.eq(len(sim.ok("GET", CM + "?fieldSelector=metadata.name!%3Dp-000")["items"]), 24, "field selector !=")
    page = sim.ok("GET", CM + "?limit=5")
    sim.ok("POST", "/_sim/compact", {})
    st, body, _ = sim.get(CM + "?limit=5&continue=" + urllib.parse.quote(page["metadata"]["continue"]))
    t.eq((st, body.get("reason")), (410, "Expired"), "expired continue token")


@case
def faults_fire_for_named_token_only(t):
    sim = t.kubesim(tokens={"admin": "admin-token", "other": "other-token"})
    sim.faults({"token": "other", "path": "^/api/v1/namespaces/default/configmaps", "status": 429,
                "retryAfter": 3, "count": 2})
    t.eq(sim.get(CM)[0], 200, "admin is not faulted")
    st, body, hdrs = sim.get(CM, token="other-token")
    t.eq(st, 429, "other gets 429")
    t.eq(hdrs.get("Retry-After"), "3", "Retry-After header")
    t.eq((body["reason"], body["details"]["retryAfterSeconds"]), ("TooManyRequests", 3), "429 body")
    t.eq(sim.get(CM, token="other-token")[0], 429, "second 429")
    t.eq(sim.get(CM, token="other-token")[0], 200, "count exhausted")
    rules = sim.ok("GET", "/_sim/faults")
    t.eq((rules[0]["hits"], rules[0]["remaining"]), (2, 0), "rule bookkeeping")
    sim.clear_faults()
    # 503 for one method only
    sim.faults([{"method": "POST", "path": "/configmaps$", "status": 503}])
    t.eq(sim.get(CM)[0], 200, "GET not matched by POST rule")
    t.eq(sim.post(CM, {"metadata": {"name": "x"}})[0], 503, "POST faulted")
    sim.clear_faults()
    # delay
    sim.faults({"path": "/leases", "delay": 0.6, "count": 1})
    t0 = time.monotonic()
    t.eq(sim.get(LEASES)[0], 200, "delayed request answers")
    t.check(time.monotonic() - t0 >= 0.55, "delay not applied")
    # drop: connection closed without an answer
    sim.faults({"path": "/secrets", "drop": True, "count": 1})
    try:
        sim.get("/api/v1/namespaces/default/secrets")
        t.check(False, "dropped request should raise")
    except (http.client.HTTPException, ConnectionError, urllib.error.URLError, ssl.SSLError, OSError):
        pass
    t.eq(sim.get("/api/v1/namespaces/default/secrets")[0], 200, "drop count exhausted")
    # seeded probability is reproducible
    def pattern():
        sim.clear_faults()
        sim.faults({"path": "/serviceaccounts", "status": 500, "probability": 0.5, "seed": 42})
        return [sim.get("/api/v1/namespaces/default/serviceaccounts")[0] for _ in range(16)]
    p1, p2 = pattern(), pattern()
    t.eq(p1, p2, "same seed, same pattern")
    t.check(500 in p1 and 200 in p1, "probability 0.5 should mix: %r" % p1)
    # 401s
    st, body, _ = sim.get(CM, token="wrong")
    t.eq((st, body["reason"], body["code"]), (401, "Unauthorized", 401), "wrong token")
    t.eq(sim.get(CM, token="")[0], 401, "no token")


@case
def fault_cuts_a_list_after_n_items(t):
    """cutAfterItems: a 200 whose Content-Length is the whole list, the body
    cut right after item N, the connection closed (logged as dropped)."""
    sim = t.kubesim()
    for i in range(5):
        sim.ok("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cm-%d" % i}})
    whole = len(json.dumps(sim.ok("GET", CM + "?limit=4"), separators=(",", ":")))
    sim.faults({"path": "/configmaps$", "cutAfterItems": 2, "count": 1})
    c = conn(sim)
    c.request("GET", CM + "?limit=4", headers={"Authorization": "Bearer " + sim.token,
                                                "Accept-Encoding": "gzip"})
    r = c.getresponse()
    t.eq((r.status, r.getheader("Content-Encoding")), (200, None), "status, uncompressed")
    announced = int(r.getheader("Content-Length"))
    got = b""
    try:
        got = r.read()
    except http.client.IncompleteRead as e:
        got = e.partial
    t.check(abs(announced - whole) < 64, "announced %d, the list is %d" % (announced, whole))
    text = got.decode()
    t.check(text.count('"name":"cm-') == 2 and text.endswith("}"), "cut after two items: %s" %
            text[-200:])
    t.check(len(got) < announced, "partial: %d of %d" % (len(got), announced))
    t.check(sim.requests()[-1].get("dropped"), "logged as dropped")
    t.eq(sim.get(CM + "?limit=4")[0], 200, "count exhausted")


@case
def request_log_and_keepalive_connections(t):
    sim = t.kubesim(tokens={"admin": "admin-token", "other": "other-token"})
    sim.ok("DELETE", "/_sim/requests")
    c1 = conn(sim)
    for _ in range(3):
        c1.request("GET", CM + "?limit=1", headers={"Authorization": "Bearer admin-token"})
        r = c1.getresponse()
        r.read()
        t.eq(r.status, 200, "keep-alive GET")
    c2 = conn(sim)
    c2.request("POST", CM, body=json.dumps({"metadata": {"name": "k"}}),
               headers={"Authorization": "Bearer other-token", "Content-Type": "application/json"})
    r = c2.getresponse()
    r.read()
    t.eq(r.status, 201, "create")
    c1.close()
    c2.close()
    log = sim.requests()
    api = [e for e in log if e["path"].startswith("/api/")]
    t.eq(len(api), 4, "logged API requests")
    t.eq(len({e["conn"] for e in api[:3]}), 1, "3 requests on one connection")
    t.check(api[3]["conn"] != api[0]["conn"], "second connection has its own id")
    t.eq([(e["token"], e["method"], e["status"]) for e in api],
         [("admin", "GET", 200)] * 3 + [("other", "POST", 201)], "token/method/status")
    t.eq(api[0]["query"], "limit=1", "query logged")
    t.check(all(isinstance(e["time"], float) for e in api), "times")
    # hundreds of concurrent connections
    errors = []

    def worker():
        try:
            c = conn(sim)
            c.request("GET", "/api/v1/namespaces", headers={"Authorization": "Bearer admin-token"})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                errors.append(r.status)
            time.sleep(0.5)
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    ths = [threading.Thread(target=worker) for _ in range(200)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    t.eq(errors, [], "errors with 200 concurrent connections")


@case
def strategic_merge_and_delete_semantics(t):
    sim = t.kubesim()
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}},
               "spec": {"containers": [{"name": "one", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
                                       {"name": "two", "image": "j:1"}]}}}}
    sim.ok("POST", "/apis/apps/v1/namespaces/default/deployments", dep)
    d = sim.ok("PATCH", "/apis/apps/v1/namespaces/default/deployments/d",
               {"spec": {"template": {"spec": {"containers": [{"name": "one", "image": "i:2",
                                                                 "env": [{"name": "B", "value": "2"}]}]}}}},
               content_type="application/strategic-merge-patch+json")
    cs = d["spec"]["template"]["spec"]["containers"]
    t.eq([(c["name"], c["image"]) for c in cs], [("one", "i:2"), ("two", "j:1")], "containers merged by name")
    t.eq([e["name"] for e in cs[0]["env"]], ["A", "B"], "env merged by name")
    t.eq(d["metadata"]["generation"], 2, "deployment generation")
    d = sim.ok("PATCH", "/apis/apps/v1/namespaces/default/deployments/d",
               {"spec": {"template": {"spec": {"containers": [{"name": "two", "$patch": "delete"}]}}}},
               content_type="application/strategic-merge-patch+json")
    t.eq([c["name"] for c in d["spec"]["template"]["spec"]["containers"]], ["one"], "$patch: delete")
    # generateName
    g = sim.ok("POST", CM, {"metadata": {"generateName": "gen-"}})
    t.check(g["metadata"]["name"].startswith("gen-") and len(g["metadata"]["name"]) == 9, g["metadata"]["name"])
    # delete preconditions
    st, body, _ = sim.request("DELETE", CM + "/" + g["metadata"]["name"],
                              {"preconditions": {"resourceVersion": "1"}, "propagationPolicy": "Background"})
    t.eq(st, 409, "precondition mismatch")
    st, body, _ = sim.request("DELETE", CM + "/" + g["metadata"]["name"],
                              {"preconditions": {"uid": g["metadata"]["uid"]}, "propagationPolicy": "Background"})
    t.eq((st, body["kind"], body["status"]), (200, "Status", "Success"), "built-in delete answers Status")
    # finalizers
    f = sim.ok("POST", CM, {"metadata": {"name": "fin", "finalizers": ["x/y"]}})
    st, body, _ = sim.delete(CM + "/fin")
    t.eq(st, 200, "delete with finalizer")
    t.check(body["metadata"].get("deletionTimestamp"), "deletionTimestamp set")
    t.eq(sim.get(CM + "/fin")[0], 200, "still present")
    body["metadata"]["finalizers"] = []
    sim.ok("PUT", CM + "/fin", body)
    t.eq(sim.get(CM + "/fin")[0], 404, "gone after finalizers removed")
    t.check(f["metadata"]["uid"], "uid")


# ------------------------------------------------------------------ RBAC
SA = "system:serviceaccount:app:bot"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
APPCM = "/api/v1/namespaces/app/configmaps"


def rbac_sim(t):
    """kubesim with an admin token and a ServiceAccount token (restricted by RBAC)."""
    sim = t.kubesim(tokens={"admin": "admin-token", SA: "bot-token"})
    return sim


def sa_setup(sim):
    sim.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "app"}})
    sim.ok("POST", "/api/v1/namespaces/app/serviceaccounts", {"metadata": {"name": "bot"}})


def bot(sim, method, path, body=None, **kw):
    return sim.request(method, path, body, token="bot-token", **kw)


def role(sim, ns, name, rules, kind="Role"):
    path = RBAC + ("/namespaces/%s/roles" % ns if kind == "Role" else "/clusterroles")
    sim.ok("POST", path, {"metadata": {"name": name}, "rules": rules})


def binding(sim, ns, name, role_kind, role_name, subjects=None):
    path = RBAC + ("/namespaces/%s/rolebindings" % ns if ns else "/clusterrolebindings")
    sim.ok("POST", path, {"metadata": {"name": name},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
                          "subjects": subjects or [{"kind": "ServiceAccount", "name": "bot", "namespace": "app"}]})


def forbidden(what, name, verb, resource, group, ns):
    scope = 'in the namespace "%s"' % ns if ns else "at the cluster scope"
    return '%s%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        what, ' "%s"' % name if name else "", SA, verb, resource, group, scope)


@case
def rbac_allows_bound_rules_and_denies_the_rest(t):
    sim = rbac_sim(t)
    st, body, _ = bot(sim, "GET", APPCM)
    t.eq((st, body["reason"]), (401, "Unauthorized"), "token of a ServiceAccount that does not exist")
    sa_setup(sim)
    sim.ok("DELETE", "/_sim/requests")
    # Denied: the exact Status kube-apiserver writes, namespaced and cluster-scoped, named and not.
    st, body, hdrs = bot(sim, "GET", APPCM)
    t.eq(st, 403, "list without any binding")
    t.eq(body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": forbidden("configmaps", None, "list", "configmaps", "", "app"),
                "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403}, "403 body")
    t.eq(hdrs.get("X-Content-Type-Options"), "nosniff", "nosniff header")
    st, body, _ = bot(sim, "GET", "/apis/coordination.k8s.io/v1/namespaces/app/leases/l1")
    t.eq((st, body["message"], body["details"]),
         (403, forbidden("leases.coordination.k8s.io", "l1", "get", "leases", "coordination.k8s.io", "app"),
          {"name": "l1", "group": "coordination.k8s.io", "kind": "leases"}), "named get, group in details")
    st, body, _ = bot(sim, "GET", "/api/v1/namespaces")
    t.eq((st, body["message"]), (403, forbidden("namespaces", None, "list", "namespaces", "", None)),
         "cluster scope")
    # Forbidden comes before NotFound: the resource does not even exist here.
    st, body, _ = bot(sim, "GET", "/api/v1/gadgets")
    t.eq((st, body["message"]), (403, forbidden("gadgets", None, "list", "gadgets", "", None)), "unknown resource")
    st, body, _ = bot(sim, "GET", "/metrics")
    t.eq((st, body["message"], body["details"]),
         (403, 'forbidden: User "%s" cannot get path "/metrics"' % SA, {}), "non-resource path")
    # system:discovery / system:public-info-viewer for every authenticated user
    for p in ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/healthz", "/openapi/v3"):
        t.eq(bot(sim, "GET", p)[0], 200, "discovery path %s" % p)
    # A Role bound in app: allowed there, still denied elsewhere; watch is its own verb.
    role(sim, "app", "cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}])
    binding(sim, "app", "cm", "Role", "cm")
    t.eq(bot(sim, "GET", APPCM)[0], 200, "list allowed by the Role")
    t.eq(bot(sim, "POST", APPCM, {"metadata": {"name": "c"}})[0], 201, "create allowed")
    t.eq(bot(sim, "GET", APPCM + "/c")[0], 200, "get allowed")
    st, body, _ = bot(sim, "GET", APPCM + "?watch=true&timeoutSeconds=1")
    t.eq((st, body["message"]), (403, forbidden("configmaps", None, "watch", "configmaps", "", "app")),
         "watch=true is verb watch")
    st, body, _ = bot(sim, "GET", "/api/v1/watch/namespaces/app/configmaps/c")
    t.eq((st, body["message"]), (403, forbidden("configmaps", "c", "watch", "configmaps", "", "app")),
         "/watch/ path is verb watch with the name")
    t.eq(bot(sim, "PUT", APPCM + "/c", {"metadata": {"name": "c"}})[0], 403, "update denied")
    t.eq(bot(sim, "PATCH", APPCM + "/c", {"data": {"a": "b"}}, content_type="application/merge-patch+json")[0],
         403, "patch denied")
    st, body, _ = bot(sim, "DELETE", APPCM + "/c")
    t.eq((st, body["message"]), (403, forbidden("configmaps", "c", "delete", "configmaps", "", "app")), "delete")
    st, body, _ = bot(sim, "DELETE", APPCM)
    t.eq((st, body["message"]), (403, forbidden("configmaps", None, "deletecollection", "configmaps", "", "app")),
         "DELETE on the collection is deletecollection")
    t.eq(bot(sim, "GET", "/api/v1/namespaces/default/configmaps")[0], 403, "other namespace")
    t.eq(bot(sim, "GET", "/api/v1/configmaps")[0], 403, "all namespaces")
    # The RBAC objects are read at request time: removing the binding revokes at once.
    sim.ok("DELETE", RBAC + "/namespaces/app/rolebindings/cm")
    t.eq(bot(sim, "GET", APPCM)[0], 403, "binding deleted")
    binding(sim, "app", "cm", "Role", "cm")
    t.eq(bot(sim, "GET", APPCM)[0], 200, "binding back")
    sim.ok("PUT", RBAC + "/namespaces/app/roles/cm", dict(
        sim.ok("GET", RBAC + "/namespaces/app/roles/cm"),
        rules=[{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]))
    t.eq(bot(sim, "DELETE", APPCM + "/c")[0], 200, "verb * after the Role update")
    # The admin token is never restricted; denials are in the request log with status 403.
    t.eq(sim.get("/api/v1/gadgets")[0], 404, "admin is not authorized by RBAC")
    denied = [(e["method"], e["path"]) for e in sim.requests() if e["token"] == SA and e["status"] == 403]
    t.check(("GET", "/metrics") in denied and ("DELETE", APPCM) in denied and len(denied) >= 13,
            "403s in the request log: %s" % denied)


@case
def rbac_resource_names_and_subresources(t):
    sim = rbac_sim(t)
    sa_setup(sim)
    for n in ("one", "two"):
        sim.ok("POST", APPCM, {"metadata": {"name": n}})
    sim.ok("POST", "/apis/apps/v1/namespaces/app/deployments", {
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    role(sim, "app", "r", [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"],
         "verbs": ["get", "list", "watch", "create", "update"]},
        {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["get"]}])
    binding(sim, "app", "r", "Role", "r")
    t.eq(bot(sim, "GET", APPCM + "/one")[0], 200, "named object allowed")
    st, body, _ = bot(sim, "GET", APPCM + "/two")
    t.eq((st, body["message"]), (403, forbidden("configmaps", "two", "get", "configmaps", "", "app")), "other name")
    t.eq(bot(sim, "GET", APPCM)[0], 403, "list without a name is not covered by resourceNames")
    st, body, _ = bot(sim, "GET", APPCM + "?fieldSelector=metadata.name%3Done")
    t.eq((st, [i["metadata"]["name"] for i in body.get("items", [])]), (200, ["one"]),
         "list narrowed to the name by a field selector")
    t.eq(bot(sim, "GET", APPCM + "?fieldSelector=metadata.name%3Dtwo")[0], 403, "field selector other name")
    t.eq(bot(sim, "POST", APPCM, {"metadata": {"name": "one-b"}})[0], 403,
         "create has no name in its attributes, so resourceNames never allow it")
    t.eq(bot(sim, "PUT", APPCM + "/one", sim.ok("GET", APPCM + "/one"))[0], 200, "update of the named object")
    D = "/apis/apps/v1/namespaces/app/deployments/d"
    t.eq(bot(sim, "GET", D + "/scale")[0], 200, "*/scale matches deployments/scale")
    t.eq(bot(sim, "GET", D + "/status")[0], 200, "deployments/status")
    st, body, _ = bot(sim, "GET", D)
    t.eq((st, body["message"]), (403, forbidden("deployments.apps", "d", "get", "deployments", "apps", "app")),
         "subresource rules do not cover the main resource")
    st, body, _ = bot(sim, "PUT", D + "/status", sim.ok("GET", D))
    t.eq((st, body["message"]), (403, forbidden("deployments.apps", "d", "update", "deployments/status", "apps", "app")),
         "resource/subresource in the message")


@case
def rbac_rolebinding_to_clusterrole_and_groups(t):
    sim = rbac_sim(t)
    sa_setup(sim)
    sim.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
    # A RoleBinding to a ClusterRole that does not exist yet: denied with the resolution error.
    binding(sim, "app", "view", "ClusterRole", "viewer")
    st, body, _ = bot(sim, "GET", APPCM)
    t.eq((st, body["message"]), (403, forbidden("configmaps", None, "list", "configmaps", "", "app") +
                                 ': RBAC: clusterrole.rbac.authorization.k8s.io "viewer" not found'),
         "missing role reference")
    role(sim, None, "viewer", [{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["list"]}],
         kind="ClusterRole")
    t.eq(bot(sim, "GET", APPCM)[0], 200, "ClusterRole bound in app by a RoleBinding")
    t.eq(bot(sim, "GET", "/api/v1/namespaces/other/configmaps")[0], 403, "... grants nothing in other")
    t.eq(bot(sim, "GET", "/api/v1/configmaps")[0], 403, "... nor at cluster scope")
    # Group subjects: the ServiceAccount groups and system:authenticated.
    role(sim, None, "sec", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}], kind="ClusterRole")
    binding(sim, None, "sec", "ClusterRole", "sec", [{"kind": "Group", "name": "system:serviceaccounts:other",
                                                      "apiGroup": "rbac.authorization.k8s.io"}])
    t.eq(bot(sim, "GET", "/api/v1/secrets")[0], 403, "group of another namespace's ServiceAccounts")
    binding(sim, None, "sec2", "ClusterRole", "sec", [{"kind": "Group", "name": "system:serviceaccounts:app",
                                                       "apiGroup": "rbac.authorization.k8s.io"}])
    t.eq(bot(sim, "GET", "/api/v1/secrets")[0], 200, "system:serviceaccounts:app")
    t.eq(bot(sim, "GET", "/api/v1/namespaces/other/secrets")[0], 200, "ClusterRoleBinding covers every namespace")
    t.eq(bot(sim, "GET", "/api/v1/namespaces/other/configmaps")[0], 403, "still not configmaps in other")
    binding(sim, "other", "cm", "ClusterRole", "viewer", [{"kind": "Group", "name": "system:authenticated",
                                                           "apiGroup": "rbac.authorization.k8s.io"}])
    t.eq(bot(sim, "GET", "/api/v1/namespaces/other/configmaps")[0], 200, "system:authenticated in other")
    # A User subject with the ServiceAccount's name is the same user.
    sim.ok("DELETE", RBAC + "/namespaces/other/rolebindings/cm")
    binding(sim, "other", "cm", "ClusterRole", "viewer", [{"kind": "User", "name": SA,
                                                           "apiGroup": "rbac.authorization.k8s.io"}])
    t.eq(bot(sim, "GET", "/api/v1/namespaces/other/configmaps")[0], 200, "User subject")


@case
def rbac_escalation_needs_escalate_or_bind(t):
    sim = rbac_sim(t)
    sa_setup(sim)
    role(sim, "app", "rbac", [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
                               "verbs": ["create"]},
                              {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])
    binding(sim, "app", "rbac", "Role", "rbac")
    held = {"metadata": {"name": "held"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
    t.eq(bot(sim, "POST", RBAC + "/namespaces/app/roles", held)[0], 201, "a Role granting only what the user holds")
    more = {"metadata": {"name": "more"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}
    st, body, _ = bot(sim, "POST", RBAC + "/namespaces/app/roles", more)
    t.eq(st, 403, "a Role granting more")
    t.eq((body["details"], body["message"]),
         ({"name": "more", "group": "rbac.authorization.k8s.io", "kind": "roles"},
          'roles.rbac.authorization.k8s.io "more" is forbidden: user "%s" (groups=["system:serviceaccounts" '
          '"system:serviceaccounts:app" "system:authenticated"]) is attempting to grant RBAC permissions not '
          'currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}\n'
          '{APIGroups:[""], Resources:["secrets"], Verbs:["list"]}' % SA), "escalation message")
    sim.ok("POST", RBAC + "/namespaces/app/roles", more)
    rb = {"metadata": {"name": "more"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "more"},
          "subjects": [{"kind": "User", "name": "someone"}]}
    t.eq(bot(sim, "POST", RBAC + "/namespaces/app/rolebindings", rb)[0], 403, "binding a Role granting more")
    role(sim, "app", "esc", [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
                             {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind"],
                              "resourceNames": ["more"]}])
    binding(sim, "app", "esc", "Role", "esc")
    t.eq(bot(sim, "POST", RBAC + "/namespaces/app/roles", dict(more, metadata={"name": "more2"}))[0], 201,
         "escalate allows it")
    t.eq(bot(sim, "POST", RBAC + "/namespaces/app/rolebindings", rb)[0], 201, "bind on that Role allows it")


@case
def rbac_kubectl_prints_forbidden(t):
    sim = rbac_sim(t)
    sa_setup(sim)
    kc = sim.kubeconfig_for(SA)
    role(sim, "app", "cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}])
    binding(sim, "app", "cm", "Role", "cm")
    r = sim.kubectl("get", "configmaps", "-n", "app", "-o", "name", kubeconfig=kc)
    t.eq(r.stdout.strip(), "", "kubectl list allowed (no configmaps)")
    r = sim.kubectl("get", "secrets", "-n", "kube-system", kubeconfig=kc, check=False)
    t.check(r.returncode != 0, "kubectl get secrets should fail")
    t.check('Error from server (Forbidden): secrets is forbidden: User "%s" cannot list resource "secrets" '
            'in API group "" in the namespace "kube-system"' % SA in r.stderr, "kubectl stderr: %s" % r.stderr)
    sim.ok("POST", "/api/v1/namespaces/kube-system/secrets", {"metadata": {"name": "s"}})
    r = sim.kubectl("delete", "secret", "s", "-n", "kube-system", kubeconfig=kc, check=False)
    t.check(r.returncode != 0 and 'Error from server (Forbidden): secrets "s" is forbidden: User "%s" cannot '
            'delete resource "secrets" in API group "" in the namespace "kube-system"' % SA in r.stderr,
            "kubectl delete stderr: %s" % r.stderr)
    t.eq(sim.get("/api/v1/namespaces/kube-system/secrets/s")[0], 200, "the secret is still there")



def _raw(sim):
    u = urllib.parse.urlsplit(sim.url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    return s, s.makefile("rb")


def _reply(f):
    """One HTTP/1.1 reply from a raw connection -> (status, body bytes)."""
    status = int(f.readline().split()[1])
    n = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        if h.lower().startswith(b"content-length:"):
            n = int(h.split(b":")[1])
    return status, f.read(n)


@case
def plain_http_connections_served_together(t):
    """Plain HTTP is served by one thread selecting over the connections
    (ks_loop): pipelined and split requests are answered in order, a client
    that does not read a large reply holds up nobody, and a connection
    whose request turns into a watch keeps its id in the request log."""
    sim = t.kubesim(tls=False)
    sim.ok("DELETE", "/_sim/requests")
    body = json.dumps({"metadata": {"name": "big"}, "data": {"x": "y" * 900000}}).encode()
    post = (b"POST %s HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (CM.encode(), len(body), body))
    s, f = _raw(sim)
    # the request in three pieces, then two GETs pipelined behind it
    s.sendall(post[:20])
    time.sleep(0.1)
    s.sendall(post[20:5000])
    time.sleep(0.1)
    get = b"GET %s/big HTTP/1.1\r\nHost: h\r\n\r\n" % CM.encode()
    s.sendall(post[5000:] + get + b"GET %s/nope HTTP/1.1\r\nHost: h\r\n\r\n" % CM.encode())
    t.eq([_reply(f)[0] for _ in range(3)], [201, 200, 404], "statuses in order")
    # a reader that stops reading a ~9 MB list keeps only itself waiting
    for i in range(9):
        sim.ok("POST", CM, {"metadata": {"name": "big%d" % i}, "data": {"x": "y" * 900000}})
    stalled, _ = _raw(sim)
    stalled.sendall(b"GET %s HTTP/1.1\r\nHost: h\r\n\r\n" % CM.encode())
    time.sleep(0.3)
    start = time.monotonic()
    s.sendall(get)
    t.eq(_reply(f)[0], 200, "GET beside a stalled reader")
    t.check(time.monotonic() - start < 5, "not held up by the stalled reader")
    # a watch on the same keep-alive connection (handed to a thread)
    s.sendall(b"GET %s?watch=1&fieldSelector=metadata.name%%3Dbig&timeoutSeconds=1 HTTP/1.1\r\nHost: h\r\n\r\n"
              % CM.encode())
    t.check(f.readline().startswith(b"HTTP/1.1 200"), "watch answered")
    stalled.close()
    s.close()
    log = [e for e in sim.requests() if e["path"].startswith("/api/")]
    first = [e for e in log if e["method"] == "POST" and e["path"] == CM][0]
    watch = [e for e in log if e.get("watch")]
    t.eq(len(watch), 1, "one watch logged")
    t.eq(watch[0]["conn"], first["conn"], "the watch's connection id is the POST's")

main()
