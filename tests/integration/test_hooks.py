"""Backup and restore hooks (issue 21): commands in pods around each pod's
items, init containers and post-restore commands in restored pods.

kubesim runs pods/exec commands as local processes in
EXEC_ROOT/NS/POD/CONTAINER, so each hook here appends to its own log with
a time stamp and touches or removes markers. What is checked is what a
user relies on: the marker a pre hook writes exists while the pod's item
is written (cairn's backup log line for the item falls between the hook's
own "pre" and "post" times) and while its volume is copied (the copy
holds the marker), and is gone after; hooks run in the spec's order, only
for the pods they select, annotations winning; onError Fail fails the
backup naming the hook and still thaws the pod, Continue warns; a server
killed between a pre and a post hook leaves no pod frozen: the server that
takes over runs the pending post hook first, and the pre hook runs once
per attempt that froze the pod; and a Backup with a field cairn does not
implement is refused or warned about, never silently Completed (on a real
cluster the CRD schema speaks first: Velero's fields are declared so they
reach cairn, a typo is the API server's strict-validation error or
Warning, an enum the API server's 422). Restores:
restored pods carry their init container hooks ahead of their own, and
their exec hooks run only once their container runs (or is ready), with
wait timeouts.
"""
import gzip
import json
import os
import subprocess
import tarfile
import time

from cairntest import BIN, case, cairn, main, wait_for, CheckFailed

NS = "cairn-system"
APP = "shop"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
PODS = "/api/v1/namespaces/%s/pods" % APP
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
PAD = 127 << 10    # incompressible bytes per pod in the ordered resume case: a part each (hex: 254 KiB,
                   # under the 256 KiB a real API server allows for all annotations)
TIMINGS = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "300ms"]


def setup(t, servers=("s1",)):
    root = t.mkdir("exec")
    tokens = {"admin": "admin-token"}
    tokens.update({s: "tok-" + s for s in servers})
    sim = t.kubesim(tokens=tokens, extra=["--exec-root", root])
    sim.exec_root = root
    sim.install_crds(NS)
    store = t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": store}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": APP}})
    sim.ok("POST", "/api/v1/namespaces/%s/configmaps" % APP, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "b"}})
    return sim, store


def server(t, sim, sid="s1", extra=()):
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--context", "kubesim-" + sid,
                    "--namespace", NS, "--server-id", sid, "--journal", t.path("journal-%s.db" % sid),
                    "--log-level", "info"] + TIMINGS + list(extra), name="server-" + sid)


def pod(sim, name, labels=None, annotations=None, claim=None, containers=("app",), init=None):
    md = {"name": name, "labels": labels or {}}
    if annotations:
        md["annotations"] = annotations
    spec = {"nodeName": "node-1", "containers": [{"name": c, "image": "busybox"} for c in containers]}
    if init:
        spec["initContainers"] = init
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    sim.ok("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec})
    sim.patch(PODS + "/" + name + "/status", {"status": {"phase": "Running"}})


def hostpath_volume(sim, pv, path):
    sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": path},
                 "claimRef": {"namespace": APP, "name": "claim-" + pv}}})
    sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim-" + pv},
        "spec": {"volumeName": pv, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})


def sh(script):
    return ["sh", "-c", script]


def log_step(word, extra=""):
    """A hook command step: append '<word> <epoch seconds>' to hooks.log (in the container's dir)."""
    return 'echo "%s $(date +%%s.%%N)%s" >> hooks.log' % (word, extra)


def create_backup(sim, name, spec):
    return sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                               "metadata": {"name": name, "namespace": NS}, "spec": spec})


def wait_final(sim, name, srv=None, timeout=90):
    def done():
        if srv is not None and not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        b = sim.ok("GET", "%s/%s" % (BK, name))
        return b if b.get("status", {}).get("phase") in FINAL else None
    return wait_for(done, timeout, "backup %s to finish" % name, interval=0.1)


def hook_log(sim, pod, container="app"):
    path = os.path.join(sim.exec_root, APP, pod, container, "hooks.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f.read().splitlines()]


def stored(store, name, suffix):
    for d, _, files in os.walk(store):
        for f in files:
            if f == name + suffix and ".cairn-uploads" not in d:
                return os.path.join(d, f)
    raise CheckFailed("%s%s not in the store" % (name, suffix))


def backup_log(store, name):
    """(epoch seconds, level, message) of the backup's uploaded log."""
    import datetime
    out = []
    with gzip.open(stored(store, name, "-logs.gz"), "rt") as f:
        for line in f:
            ts = line.split('"', 2)[1]
            when = datetime.datetime.strptime(ts[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
                tzinfo=datetime.timezone.utc).timestamp()
            level = line.split("level=", 1)[1].split(" ", 1)[0]
            # msg is a JSON string; the line's fields (backup=...) follow it
            msg = json.JSONDecoder().raw_decode(line.split(" msg=", 1)[1])[0]
            out.append((when, level, msg))
    return out


def exec_requests(sim, pod):
    return [r for r in sim.requests() if r["path"] == "%s/%s/exec" % (PODS, pod)]


@case
def hooks_freeze_around_pod_items_and_volumes(t):
    sim, store = setup(t)
    vol = t.mkdir("vol-db")
    with open(os.path.join(vol, "table.dat"), "w") as f:
        f.write("rows\n")
    hostpath_volume(sim, "pv-db", vol)
    frozen = os.path.join(vol, "FROZEN")
    # the database: annotation hooks, a volume
    pod(sim, "db", labels={"app": "db", "tier": "data"}, claim="claim-pv-db", annotations={
        "pre.hook.backup.velero.io/command": json.dumps(sh(log_step("pre") + " && touch " + frozen)),
        "pre.hook.backup.velero.io/timeout": "20s",
        "post.hook.backup.velero.io/command": json.dumps(sh("rm " + frozen + " && " + log_step("post"))),
    })
    # the web pods: spec hooks, in order; the spec also matches db, whose annotations win
    pod(sim, "web", labels={"app": "web", "tier": "data"}, containers=("nginx", "sidecar"))
    pod(sim, "batch", labels={"app": "batch"})
    rule = lambda word: {"exec": {"command": sh(log_step(word) + ' "$KUBESIM_CONTAINER"')}}
    spec = {"includedNamespaces": [APP], "hooks": {"resources": [
        {"name": "quiesce", "labelSelector": {"matchLabels": {"tier": "data"}},
         "pre": [rule("pre-a"), {"exec": {"container": "sidecar", "command": sh(log_step("pre-b")),
                                          "timeout": "10s", "onError": "Fail"}}],
         "post": [rule("post-a"), rule("post-b")]},
        {"name": "elsewhere", "includedNamespaces": ["other"], "pre": [rule("never")]},
    ]}}
    srv = server(t, sim)
    agent = t.spawn([BIN, "node-agent", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                     "--node-name", "node-1", "--server-id", "agent-1", "--journal", t.path("agent.db"),
                     "--retry-period", "300ms"], name="agent")
    create_backup(sim, "b1", spec)
    b = wait_final(sim, "b1", srv)
    st = b["status"]
    t.eq((st["phase"], st.get("warnings", 0), st.get("errors", 0)), ("Completed", 0, 0),
         "phase, warnings, errors: %s" % st.get("failureReason"))
    t.eq(st.get("hookStatus"), {"hooksAttempted": 6, "hooksFailed": 0}, "status.hookStatus")
    d = cairn("backup", "describe", "b1", "--kubeconfig", sim.kubeconfig, "--namespace", NS)
    t.check("Hooks:     6 run, 0 failed" in d.stdout, "describe: %s" % d.stdout)
    t.check(not st.get("checkpoint", {}).get("hooks", {}).get("pods"), "no pod left frozen in the checkpoint")

    # db: one pre, one post; the item was written, and the volume copied, in between
    log = hook_log(sim, "db")
    t.eq([x[0] for x in log], ["pre", "post"], "db's hook log")
    t_pre, t_post = float(log[0][1]), float(log[1][1])
    blog = backup_log(store, "b1")
    written = [w for w, _, m in blog if m == "pod %s/db: item written between its pre and post hooks" % APP]
    t.eq(len(written), 1, "one item line for db")
    t.check(t_pre < written[0] < t_post, "db's item written at %.3f, between its pre (%.3f) and post (%.3f) "
            "hooks" % (written[0], t_pre, t_post))
    t.check(any("mounts claims: its post hooks run once its volumes are copied" in m for _, _, m in blog),
            "deferred post hooks logged")
    copy = stored(store, "pv-db", ".index.tar.gz")
    with tarfile.open(copy, "r:gz") as tf:
        names = [n.lstrip("./") for n in tf.getnames()]
    t.check("FROZEN" in names and "table.dat" in names, "the volume copy holds the marker: %s" % names)
    t.check(not os.path.exists(frozen), "the marker is gone after the backup")
    t.check(not os.path.exists(os.path.join(sim.exec_root, APP, "db", "app", "never")), "no stray hook")

    # web: the spec's hooks in order, in the containers they name
    web = hook_log(sim, "web", "nginx") + hook_log(sim, "web", "sidecar")
    web.sort(key=lambda x: float(x[1]))
    t.eq([x[0] for x in web], ["pre-a", "pre-b", "post-a", "post-b"], "web's hooks in spec order")
    t.eq([x[2] for x in web if len(x) > 2], ["nginx", "nginx", "nginx"], "first container by default")
    t.eq(exec_requests(sim, "batch"), [], "no hook for a pod no rule selects")

    # the tarball holds the pods
    with tarfile.open(stored(store, "b1", ".tar.gz"), "r:gz") as tf:
        names = set(tf.getnames())
    for p in ("db", "web", "batch"):
        t.check("resources/pods/namespaces/%s/%s.json" % (APP, p) in names, "pod %s in the tarball" % p)
    agent.stop()


@case
def hooks_on_error_fail_fails_continue_warns(t):
    sim, store = setup(t)
    pod(sim, "db", labels={"app": "db"})
    pod(sim, "cache", labels={"app": "cache"})
    srv = server(t, sim)
    failing = {"exec": {"command": sh(log_step("pre") + " && echo 'cannot lock tables' >&2 && exit 3")}}
    thaw = {"exec": {"command": sh(log_step("post"))}}
    # Continue: a warning naming the hook; the backup completes; the post hook still runs
    create_backup(sim, "cont", {"includedNamespaces": [APP], "hooks": {"resources": [
        {"name": "lock-cache", "labelSelector": {"matchLabels": {"app": "cache"}},
         "pre": [dict(failing, exec=dict(failing["exec"], onError="Continue"))], "post": [thaw]}]}})
    st = wait_final(sim, "cont", srv)["status"]
    t.eq((st["phase"], st.get("warnings")), ("Completed", 1), "Continue: completed with a warning")
    t.eq(st.get("hookStatus"), {"hooksAttempted": 2, "hooksFailed": 1}, "hookStatus (Continue)")
    with gzip.open(stored(store, "cont", "-results.gz"), "rt") as f:
        res = json.load(f)
    warn = json.dumps(res["warnings"])
    t.check('pre hook \\"lock-cache\\" in pod shop/cache' in warn and "exit code 3" in warn and
            "cannot lock tables" in warn, "the warning names the hook, pod and exit: %s" % warn)
    t.eq([x[0] for x in hook_log(sim, "cache")], ["pre", "post"], "cache: post ran after a failed pre")
    # Fail (the default): the backup fails naming the hook; the pod is thawed
    create_backup(sim, "fail", {"includedNamespaces": [APP], "hooks": {"resources": [
        {"name": "lock-db", "labelSelector": {"matchLabels": {"app": "db"}}, "pre": [failing],
         "post": [thaw]}]}})
    st = wait_final(sim, "fail", srv)["status"]
    t.eq(st["phase"], "Failed", "Fail: the backup fails")
    reason = st.get("failureReason", "")
    for want in ('pre hook "lock-db"', "pod shop/db", "container (first)", "onError Fail", "exit code 3",
                 "cannot lock tables"):
        t.check(want in reason, "failureReason names %r: %s" % (want, reason))
    t.eq([x[0] for x in hook_log(sim, "db")], ["pre", "post"], "db: post hook ran after the failing pre")
    t.eq(st.get("hookStatus"), {"hooksAttempted": 2, "hooksFailed": 1}, "hookStatus (Fail)")
    t.check(not st.get("checkpoint", {}).get("hooks", {}).get("pods"), "nothing left frozen")
    # a container the pod does not have fails like a failing command
    create_backup(sim, "nocont", {"includedNamespaces": [APP], "hooks": {"resources": [
        {"name": "typo", "labelSelector": {"matchLabels": {"app": "db"}},
         "pre": [{"exec": {"container": "mysql", "command": ["true"]}}]}]}})
    st = wait_final(sim, "nocont", srv)["status"]
    t.eq(st["phase"], "Failed", "missing container")
    t.check("container mysql is not valid for pod shop/db" in st.get("failureReason", ""), st.get("failureReason"))


def kill9_between_pre_and_post(t, takeover):
    sim, store = setup(t, servers=("a", "b"))
    # The first pre hook (attempt 1) hangs after freezing; later ones do not.
    pre = ('n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; touch FROZEN; '
           + log_step("pre", " $n") + '; if [ $n = 1 ]; then touch hanging; sleep 60; fi')
    post = "rm -f FROZEN; " + log_step("post")
    pod(sim, "db", annotations={"pre.hook.backup.velero.io/command": json.dumps(sh(pre)),
                                "pre.hook.backup.velero.io/timeout": "90s",
                                "post.hook.backup.velero.io/command": json.dumps(sh(post))})
    a = server(t, sim, "a")
    create_backup(sim, "bk", {"includedNamespaces": [APP]})
    hanging = os.path.join(sim.exec_root, APP, "db", "app", "hanging")
    wait_for(lambda: os.path.exists(hanging), 60, "the first pre hook to run")
    mid = sim.ok("GET", BK + "/bk")["status"]
    frozen = [p["pod"] for p in mid["checkpoint"]["hooks"]["pods"] if p["frozen"]]
    t.eq(frozen, [APP + "/db"], "status.checkpoint records the frozen pod before its pre hook ran")
    d = cairn("backup", "describe", "bk", "--kubeconfig", sim.kubeconfig, "--namespace", NS)
    t.check("Frozen by a pre hook:  shop/db" in d.stdout, "describe: %s" % d.stdout)
    a.kill9()
    if takeover:    # another server, after a's Lease expired: state from the status
        b = server(t, sim, "b")
        want = ("Completed", "b", 2)
    else:           # a again, same id and journal: state from its journal, same attempt
        b = server(t, sim, "a")
        want = ("Completed", "a", 1)
    st = wait_final(sim, "bk", b)["status"]
    t.eq((st["phase"], st["claim"]["holder"], st["claim"]["attempt"]), want, "resumed and completed")
    log = hook_log(sim, "db")
    t.eq([x[0] for x in log], ["pre", "post", "pre", "post"], "hook log: %s" % log)
    t.eq([x[2] for x in log if x[0] == "pre"], ["1", "2"], "one pre hook per run that froze the pod")
    t.check(not os.path.exists(os.path.join(sim.exec_root, APP, "db", "app", "FROZEN")), "thawed at the end")
    blog = backup_log(store, "bk")
    t.check(any("was left frozen by attempt 1: running its post hooks" in m for _, _, m in blog),
            "the takeover says it thawed the pod")
    t.eq(st.get("hookStatus", {}).get("hooksAttempted"), 4, "hooks counted across attempts")


@case
def hooks_kill9_between_pre_and_post_takeover(t):
    kill9_between_pre_and_post(t, takeover=True)


@case
def hooks_kill9_between_pre_and_post_restart(t):
    kill9_between_pre_and_post(t, takeover=False)


def backup_obj(name, spec):
    return {"apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


@case
def backup_fields_not_implemented_refused_or_warned(t):
    """Issue 21's "never silently Completed" as it plays out on a real
    cluster, where the CRD schema decides first. Every field of Velero's
    BackupSpec is declared, so the API server keeps it and cairn refuses or
    warns about those it does not implement; values the schema can judge
    (enums, required fields, at least one command word) are the API
    server's 422 at create; a field nobody declares (a typo) is refused by
    the API server when the client asks for strict validation (kubectl by
    default, cairn's CLI always) and otherwise dropped with a Warning the
    client is shown."""
    sim, store = setup(t)
    srv = server(t, sim)
    # Velero's fields: kept by the API server, then refused or warned by cairn
    create_backup(sim, "policy", {"includedNamespaces": [APP], "resourcePolicy": {"kind": "configmap",
                                                                                  "name": "p"}})
    create_backup(sim, "scoped", {"includedClusterScopedResources": ["storageclasses"]})
    create_backup(sim, "hooktime", {"hooks": {"resources": [
        {"name": "x", "pre": [{"exec": {"command": ["true"], "timeout": "soon"}}]}]}})
    warned = {"volumeSnapshotLocations": ["aws-east"], "itemOperationTimeout": "10m",
              "defaultVolumesToFsBackup": True, "volumeGroupSnapshotLabelKey": "app.kubernetes.io/instance",
              "backupType": "Incremental"}
    create_backup(sim, "warned", dict(warned, includedNamespaces=[APP]))
    t.eq(sorted(k for k in sim.ok("GET", BK + "/warned")["spec"] if k in warned), sorted(warned),
         "the API server keeps every Velero field")
    for name, want in (("policy", "spec.resourcePolicy is not supported by cairn"),
                       ("scoped", "spec.includedClusterScopedResources is not supported by cairn"),
                       ("hooktime", 'spec.hooks.resources[0].pre[0].exec.timeout: invalid duration "soon"')):
        st = wait_final(sim, name, srv)["status"]
        t.eq(st["phase"], "FailedValidation", name)
        t.check(any(want in e for e in st.get("validationErrors", [])),
                "%s: %r in %s" % (name, want, st.get("validationErrors")))
    st = wait_final(sim, "warned", srv)["status"]
    t.eq((st["phase"], st.get("warnings")), ("Completed", len(warned)), "warned fields: completed with warnings")
    with gzip.open(stored(store, "warned", "-results.gz"), "rt") as f:
        warn = json.dumps(json.load(f)["warnings"])
    for f in warned:
        t.check("spec.%s is ignored" % f in warn, "warning for %s: %s" % (f, warn))
    d = cairn("backup", "describe", "warned", "--kubeconfig", sim.kubeconfig, "--namespace", NS)
    t.check("Warnings:  %d\n" % len(warned) in d.stdout, "describe shows the warnings: %s" % d.stdout)

    # what the schema can judge: the API server's 422, nothing is created
    st, body, _ = sim.post(BK, backup_obj("badhook", {"backupType": "Weekly", "hooks": {"resources": [
        {"name": "x", "pre": [{"exec": {"command": [], "onError": "Maybe"}}], "post": [{"run": {}}]}]}}))
    t.eq(st, 422, "bad enum values and hooks: %s" % body)
    msg = body.get("message", "")
    for want in ('spec.backupType: Unsupported value: "Weekly"',
                 'spec.hooks.resources[0].pre[0].exec.onError: Unsupported value: "Maybe": supported values: '
                 '"Continue", "Fail"',
                 "spec.hooks.resources[0].pre[0].exec.command in body should have at least 1 items",
                 "spec.hooks.resources[0].post[0].exec: Required value"):
        t.check(want in msg, "422 names %r: %s" % (want, msg))
    t.eq(sim.get(BK + "/badhook")[0], 404, "nothing created")

    # a typo: kubectl (strict by default) is refused, nothing is created ...
    typo = json.dumps(backup_obj("typo", {"includeNamespaces": [APP]}))
    r = sim.kubectl("create", "-f", "-", input=typo, check=False)
    t.check(r.returncode != 0 and 'Backup in version "v1" cannot be handled as a Backup: strict decoding error: '
            'unknown field "spec.includeNamespaces"' in r.stderr, "kubectl create: %s" % r.stderr)
    t.eq(sim.get(BK + "/typo")[0], 404, "nothing created")
    # ... a client that does not ask is told the field was dropped
    r = sim.kubectl("create", "--validate=warn", "--dry-run=server", "-o", "json", "-f", "-", input=typo,
                    check=False)
    t.check(r.returncode == 0 and 'Warning: unknown field "spec.includeNamespaces"' in r.stderr,
            "kubectl create --validate=warn: %s" % r.stderr)
    t.eq(json.loads(r.stdout)["spec"], {}, "the typo is dropped by the API server")

    # cairn's CLI asks for strict validation: against a Backup CRD older than
    # a field it writes, the backup is refused, never created without it
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.cairn.io"
    crd = sim.ok("GET", crd_path)
    del crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ttl"]
    sim.ok("PUT", crd_path, crd)
    r = cairn("backup", "create", "short", "--ttl", "1h", "--include-namespaces", APP,
              "--kubeconfig", sim.kubeconfig, "--namespace", NS)
    t.check(r.returncode == 1 and 'strict decoding error: unknown field "spec.ttl"' in r.stderr,
            "cairn backup create against an older CRD: %d %s" % (r.returncode, r.stderr))
    t.eq(sim.get(BK + "/short")[0], 404, "nothing created")


def wait_restore(sim, name, srv, timeout=90):
    def done():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        r = sim.ok("GET", "%s/%s" % (RS, name))
        return r if r.get("status", {}).get("phase") in FINAL else None
    return wait_for(done, timeout, "restore %s to finish" % name, interval=0.1)


@case
def restore_init_containers_and_exec_hooks_after_ready(t):
    sim, store = setup(t)
    own_init = [{"name": "migrate", "image": "busybox", "command": ["true"]}]
    # db: annotation hooks; its exec hook waits for the container to be ready
    pod(sim, "db", labels={"app": "db"}, init=own_init, annotations={
        "init.hook.restore.velero.io/container-image": "busybox:1.36",
        "init.hook.restore.velero.io/container-name": "restore-data",
        "init.hook.restore.velero.io/command": json.dumps(["sh", "-c", "cp -a /backup/. /data/"]),
        "post.hook.restore.velero.io/command": json.dumps(sh(log_step("restored") + " && touch done")),
        "post.hook.restore.velero.io/wait-for-ready": "true",
        "post.hook.restore.velero.io/wait-timeout": "60s",
    })
    # web: the Restore's spec hooks; stuck: never runs, so its hook times out
    pod(sim, "web", labels={"app": "web"}, containers=("nginx", "side"))
    pod(sim, "stuck", labels={"app": "stuck"})
    pod(sim, "plain", labels={"app": "plain"})
    srv = server(t, sim)
    create_backup(sim, "b1", {"includedNamespaces": [APP]})
    t.eq(wait_final(sim, "b1", srv)["status"]["phase"], "Completed", "backup")
    sim.ok("DELETE", "/api/v1/namespaces/" + APP)
    wait_for(lambda: sim.get("/api/v1/namespaces/" + APP)[0] == 404, 10, "namespace gone")
    for p in ("db", "web", "stuck", "plain"):
        for c in ("app", "nginx", "side"):
            lf = os.path.join(sim.exec_root, APP, p, c, "hooks.log")
            if os.path.exists(lf):
                os.remove(lf)
    exec_rule = lambda word, **kw: {"exec": dict({"command": sh(log_step(word))}, **kw)}
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "r1", "namespace": NS},
                        "spec": {"backupName": "b1", "itemOperationTimeout": "1h", "hooks": {"resources": [
                            {"name": "web-init", "labelSelector": {"matchLabels": {"app": "web"}},
                             "postHooks": [
                                 {"init": {"initContainers": [
                                     {"name": "seed", "image": "busybox", "command": ["sh", "-c", "seed"]}]}},
                                 exec_rule("warm", container="side", waitTimeout="60s"),
                                 exec_rule("check")]},
                            {"name": "stuck-wait", "labelSelector": {"matchLabels": {"app": "stuck"}},
                             "postHooks": [exec_rule("never", waitTimeout="2s")]},
                        ]}}})
    # the pods come back Pending (nothing starts them): their hooks wait
    wait_for(lambda: all(sim.get(PODS + "/" + p)[0] == 200 for p in ("db", "web", "stuck", "plain")),
             60, "pods restored")
    db = sim.ok("GET", PODS + "/db")
    t.eq([c["name"] for c in db["spec"]["initContainers"]], ["restore-data", "migrate"],
         "db: the annotation's init container first, then its own")
    t.eq(db["spec"]["initContainers"][0]["command"], ["sh", "-c", "cp -a /backup/. /data/"], "init command")
    t.eq(db["spec"]["initContainers"][0]["image"], "busybox:1.36", "init image")
    web = sim.ok("GET", PODS + "/web")
    t.eq([c["name"] for c in web["spec"].get("initContainers", [])], ["seed"], "web: the rule's init container")
    t.check(not sim.ok("GET", PODS + "/plain")["spec"].get("initContainers"), "plain: no init container")
    time.sleep(1.5)
    t.eq(hook_log(sim, "db") + hook_log(sim, "web", "side") + hook_log(sim, "web", "nginx"), [],
         "no exec hook before the containers run")
    # a restore leaves nodeName to the scheduler (issue 18, as Velero):
    # kubesim has none, so the test schedules the pods it starts
    for p in ("db", "web"):
        t.check("nodeName" not in sim.ok("GET", PODS + "/" + p)["spec"], "%s restored unscheduled" % p)
        sim.ok("PATCH", PODS + "/" + p, {"spec": {"nodeName": "node-1"}},
               content_type="application/merge-patch+json")
    # web's containers run; db's runs but is not ready yet, then is
    t_web = time.time()
    sim.patch(PODS + "/web/status", {"status": {"phase": "Running", "containerStatuses": [
        {"name": "nginx", "ready": True, "state": {"running": {}}},
        {"name": "side", "ready": False, "state": {"running": {}}}]}})
    sim.patch(PODS + "/db/status", {"status": {"phase": "Running", "containerStatuses": [
        {"name": "app", "ready": False, "state": {"running": {}}}]}})
    wait_for(lambda: len(hook_log(sim, "web", "nginx")) == 1, 30, "web's hooks")
    time.sleep(1.0)
    t.eq(hook_log(sim, "db"), [], "db's hook waits for ready, not just running")
    t_db = time.time()
    sim.patch(PODS + "/db/status", {"status": {"containerStatuses": [
        {"name": "app", "ready": True, "state": {"running": {}}}]}})
    r = wait_restore(sim, "r1", srv)
    st = r["status"]
    log = hook_log(sim, "db")
    t.eq([x[0] for x in log], ["restored"], "db's exec hook ran once")
    t.check(float(log[0][1]) > t_db, "db's hook ran after its container was ready")
    t.check(os.path.exists(os.path.join(sim.exec_root, APP, "db", "app", "done")), "in the pod's container")
    web_log = hook_log(sim, "web", "side") + hook_log(sim, "web", "nginx")
    t.eq([x[0] for x in sorted(web_log, key=lambda x: float(x[1]))], ["warm", "check"], "web: in order")
    t.check(all(float(x[1]) > t_web for x in web_log), "web's hooks ran after its containers ran")
    t.eq(exec_requests(sim, "plain"), [], "no hook for a pod without any")
    t.eq(st["phase"], "PartiallyFailed", "the stuck pod's hook is an error (onError Fail)")
    t.eq(st.get("hookStatus"), {"hooksAttempted": 4, "hooksFailed": 1}, "restore hookStatus")
    with gzip.open(stored(store, "restore-r1", "-results.gz"), "rt") as f:
        errs = json.dumps(json.load(f)["errors"])
    t.check('post-restore hook \\"stuck-wait\\" in pod shop/stuck' in errs and
            "was not running within the wait timeout (2s)" in errs, errs)
    with gzip.open(stored(store, "restore-r1", "-results.gz"), "rt") as f:
        warns = json.dumps(json.load(f)["warnings"])
    t.check("spec.itemOperationTimeout is ignored" in warns, "a Velero field cairn does not use is warned: %s"
            % warns)
    # what the API server keeps but cairn does not implement, or cannot
    # judge from the schema (init containers are free-form), is refused
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "bad", "namespace": NS},
                        "spec": {"backupName": "b1", "resourceModifier": {"kind": "ConfigMap", "name": "mods"},
                                 "hooks": {"resources": [
                                     {"name": "x", "postHooks": [
                                         {"init": {"initContainers": [{"name": "n"}]}}]}]}}})
    st = wait_restore(sim, "bad", srv)["status"]
    t.eq(st["phase"], "FailedValidation", "bad restore spec")
    errs = st.get("validationErrors", [])
    t.check(any("spec.resourceModifier is not supported by cairn" in e for e in errs), errs)
    t.check(any("each container needs a name and an image" in e for e in errs), errs)
    # a field Velero does not have (exec.timeout: Velero's is execTimeout) is
    # the API server's: refused for kubectl, dropped with a Warning otherwise
    typo = json.dumps({"apiVersion": "cairn.io/v1", "kind": "Restore", "metadata": {"name": "typo", "namespace": NS},
                       "spec": {"backupName": "b1", "hooks": {"resources": [
                           {"name": "x", "postHooks": [{"exec": {"command": ["a"], "timeout": "1s"}}]}]}}})
    field = "spec.hooks.resources[0].postHooks[0].exec.timeout"
    r = sim.kubectl("create", "-f", "-", input=typo, check=False)
    t.check(r.returncode != 0 and 'strict decoding error: unknown field "%s"' % field in r.stderr,
            "kubectl create: %s" % r.stderr)
    t.eq(sim.get(RS + "/typo")[0], 404, "nothing created")
    r = sim.kubectl("create", "--validate=warn", "--dry-run=server", "-f", "-", input=typo, check=False)
    t.check(r.returncode == 0 and 'Warning: unknown field "%s"' % field in r.stderr,
            "kubectl create --validate=warn: %s" % r.stderr)


@case
def ordered_resources_order_items_and_hooks(t):
    sim, store = setup(t)
    shared = t.path("order.log")
    for name in ("a", "b", "c", "d"):
        pod(sim, name, annotations={"pre.hook.backup.velero.io/command": json.dumps(
            sh('echo "$KUBESIM_POD" >> %s' % shared))})
    srv = server(t, sim)
    create_backup(sim, "ord", {"includedNamespaces": [APP], "orderedResources": {
        "pods": "shop/c, shop/a,shop/gone", "configmaps": "shop/settings"}})
    st = wait_final(sim, "ord", srv)["status"]
    t.eq(st["phase"], "Completed", "phase")
    with open(shared) as f:
        t.eq(f.read().split(), ["c", "a", "b", "d"], "pods' hooks run in orderedResources' order, then the rest")
    with tarfile.open(stored(store, "ord", ".tar.gz"), "r:gz") as tf:
        pods = [n.rsplit("/", 1)[1] for n in tf.getnames()
                if n.startswith("resources/pods/namespaces/%s/" % APP)]
    t.eq(pods, ["c.json", "a.json", "b.json", "d.json"], "tarball order")
    with gzip.open(stored(store, "ord", "-results.gz"), "rt") as f:
        warn = json.dumps(json.load(f)["warnings"])
    t.check("orderedResources" in warn and "shop/gone" in warn, "a missing name is a warning: %s" % warn)
    t.eq(st.get("warnings"), 1, "one warning")


@case
def ordered_resources_resume_inside_the_ordered_items(t):
    """kill -9 while the second ordered pod's post hook hangs, both ordered
    pods stored: the restart thaws it, goes on after it (nothing ordered
    left) and lists the rest; every pod is in the tarball once, in order,
    and each pre hook ran once."""
    sim, store = setup(t)
    shared = t.path("order.log")
    pre = 'echo "pre $KUBESIM_POD" >> %s' % shared
    # c's post hook gives the compression thread time, so the part is cut
    # after a (the next item boundary); a's first post hook hangs.
    post = ('echo "post $KUBESIM_POD" >> %s; if [ "$KUBESIM_POD" = c ]; then sleep 2; fi; '
            'if [ "$KUBESIM_POD" = a ] && [ ! -e hung ]; then touch hung; sleep 60; fi' % shared)
    for name in ("a", "b", "c", "d"):
        pod(sim, name, annotations={"pre.hook.backup.velero.io/command": json.dumps(sh(pre)),
                                    "post.hook.backup.velero.io/command": json.dumps(sh(post)),
                                    "post.hook.backup.velero.io/timeout": "90s",
                                    "pad": os.urandom(PAD).hex()})
    a = server(t, sim, extra=["--part-size", "4096"])
    create_backup(sim, "ord", {"includedNamespaces": [APP], "orderedResources": {"pods": "shop/c,shop/a"}})
    wait_for(lambda: os.path.exists(os.path.join(sim.exec_root, APP, "a", "app", "hung")), 60,
             "a's post hook hangs")
    parts = sim.ok("GET", BK + "/ord")["status"]["checkpoint"].get("parts", [])
    t.check(parts and parts[-1]["lastItem"] == "/pods/%s/a" % APP,
            "the last stored item is the second ordered pod: %s" % [p["lastItem"] for p in parts])
    a.kill9()
    b = server(t, sim, extra=["--part-size", "4096"])
    st = wait_final(sim, "ord", b)["status"]
    t.eq(st["phase"], "Completed", "resumed")
    with open(shared) as f:
        t.eq([x for x in f.read().splitlines()],
             ["pre c", "post c", "pre a", "post a", "post a", "pre b", "post b", "pre d", "post d"],
             "hooks: the ordered pods, a thawed after the restart, then the list")
    with tarfile.open(stored(store, "ord", ".tar.gz"), "r:gz") as tf:
        pods = [n.rsplit("/", 1)[1] for n in tf.getnames()
                if n.startswith("resources/pods/namespaces/%s/" % APP)]
    t.eq(pods, ["c.json", "a.json", "b.json", "d.json"], "tarball: each pod once, in order")


main()
