"""The kube client against a TLS kubesim with a token: CRUD and API errors,
discovery with a CRD created mid-test, a 20k-object paged list, watches
through drops and 410s, the informer, retries and connection reuse.

The client is driven through tests/helpers/kube_tool; what reached the
server is read back from kubesim's request log (/_sim/requests).
"""
import json
import os
import subprocess
import time

from cairntest import BUILDDIR, case, main, wait_for

TOOL = os.path.join(BUILDDIR, "tests/helpers/kube_tool")
CM = ["core", "v1", "configmaps"]


def tool(sim, *args, timeout=120, extra=()):
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    return subprocess.run([TOOL, "--kubeconfig", sim.kubeconfig] + list(extra) +
                          [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def ok(r, what):
    if r.returncode != 0:
        raise AssertionError("%s: exit %d: %s %s" % (what, r.returncode, r.stdout[-800:],
                                                    r.stderr[-800:]))
    return r.stdout


def obj_of(r, what):
    return json.loads(ok(r, what).strip().splitlines()[-1])


def spawn_tool(t, sim, name, *args):
    log = t.path(name + ".out")
    p = t.spawn([TOOL, "--kubeconfig", sim.kubeconfig] + [str(a) for a in args], name=name)
    return p


def create_json(t, sim, gvr, ns, obj, name="obj.json"):
    path = t.path(name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return tool(sim, "create", *gvr, ns, path)


def crd(group, plural, kind, versions=("v1",), status=True, scope="Namespaced"):
    vs = []
    for i, v in enumerate(versions):
        ver = {"name": v, "served": True, "storage": i == 0,
               "schema": {"openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}
        if status:
            ver["subresources"] = {"status": {}}
        vs.append(ver)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, group)},
            "spec": {"group": group, "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                               "listKind": kind + "List", "shortNames": [plural[:3]]},
                     "versions": vs}}


CRD_GVR = ["apiextensions.k8s.io", "v1", "customresourcedefinitions"]


def sim_requests(sim, pred):
    return [r for r in sim.requests() if not r["path"].startswith("/_sim") and pred(r)]


@case
def crud_conflicts_status_and_errors(t):
    sim = t.kubesim()
    ok(create_json(t, sim, CRD_GVR, "-", crd("example.io", "widgets", "Widget")), "create CRD")
    W = ["example.io", "v1", "widgets"]
    w = obj_of(create_json(t, sim, W, "default", {
        "apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"size": 1}}), "create")
    rv1 = w["metadata"]["resourceVersion"]
    r = create_json(t, sim, W, "default", {"apiVersion": "example.io/v1", "kind": "Widget",
                                           "metadata": {"name": "w1"}})
    t.eq(r.returncode, 6, "create existing exit code")
    t.check("http=409 reason=AlreadyExists" in r.stdout, r.stdout)

    # Update with the RV just read succeeds; the same RV again is stale.
    w["spec"]["size"] = 2
    with open(t.path("w.json"), "w") as f:
        json.dump(w, f)
    w2 = obj_of(tool(sim, "update", *W, "default", t.path("w.json")), "update")
    t.eq(w2["spec"]["size"], 2, "updated spec")
    t.check(w2["metadata"]["resourceVersion"] != rv1, "RV did not change")
    r = tool(sim, "update", *W, "default", t.path("w.json"))
    t.eq(r.returncode, 4, "stale update exit code (conflict)")
    t.check("http=409 reason=Conflict" in r.stdout and "modified" in r.stdout, r.stdout)

    # The status subresource takes only .status, spec stays.
    w2["status"] = {"phase": "Ready"}
    w2["spec"]["size"] = 99
    with open(t.path("w2.json"), "w") as f:
        json.dump(w2, f)
    w3 = obj_of(tool(sim, "update-status", *W, "default", t.path("w2.json")), "update status")
    t.eq(w3["status"], {"phase": "Ready"}, "status written")
    t.eq(w3["spec"]["size"], 2, "spec left alone by the status update")
    got = obj_of(tool(sim, "get", *W, "default", "w1"), "get")
    t.eq(got["spec"]["size"], 2, "stored spec")
    t.eq(got["status"]["phase"], "Ready", "stored status")

    # Patches: merge, JSON patch, a failing JSON-patch test, status patch.
    p = obj_of(tool(sim, "patch", *W, "default", "w1", "merge", '{"spec":{"color":"red"}}'),
               "merge patch")
    t.eq(p["spec"], {"size": 2, "color": "red"}, "merged spec")
    p = obj_of(tool(sim, "patch", *W, "default", "w1", "json",
                    '[{"op":"replace","path":"/spec/size","value":3}]'), "json patch")
    t.eq(p["spec"]["size"], 3, "json-patched size")
    r = tool(sim, "patch", *W, "default", "w1", "json",
             '[{"op":"test","path":"/spec/size","value":42}]')
    t.check(r.returncode == 1 and "http=422" in r.stdout, "failed test op: " + r.stdout)
    p = obj_of(tool(sim, "patch", *W, "default", "w1", "merge",
                    '{"status":{"phase":"Done"},"spec":{"size":0}}', "status"), "status patch")
    t.eq((p["status"]["phase"], p["spec"]["size"]), ("Done", 3), "status patch took only status")
    r = tool(sim, "patch", *W, "default", "w1", "merge",
             '{"metadata":{"resourceVersion":"%s"},"spec":{"size":5}}' % rv1)
    t.eq(r.returncode, 4, "patch with a stale RV is a conflict")

    # Delete with preconditions and a propagation policy.
    r = tool(sim, "delete", *W, "default", "w1", "uid=00000000-0000-4000-8000-000000000000")
    t.eq(r.returncode, 4, "delete with a wrong uid precondition")
    r = tool(sim, "delete", *W, "default", "w1", "rv=" + rv1)
    t.eq(r.returncode, 4, "delete with a stale RV precondition")
    ok(tool(sim, "delete", *W, "default", "w1", "uid=" + w["metadata"]["uid"],
            "propagation=Foreground"), "delete")
    r = tool(sim, "get", *W, "default", "w1")
    t.eq(r.returncode, 5, "get after delete exit code")
    t.check("http=404 reason=NotFound" in r.stdout, r.stdout)
    dels = sim_requests(sim, lambda q: q["method"] == "DELETE")
    t.eq([d["status"] for d in dels], [409, 409, 200], "DELETE statuses")
    r = tool(sim, "get", "nope.io", "v1", "things", "default", "x")
    t.eq(r.returncode, 5, "unknown resource")


@case
def discovery_sees_crd_created_mid_test(t):
    sim = t.kubesim()
    out = ok(tool(sim, "discovery"), "discovery")
    lines = out.splitlines()
    t.check(any(ln.startswith("v1 configmaps ConfigMap namespaced preferred") for ln in lines),
            "configmaps missing: " + out[:500])
    t.check(any(ln.startswith("v1 namespaces Namespace cluster") and "sub=status" in ln
                for ln in lines), "namespaces/status missing")
    t.check(any(ln.startswith("coordination.k8s.io/v1 leases") for ln in lines),
            "leases missing")
    t.check(not any("gadgets" in ln for ln in lines), "gadgets before the CRD")

    # One client process resolves before and after the CRD appears: the
    # miss triggers a discovery refresh.
    p = spawn_tool(t, sim, "resolve", "resolve-wait", "gadgets.example.io", "100", "100")
    wait_for(lambda: "missing" in p.output(), 20, "first miss")
    ok(create_json(t, sim, CRD_GVR, "-", crd("example.io", "gadgets", "Gadget",
                                             versions=("v2", "v1"))), "create CRD")
    p.wait(30)
    t.eq(p.p.returncode, 0, "resolve-wait exit: " + p.output())
    t.check("found after" in p.output() and "example.io v2 gadgets Gadget" in p.output(),
            p.output())
    out = ok(tool(sim, "discovery"), "discovery")
    g = [ln for ln in out.splitlines() if " gadgets " in ln]
    t.eq(len(g), 2, "gadgets in two versions: %r" % g)
    t.check(any(ln.startswith("example.io/v2 gadgets Gadget namespaced preferred") and
                "sub=status" in ln for ln in g), "v2 preferred with status: %r" % g)
    t.check(any(ln.startswith("example.io/v1 gadgets Gadget namespaced -") for ln in g),
            "v1 not preferred: %r" % g)
    for arg in ("gadgets", "gadget", "Gadget", "gad", "gadgets.example.io",
                "gadgets.v1.example.io"):
        out = ok(tool(sim, "resolve", arg), "resolve " + arg)
        t.check(out.startswith("example.io v") and "gadgets Gadget namespaced" in out,
                "%s -> %s" % (arg, out))
    t.check(ok(tool(sim, "resolve", "gadgets.v1.example.io"), "v1").startswith("example.io v1"),
            "explicit version")
    t.eq(ok(tool(sim, "resolve", "cm"), "cm").strip(), "core v1 configmaps ConfigMap namespaced",
         "short name")


@case
def list_20k_in_pages_of_500(t):
    sim = t.kubesim()
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"set": "bulk"}},
              "data": {"k": "v"}}, 20000, name="cm-{i:05d}", namespace="default")
    for i, tier in enumerate(("a", "b", "c")):
        ok(create_json(t, sim, CM, "default", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "zz-%d" % i, "labels": {"tier": tier}}}), "create labeled")

    def names(out):
        return [ln.split()[1] for ln in out.splitlines() if ln.startswith("ConfigMap ")]

    out = ok(tool(sim, "list", *CM, "default", "limit=500", "labels=set=bulk", "names"), "list")
    got = names(out)
    t.eq(len(got), 20000, "items delivered")
    t.eq(len(set(got)), 20000, "distinct items")
    # 40 full pages; a server may answer a 41st, empty page when it cannot
    # know the 40th was the last (with a selector, kubesim does).
    pages = int(out.split("pages=")[1].split()[0])
    t.check(pages in (40, 41) and "restarts=0" in out, out.splitlines()[-1])
    t.check(all(ln.endswith(" v1") for ln in out.splitlines() if ln.startswith("ConfigMap ")),
            "items carry apiVersion and kind")
    lists = sim_requests(sim, lambda q: q["method"] == "GET" and
                         q["path"] == "/api/v1/namespaces/default/configmaps")
    t.eq(len(lists), pages, "list requests")
    t.check(all("limit=500" in q["query"] for q in lists), "limit sent on every page")

    # A dropped page is fetched again; still every item once.
    sim.clear_faults()
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue", "drop": True,
                "count": 1})
    got = names(ok(tool(sim, "list", *CM, "default", "limit=500", "labels=set=bulk", "names"),
                   "list with a dropped page"))
    t.eq((len(got), len(set(got))), (20000, 20000), "items after a dropped page")

    # An expired continue token: reported (exit 3), or the list restarts.
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue", "status": 410,
                "reason": "Expired", "count": 1})
    r = tool(sim, "list", *CM, "default", "limit=500", "labels=set=bulk", "names")
    t.eq(r.returncode, 3, "expired continue exit code: " + r.stdout[-300:])
    t.check("items=500 " in r.stdout and "list again" in r.stdout, r.stdout[-300:])
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue", "status": 410,
                "reason": "Expired", "count": 1})
    out = ok(tool(sim, "list", *CM, "default", "limit=500", "labels=set=bulk", "names",
                  "restart"), "list with restart")
    after = out.split("RESTART\n", 1)[1]
    got = names(after)
    t.eq((len(got), len(set(got))), (20000, 20000), "items after the restart")
    t.check("restarts=1" in out, out.splitlines()[-1])

    # Selectors go to the server.
    out = ok(tool(sim, "list", *CM, "default", "labels=tier in (a,c)", "names"), "in")
    t.eq(sorted(names(out)), ["default/zz-0", "default/zz-2"], "label selector")
    out = ok(tool(sim, "list", *CM, "default", "fields=metadata.name=cm-00007", "names"), "f")
    t.eq(names(out), ["default/cm-00007"], "field selector")
    r = tool(sim, "list", *CM, "default", "fields=spec.nope=1")
    t.check(r.returncode == 1 and "http=400" in r.stdout, r.stdout)


@case
def list_prefetch_delivers_the_same(t):
    """opts.prefetch (a backup's lists): the next page is fetched while the
    caller works through this one; items, order, retries and 410s as without."""
    sim = t.kubesim()
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 5000,
             name="cm-{i:05d}", namespace="default")

    def names(out):
        return [ln.split()[1] for ln in out.splitlines() if ln.startswith("ConfigMap ")]

    plain = names(ok(tool(sim, "list", *CM, "default", "limit=500", "names"), "plain"))
    out = ok(tool(sim, "list", *CM, "default", "limit=500", "names", "prefetch"), "prefetch")
    t.eq(names(out), plain, "the same items in the same order")
    t.check("items=5000 pages=10 " in out, out.splitlines()[-1])
    # Fetched ahead, each page still once.
    seq = sim.requests()[-1]["seq"]
    out = ok(tool(sim, "list", *CM, "default", "limit=1000", "names", "prefetch"),
             "prefetch again")
    lists = [q for q in sim.requests() if q["seq"] > seq and q["method"] == "GET"
             and q["path"] == "/api/v1/namespaces/default/configmaps"]
    t.eq(len(lists), 5, "one request per page")
    # A dropped page is fetched again, nothing twice.
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue", "drop": True,
                "count": 1})
    got = names(ok(tool(sim, "list", *CM, "default", "limit=500", "names", "prefetch"),
                   "prefetch with a dropped page"))
    t.eq(got, plain, "items after a dropped page")
    # An expired token: the error (exit 3), or a restart from the first page.
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue", "status": 410,
                "reason": "Expired", "count": 1})
    r = tool(sim, "list", *CM, "default", "limit=500", "names", "prefetch")
    t.eq(r.returncode, 3, "expired continue exit code: " + r.stdout[-300:])
    t.check("items=500 " in r.stdout and "list again" in r.stdout, r.stdout[-300:])
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue", "status": 410,
                "reason": "Expired", "count": 1})
    out = ok(tool(sim, "list", *CM, "default", "limit=500", "names", "prefetch", "restart"),
             "prefetch with restart")
    t.eq(names(out.split("RESTART\n", 1)[1]), plain, "items after the restart")
    t.check("restarts=1" in out, out.splitlines()[-1])
    # Pages of 5 MiB: each is read as it arrives, fetched once (issue 27:
    # they used to be downloaded, abandoned at a 4 MiB cap and fetched again).
    big = "x" * (1 << 20)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "big"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": big}}, 12,
             name="big-{i:02d}", namespace="big")
    seq = sim.requests()[-1]["seq"]
    out = ok(tool(sim, "list", *CM, "big", "limit=5", "names", "prefetch"), "big pages")
    t.eq(names(out), ["big/big-%02d" % i for i in range(12)], "big items")
    t.check("items=12 pages=3 " in out, out.splitlines()[-1])
    # (kubesim logs a request when its handler ends: wait for the last one)
    def big_lists():
        return [q for q in sim.requests() if q["seq"] > seq and q["method"] == "GET"
                and q["path"] == "/api/v1/namespaces/big/configmaps"]
    wait_for(lambda: len(big_lists()) >= 3, 10, "3 requests for 3 big pages")
    time.sleep(0.2)
    t.eq(len(big_lists()), 3, "requests for 3 big pages")


@case
def list_slow_consumer_and_stalled_server(t):
    sim = t.kubesim()
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap"}, 12, name="s-{i:02d}",
             namespace="default")
    # A callback that needs 1.2 s per page is not a timeout (500 ms applies
    # to inactivity, not to the page).
    out = ok(tool(sim, "list", *CM, "default", "limit=6", "sleepms=200", "names",
                  extra=["--timeout-ms", "500"]), "slow consumer")
    t.check("items=12 pages=2 " in out, out.splitlines()[-1])
    # A server that says nothing for 3 s is.
    sim.faults({"method": "GET", "path": "/configmaps$", "delay": 3, "count": 1})
    r = tool(sim, "list", *CM, "default", extra=["--timeout-ms", "500", "--retries", "0"])
    t.check(r.returncode == 1 and "timed out" in r.stdout and "no data for 500 ms" in r.stdout,
            r.stdout)


def watch_lines(p):
    return [ln for ln in p.output().splitlines() if ln.split(" ")[0] in
            ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")]


@case
def watch_split_chunks_drops_and_gone(t):
    sim = t.kubesim()
    ok(create_json(t, sim, ["core", "v1", "namespaces"], "-", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w"}}), "namespace")
    first = obj_of(create_json(t, sim, CM, "w", {"apiVersion": "v1", "kind": "ConfigMap",
                                                "metadata": {"name": "before"}}), "create")
    rv0 = first["metadata"]["resourceVersion"]
    p = spawn_tool(t, sim, "watch", "--log-level", "info", "watch", *CM, "w", "rv=" + rv0,
                   "reconnect", "bookmarks", "timeout=2")
    wait_for(lambda: sim_requests(sim, lambda q: q.get("watch")), 20, "watch started")

    # An event of ~400 KB arrives in many pieces (TLS records, chunks).
    big = "x" * 400000
    ok(create_json(t, sim, CM, "w", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "big"}, "data": {"b": big}}), "big")
    wait_for(lambda: any(" w/big " in ln for ln in watch_lines(p)), 20, "big event")

    # The next two reconnects are held 1 s and dropped; an object created
    # while no watch is connected arrives once, when the watch resumes from
    # its last resourceVersion.
    def watches():
        return sim_requests(sim, lambda q: "watch=" in q["query"])

    sim.faults({"method": "GET", "path": "/namespaces/w/configmaps$", "query": "watch=",
                "drop": True, "delay": 1, "count": 2})
    wait_for(lambda: any(r.get("dropped") for r in watches()), 30, "a dropped reconnect")
    ok(create_json(t, sim, CM, "w", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "gap"}}), "gap")
    wait_for(lambda: len([r for r in watches() if r.get("dropped")]) == 2
             and len([r for r in watches() if not r.get("dropped")]) >= 2, 30,
             "drops then a resumed watch")
    ok(create_json(t, sim, CM, "w", {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "after"}}), "after")
    wait_for(lambda: any(" w/after " in ln for ln in watch_lines(p)), 20, "event after resume")
    lines = watch_lines(p)
    adds = [ln.split()[1] for ln in lines if ln.startswith("ADDED")]
    t.eq(adds, ["w/big", "w/gap", "w/after"], "ADDED events, each once")
    resumed = [q for q in watches() if not q.get("dropped")][1:]
    t.check(resumed and all("resourceVersion=" in q["query"] and
                            "resourceVersion=%s&" % rv0 not in q["query"] for q in resumed),
            "reconnects resume from a later RV: %r" % [q["query"] for q in watches()])

    # 410: compact, then the next reconnect with an old RV ends the watch
    # with "gone" (the caller relists).
    sim.compact()
    p.wait(30)
    t.eq(p.p.returncode, 3, "watch exit code after 410: " + p.output()[-500:])
    t.check("error: gone http=410" in p.output(), p.output()[-500:])


@case
def watch_gone_as_http_status(t):
    sim = t.kubesim()
    sim.faults({"method": "GET", "query": "watch=", "status": 410, "reason": "Expired",
                "count": 1})
    r = tool(sim, "watch", *CM, "default", "rv=1", timeout=30)
    t.eq(r.returncode, 3, "exit code: " + r.stdout)
    t.check("http=410 reason=Expired" in r.stdout, r.stdout)


@case
def informer_relists_after_gone(t):
    sim = t.kubesim()
    ok(create_json(t, sim, ["core", "v1", "namespaces"], "-", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inf"}}), "namespace")

    def mk(name, data="1"):
        return obj_of(create_json(t, sim, CM, "inf", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"d": data}}, name=name + ".json"), "create " + name)

    a = mk("a")
    p = spawn_tool(t, sim, "informer", "--log-level", "info", "informer", *CM, "inf",
                   "timeout=2", "limit=2")
    wait_for(lambda: "SYNCED 1" in p.output(), 20, "first sync")
    mk("b")
    a["data"] = {"d": "2"}
    with open(t.path("a2.json"), "w") as f:
        json.dump(a, f)
    ok(tool(sim, "update", *CM, "inf", t.path("a2.json")), "update a")
    ok(tool(sim, "delete", *CM, "inf", "b"), "delete b")
    wait_for(lambda: "DELETE inf/b" in p.output(), 20, "delete event")
    # Compact: the watch's RV is too old at its next reconnect -> relist.
    sim.compact()
    mk("c")
    wait_for(lambda: p.output().count("SYNCED") >= 2, 30, "second sync after 410")
    wait_for(lambda: "ADD inf/c" in p.output(), 20, "c added")
    out = p.output()
    events = [ln.split()[0] + " " + ln.split()[1] for ln in out.splitlines()
              if ln.split(" ")[0] in ("ADD", "UPDATE", "DELETE")]
    t.eq(events, ["ADD inf/a", "ADD inf/b", "UPDATE inf/a", "DELETE inf/b", "ADD inf/c"],
         "informer events")
    t.check("relisting" in out, "no relist logged: " + out[-800:])
    p.stop()


@case
def retries_429_5xx_and_drops(t):
    sim = t.kubesim()
    path = "/api/v1/namespaces/default/configmaps/r1"
    ok(create_json(t, sim, CM, "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "r1"}}), "create")

    def log_for(method, p=path):
        return [q for q in sim_requests(sim, lambda q: q["method"] == method and q["path"] == p)]

    # 429 with Retry-After: waited out, then success.
    sim.faults({"method": "GET", "path": path + "$", "status": 429, "retryAfter": 1, "count": 2})
    t0 = time.monotonic()
    ok(tool(sim, "get", *CM, "default", "r1"), "get through 429s")
    waited = time.monotonic() - t0
    t.eq([q["status"] for q in log_for("GET")], [429, 429, 200], "GET statuses")
    t.check(waited >= 1.9, "Retry-After not honoured: %.2fs" % waited)

    # 503 without Retry-After: GET retried with backoff...
    sim.request("DELETE", "/_sim/requests")
    sim.faults({"method": "GET", "path": path + "$", "status": 503, "count": 2})
    ok(tool(sim, "get", *CM, "default", "r1"), "get through 503s")
    t.eq([q["status"] for q in log_for("GET")], [503, 503, 200], "GET after 503")
    # ...a POST is not (it may have been applied).
    sim.faults({"method": "POST", "status": 503, "count": 1})
    r = create_json(t, sim, CM, "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "r2"}})
    t.eq(r.returncode, 1, "POST after 503: " + r.stdout)
    t.eq(len(log_for("POST", "/api/v1/namespaces/default/configmaps")), 1, "one POST")

    # A dropped connection: GET retried, POST reported and not re-sent.
    sim.request("DELETE", "/_sim/requests")
    sim.faults({"method": "GET", "path": path + "$", "drop": True, "count": 1})
    ok(tool(sim, "get", *CM, "default", "r1"), "get through a drop")
    t.eq([q["status"] for q in log_for("GET")], [0, 200], "GET after a drop")
    sim.faults({"method": "POST", "drop": True, "count": 1})
    r = create_json(t, sim, CM, "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "r3"}})
    t.eq(r.returncode, 1, "POST after a drop: " + r.stdout)
    t.check("not retried" in r.stdout and "http=0" in r.stdout, r.stdout)
    t.eq(len(log_for("POST", "/api/v1/namespaces/default/configmaps")), 1, "one POST")
    t.eq(tool(sim, "get", *CM, "default", "r3").returncode, 5, "r3 was not created")
    # A PUT carrying a resourceVersion is safe to repeat: retried.
    cur = obj_of(tool(sim, "get", *CM, "default", "r1"), "get")
    cur["data"] = {"x": "y"}
    with open(t.path("r1.json"), "w") as f:
        json.dump(cur, f)
    sim.faults({"method": "PUT", "drop": True, "count": 1})
    ok(tool(sim, "update", *CM, "default", t.path("r1.json")), "PUT through a drop")
    t.eq([q["status"] for q in log_for("PUT")], [0, 200], "PUT statuses")


@case
def sequential_gets_reuse_connections(t):
    sim = t.kubesim()
    ok(create_json(t, sim, CM, "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "k1"}}), "create")
    sim.request("DELETE", "/_sim/requests")
    r = tool(sim, "repeat-get", *CM, "default", "k1", "1000", extra=["--stats", "--qps", "0"])
    ok(r, "1000 GETs")
    gets = sim_requests(sim, lambda q: q["path"] == "/api/v1/namespaces/default/configmaps/k1")
    t.eq(len(gets), 1000, "GETs logged")
    conns = {q["conn"] for q in gets}
    t.check(len(conns) <= 3, "1000 GETs used %d connections" % len(conns))
    t.check("connections=1 " in r.stderr, r.stderr)
    # One client shared by 8 threads: every GET succeeds, connections stay few.
    sim.request("DELETE", "/_sim/requests")
    r = tool(sim, "parallel-get", *CM, "default", "k1", "8", "100", extra=["--stats"])
    t.eq(ok(r, "parallel GETs").strip(), "gets=800 failed=0", "parallel GETs")
    gets = sim_requests(sim, lambda q: q["path"] == "/api/v1/namespaces/default/configmaps/k1")
    t.check(len({q["conn"] for q in gets}) <= 16, "8 threads used %d connections" %
            len({q["conn"] for q in gets}))
    # The client-side rate limit holds requests back (time is not asserted).
    r = tool(sim, "repeat-get", *CM, "default", "k1", "30",
             extra=["--stats", "--qps", "50", "--burst", "5"])
    ok(r, "rate-limited GETs")
    throttled = int(r.stderr.split("throttled_ms=")[1].split()[0])
    t.check(throttled > 0, "no throttling: " + r.stderr)


main()
