"""The RBAC rules of `cairn install` cover what cairn actually does, enforced.

kubesim authorizes the token of a ServiceAccount user
(`system:serviceaccount:<ns>:<name>`) with the Roles, ClusterRoles and
bindings stored in it, as kube-apiserver's RBAC authorizer does. The case
installs cairn with an admin token (`cairn install`: the ServiceAccount
`cairn`, its ClusterRole, Role and bindings), then runs two servers and the
restore runner with the ServiceAccount's token through a backup, a restore
(including RBAC objects that need `bind`/`escalate`), a deletion, an expiry
(GC), a schedule, location validation and sync. Every step must succeed and
kubesim must have answered 403 to none of the ServiceAccount's requests.
The token must really be restricted (403 for what the rules leave out).
The case also prints the (verb, group, resource, namespace) set it used, the
discovery paths, and the rules this run never exercised.
"""
import json
import os
import re
import shutil
import time


from cairntest import BIN, BUILDDIR, case, main, wait_for, cairn, CheckFailed

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
RUNNER = os.path.join(BUILDDIR, "tests", "helpers", "restore_runner")

RES_PATH = re.compile(r"^/(?:api/(?P<cv>v1)|apis/(?P<g>[^/]+)/(?P<v>[^/]+))(?P<rest>(?:/.*)?)$")


def authz_attrs(req):
    """(verb, group, resource, namespace) of a request, or None if non-resource."""
    m = RES_PATH.match(req["path"])
    if not m or not m.group("rest"):
        return None
    group = m.group("g") or ""
    parts = [p for p in m.group("rest").split("/") if p]
    ns = None
    if len(parts) >= 3 and parts[0] == "namespaces":
        ns = parts[1]
        parts = parts[2:]
    elif len(parts) == 2 and parts[0] == "namespaces" and not group:
        ns = parts[1]		# the Namespace object itself is cluster-scoped
        ns = None
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else None
    if len(parts) > 2:
        resource += "/" + parts[2]
    query = req.get("query") or ""
    method = req["method"]
    if method == "GET":
        if re.search(r"(^|&)watch=(1|true)", query):
            verb = "watch"
        else:
            verb = "get" if name else "list"
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = method.lower()
    return verb, group, resource, ns


def allowed(rules, verb, group, resource):
    for r in rules:
        if (("*" in r["verbs"] or verb in r["verbs"]) and
                ("*" in r["apiGroups"] or group in r["apiGroups"]) and
                ("*" in r["resources"] or resource in r["resources"])):
            return r
    return None


SA = "system:serviceaccount:%s:cairn" % NS
SA_TOKEN = "cairn-token"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@case
def rules_cover_what_the_server_uses(t):
    sim = t.kubesim(tokens={"admin": "admin-token", SA: SA_TOKEN})
    t.eq(sim.get("/api", token=SA_TOKEN)[0], 401, "the token before its ServiceAccount exists")
    store = t.mkdir("store")
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--wait",
              "--config", "path=" + store)
    t.eq(r.returncode, 0, "install: %s" % r.stderr)
    cluster_rules = sim.ok("GET", RBAC + "/clusterroles/cairn")["rules"]
    ns_rules = sim.ok("GET", RBAC + "/namespaces/%s/roles/cairn" % NS)["rules"]
    wait_for(lambda: sim.get(BSL + "/default")[0] == 200, 30, "default location")
    sim.patch(BSL + "/default", {"spec": {"backupSyncPeriod": "1s",
                                          "validationFrequency": "1s"}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "demo"}})
    for i in range(3):
        sim.ok("POST", "/api/v1/namespaces/demo/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i},
            "data": {"k": str(i)}})
    sim.ok("POST", "/api/v1/namespaces/demo/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "Yg=="}})
    sim.ok("POST", RBAC + "/namespaces/demo/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    # More than cairn holds: restoring these needs `escalate` and `bind`.
    sim.ok("POST", RBAC + "/namespaces/demo/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "operator"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/exec"],
                   "verbs": ["get", "create", "delete"]}]})
    sim.ok("POST", RBAC + "/namespaces/demo/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "operator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "operator"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})

    kc = sim.kubeconfig_for(SA, t.path("cairn-kubeconfig"))
    sim.ok("DELETE", "/_sim/requests")
    servers = [t.spawn([BIN, "server", "--kubeconfig", kc, "--namespace", NS,
                        "--server-id", sid, "--journal", t.path("j-%s.db" % sid),
                        "--retry-period", "200ms", "--gc-period", "1s"], name="server-" + sid)
               for sid in ("s1", "s2")]
    # A schedule, a backup that expires, one deleted by a user, one restored.
    r = cairn("schedule", "create", "nightly", "--schedule", "@every 1h",
              "--include-namespaces", "demo", "--kubeconfig", sim.kubeconfig)
    t.eq(r.returncode, 0, "schedule create: %s" % r.stderr)
    for name, ttl in (("keep", "1h"), ("short", "2s"), ("doomed", "1h")):
        sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                            "metadata": {"name": name},
                            "spec": {"includedNamespaces": ["demo"], "ttl": ttl}})

    def phase(name):
        st, b, _ = sim.get(BK + "/" + name)
        return b.get("status", {}).get("phase") if st == 200 else None
    wait_for(lambda: phase("keep") == "Completed" and phase("doomed") == "Completed", 60,
             "backups completed")
    wait_for(lambda: "cairn.io/backup-cleanup" in
             sim.get(BK + "/doomed")[1]["metadata"].get("finalizers", []), 10, "finalizer")
    sim.delete(BK + "/doomed")
    wait_for(lambda: phase("doomed") is None and phase("short") is None, 30,
             "deleted and expired backups gone")
    t.check(not os.path.exists(os.path.join(store, "backups", "doomed")),
            "the deleted backup is still in storage")
    wait_for(lambda: sim.get(BK + "?labelSelector=cairn.io%2Fschedule-name%3Dnightly")[1]["items"],
             10, "scheduled backup")
    # Sync: a backup present only in storage (a copy of keep's folder under
    # another name, as another cluster would have written it) is created.
    src, dst = os.path.join(store, "backups", "keep"), os.path.join(store, "backups", "copied")
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "velero-backup.json")) as f:
        meta = json.load(f)
    meta["metadata"]["name"] = "copied"
    with open(os.path.join(dst, "velero-backup.json"), "w") as f:
        json.dump(meta, f)
    wait_for(lambda: phase("copied") == "Completed", 20, "backup synced from storage")
    wait_for(lambda: (sim.get(BSL + "/default")[1].get("status") or {}).get("phase") == "Available",
             20, "location validated")

    if not os.access(RUNNER, os.X_OK):
        raise CheckFailed("%s is not built" % RUNNER)
    sched = sim.get(BK + "?labelSelector=cairn.io%2Fschedule-name%3Dnightly")[1]["items"][0]
    wait_for(lambda: phase(sched["metadata"]["name"]) == "Completed", 60, "scheduled backup done")
    t.spawn([RUNNER, "--kubeconfig", kc, "--namespace", NS, "--journal", t.path("rj.db"),
             "--server-id", "r1", "--period-ms", "100"], name="restore-runner")
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "r1"},
                        "spec": {"backupName": sched["metadata"]["name"],
                                 "namespaceMapping": {"demo": "demo-copy"}}})

    def restored():
        st, r, _ = sim.get(RS + "/r1")
        return r if r.get("status", {}).get("phase") in ("Completed", "PartiallyFailed",
                                                          "Failed", "FailedValidation") else None
    rr = wait_for(restored, 60, "restore finished")
    t.eq(rr["status"]["phase"], "Completed", "restore phase: %s" % rr["status"])
    for p in ("/api/v1/namespaces/demo-copy/configmaps/c2", "/api/v1/namespaces/demo-copy/secrets/s",
              RBAC + "/namespaces/demo-copy/roles/operator", RBAC + "/namespaces/demo-copy/rolebindings/operator"):
        t.eq(sim.get(p)[0], 200, "restored %s" % p)
    time.sleep(2)		# a few more upkeep passes
    for p in servers:
        t.check(p.alive(), "server died: %s" % p.output()[-1500:])

    log = [req for req in sim.requests() if req.get("token") == SA]
    used, discovery, denied = {}, set(), []
    for req in log:
        if req["status"] == 403:
            denied.append("%s %s?%s" % (req["method"], req["path"], req["query"]))
        a = authz_attrs(req)
        if a is None:
            discovery.add(req["path"])
            continue
        verb, group, resource, ns = a
        used[(verb, group, resource, ns)] = used.get((verb, group, resource, ns), 0) + 1
    # Restoring the Role "operator" and its binding is allowed only with
    # `escalate` and `bind`: count them as used when the restore wrote them.
    for kind in ("roles", "rolebindings"):
        if ("create", "rbac.authorization.k8s.io", kind, "demo-copy") in used:
            verb = "escalate" if kind == "roles" else "bind"
            used[(verb, "rbac.authorization.k8s.io", "roles", "demo-copy")] = 1
    unlisted = []
    for (verb, group, resource, ns), n in sorted(used.items(), key=lambda x: str(x[0])):
        rule = allowed(cluster_rules, verb, group, resource)
        if rule is None and ns == NS:
            rule = allowed(ns_rules, verb, group, resource)
        print("used: %-8s %-28s %-40s ns=%-14s x%-4d -> %s" % (
            verb, group or "core", resource, ns or "-", n,
            "ALLOWED" if rule else "DENIED"))
        if rule is None:
            unlisted.append((verb, group, resource, ns))
    print("discovery paths (system:discovery): %s" % sorted(discovery))
    for r in cluster_rules + ns_rules:
        hit = any(allowed([r], v, g, res) for (v, g, res, _) in used)
        if not hit:
            print("rule not exercised by this run: %s" % r)
    t.check(len(used) > 10, "too few requests seen: %s" % used)
    t.eq(denied, [], "requests of %s that kubesim's RBAC answered 403" % SA)
    t.eq(unlisted, [], "requests the installed rules would deny")

    # The token is really restricted: what the rules leave out is refused.
    for method, path, what in (
            ("DELETE", "/api/v1/namespaces/kube-system/secrets/x", "delete a Secret in kube-system"),
            ("DELETE", "/api/v1/namespaces/demo/configmaps/c0", "delete an application object"),
            ("GET", "/api/v1/secrets?watch=true", "watch every Secret"),
            ("DELETE", BK, "deletecollection of Backups"),
            ("DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x",
             "a Lease outside cairn's namespace"),
            ("GET", "/metrics", "a non-resource path outside discovery")):
        st, body, _ = sim.request(method, path, token=SA_TOKEN)
        t.eq(st, 403, "%s: %s" % (what, body))
        t.check('User "%s" cannot' % SA in body["message"], "403 message: %s" % body["message"])
    t.eq(sim.get("/api/v1/namespaces/demo/configmaps/c0")[0], 200, "c0 survived")


main()
