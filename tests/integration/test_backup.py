"""Backups end to end (issue 7): cairn server against kubesim, fs and S3 storage.

Each case starts kubesim (with cairn's CRDs), a BackupStorageLocation, a
`cairn server`, creates Backup objects over plain HTTP and checks what
landed in storage: the tarball read with GNU tar and Python's tarfile, the
item set against kubesim's objects under the backup's filters, the metadata
files, the phases, and resume after kill -9.
"""
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time

from bkworld import find_file
from cairntest import BIN, case, main, wait_for, CheckFailed

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS


def s3_secret(sim, s3):
    import base64
    with open(s3.creds_file, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds"}, "data": {"cloud": data}})


def setup(t, fs_root=None, bsl=None, s3=None):
    sim = t.kubesim()
    sim.install_crds(NS)
    if s3 is not None:
        s3_secret(sim, s3)
    if bsl is None:
        fs_root = fs_root or t.mkdir("store")
        bsl = {"provider": "fs", "objectStorage": {"bucket": "bk"},
               "config": {"path": fs_root}, "default": True}
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS}, "spec": bsl})
    return sim


# ConfigMap lists across namespaces or of one (a backup with
# includedNamespaces lists namespace by namespace)
CM_LIST = "^/api/v1/(namespaces/[^/]+/)?configmaps$"


def slow_bulk(t, n, delay, payload, path=CM_LIST):
    """An fs store and a kubesim with n ConfigMaps in namespace bulk whose
    list pages take `delay` seconds each, so a kill lands mid-backup."""
    root = t.mkdir("store")
    sim = setup(t, root)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"payload": payload * 64}}, n,
             name="cm-{i:06d}", namespace="bulk")
    sim.faults({"method": "GET", "path": path, "delay": delay, "count": 100000})
    return root, sim


def add_crd(sim, kind, plural, ns):
    """A namespaced custom resource of group example.com, served; the
    path of its collection in namespace ns."""
    sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.example.com" % plural},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural[:-1], "kind": kind,
                           "listKind": kind + "List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    path = "/apis/example.com/v1/namespaces/%s/%s" % (ns, plural)
    wait_for(lambda: sim.get(path)[0] == 200, 10, "CRD %s served" % plural)
    return path


def seed(sim, namespaces=("alpha", "beta", "gamma")):
    for ns in namespaces:
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns, "labels": {"team": ns}}})
        for i in range(5):
            sim.ok("POST", "/api/v1/namespaces/%s/configmaps" % ns, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm-%d" % i, "labels": {"app": "web" if i % 2 else "db"}},
                "data": {"k": "v%d" % i}})
        sim.ok("POST", "/api/v1/namespaces/%s/secrets" % ns, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"a": "Yg=="}})
        sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % ns, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"volumeName": "pv-%s" % ns, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        sim.ok("POST", "/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-%s" % ns},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}})
        sim.ok("POST", "/apis/apps/v1/namespaces/%s/deployments" % ns, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    # custom resources: widgets only in alpha, gadgets only in gamma
    for kind, plural, ns in (("Widget", "widgets", "alpha"), ("Gadget", "gadgets", "gamma")):
        if ns not in namespaces:
            continue
        sim.ok("POST", add_crd(sim, kind, plural, ns), {
            "apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "one"}, "spec": {"x": 1}})
    sim.ok("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
        "provisioner": "rancher.io/local-path"})


def server(t, sim, sid="s1", part_size=8 << 20, journal=None, extra=()):
    journal = journal or t.path("journal-%s.db" % sid)
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                    "--server-id", sid, "--journal", journal, "--part-size", str(part_size),
                    "--retry-period", "200ms", "--log-level", "info"] + list(extra), name="server-" + sid)


def create_backup(sim, name, spec=None):
    return sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                               "metadata": {"name": name, "namespace": NS}, "spec": spec or {}})


def get_backup(sim, name):
    return sim.ok("GET", "%s/%s" % (BK, name))


FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def wait_final(sim, name, timeout=60, srv=None):
    def done():
        if srv is not None and not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        b = get_backup(sim, name)
        return b if b.get("status", {}).get("phase") in FINAL else None
    return wait_for(done, timeout, "backup %s to finish" % name, interval=0.1)


def tar_names(path):
    r = subprocess.run(["tar", "tzf", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed("GNU tar cannot read %s: %s" % (path, r.stderr))
    gnu = r.stdout.split()
    with tarfile.open(path, "r:gz") as tf:
        py = tf.getnames()
    if gnu != py:
        raise CheckFailed("GNU tar and tarfile disagree")
    return py


def expected_items(sim, include_ns=None, cluster=True, label=None):
    """Legacy tarball paths of what kubesim holds under simple filters."""
    out = set()
    _, disc, _ = sim.get("/api/v1")
    groups = [("", "v1", r) for r in disc["resources"]]
    _, apis, _ = sim.get("/apis")
    for g in apis["groups"]:
        gv = g["preferredVersion"]["groupVersion"]
        _, d, _ = sim.get("/apis/" + gv)
        groups += [(g["name"], g["preferredVersion"]["version"], r) for r in d["resources"]]
    for group, ver, r in groups:
        # what Velero backs up (pkg/discovery/helper.go): list, create, get and delete;
        # events.k8s.io events are the core events again (cohabiting: one copy)
        if "/" in r["name"] or not {"list", "create", "get", "delete"} <= set(r["verbs"]) \
                or group == "events.k8s.io":
            continue
        base = "/api/v1" if not group else "/apis/%s/%s" % (group, ver)
        q = "?labelSelector=" + label if label and r["name"] != "namespaces" else ""
        items = sim.ok("GET", "%s/%s%s" % (base, r["name"], q))["items"]
        res = r["name"] + ("." + group if group else "")
        for it in items:
            md = it["metadata"]
            if r["namespaced"]:
                if include_ns is not None and md["namespace"] not in include_ns:
                    continue
                out.add("resources/%s/namespaces/%s/%s.json" % (res, md["namespace"], md["name"]))
            else:
                if r["name"] == "namespaces":
                    if include_ns is not None and md["name"] not in include_ns:
                        continue
                elif not cluster(res, md["name"]) if callable(cluster) else not cluster:
                    continue
                out.add("resources/%s/cluster/%s.json" % (res, md["name"]))
    return out


def check_tarball(t, path, want_legacy):
    names = tar_names(path)
    t.eq(names[0], "metadata/version", "first entry")
    with tarfile.open(path, "r:gz") as tf:
        t.eq(tf.extractfile("metadata/version").read(), b"1.1.0\n", "metadata/version")
        legacy = [n for n in names if n.startswith("resources/") and "-preferredversion/" not in n]
        pref = [n for n in names if "-preferredversion/" in n]
        t.eq(len(legacy), len(set(legacy)), "legacy entries unique")
        if want_legacy is not None:
            missing = sorted(want_legacy - set(legacy))[:5]
            extra = sorted(set(legacy) - want_legacy)[:5]
            t.check(not missing and not extra, "item set differs: missing %s extra %s" % (missing, extra))
        # each legacy path has its preferred-version twin with the same bytes
        t.eq(len(pref), len(legacy), "preferred-version entries")
        for n in legacy[:50]:
            parts = n.split("/")
            ver = json.loads(tf.extractfile(n).read())["apiVersion"].split("/")[-1]
            twin = "/".join(parts[:2] + ["%s-preferredversion" % ver] + parts[2:])
            t.eq(tf.extractfile(twin).read(), tf.extractfile(n).read(), "twin of " + n)
    return legacy


@case
def backup_fs_all_and_filtered(t):
    root = t.mkdir("store")
    sim = setup(t, root)
    seed(sim)
    srv = server(t, sim)
    create_backup(sim, "full")
    # a name twice, and one a pattern also matches: each namespace once
    create_backup(sim, "some", {"includedNamespaces": ["alpha", "b*", "beta", "alpha"],
                                "excludedResources": ["secrets"],
                                "ttl": "72h"})
    create_backup(sim, "labels", {"includedNamespaces": ["gamma"], "includeClusterResources": False,
                                  "labelSelector": {"matchLabels": {"app": "web"}}})
    b = wait_final(sim, "full", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "full phase (%s)" % b["status"])
    st = b["status"]
    t.check(st["claim"]["holder"] == "s1" and st["claim"]["attempt"] == 1, "claim: %s" % st.get("claim"))
    t.check(st.get("startTimestamp") and st.get("completionTimestamp") and st.get("expiration"), "timestamps")
    t.eq(st["progress"]["itemsBackedUp"], st["progress"]["totalItems"], "progress done == total")
    t.eq(st["formatVersion"], "1.1.0", "formatVersion")
    ready = [c for c in st.get("conditions", []) if c["type"] == "Ready"]
    t.check(ready and ready[0]["status"] == "True" and ready[0]["reason"] == "Completed",
            "Ready condition: %s" % st.get("conditions"))
    tb = find_file(root, "full.tar.gz")
    # everything kubesim holds (the Backup objects change while it runs: skip them)
    want = {p for p in expected_items(sim) if "backups.cairn.io" not in p}
    legacy = [p for p in check_tarball(t, tb, None) if "backups.cairn.io" not in p]
    t.eq(set(legacy), want, "full backup item set")
    d = os.path.dirname(tb)
    with gzip.open(os.path.join(d, "full-resource-list.json.gz")) as f:
        rl = json.load(f)
    t.check("v1/ConfigMap" in rl and "alpha/cm-0" in rl["v1/ConfigMap"], "resource list: %s" % list(rl)[:10])
    t.check("apps/v1/Deployment" in rl, "resource list has deployments")
    with gzip.open(os.path.join(d, "full-results.gz")) as f:
        res = json.load(f)
    t.check(set(res) == {"errors", "warnings"} and res["errors"]["velero"] == [], "results: %s" % res)
    with gzip.open(os.path.join(d, "full-volumesnapshots.json.gz")) as f:
        t.eq(json.load(f), [], "volumesnapshots")
    with gzip.open(os.path.join(d, "full-logs.gz")) as f:
        t.check(b"backup started" in f.read(), "logs file")
    with open(os.path.join(d, "velero-backup.json")) as f:
        t.eq(json.load(f)["status"]["phase"], "Completed", "velero-backup.json phase")

    b = wait_final(sim, "some", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "some phase")
    ex = expected_items(sim, include_ns={"alpha", "beta"},
                        cluster=lambda res, n: (res == "persistentvolumes" and n in ("pv-alpha", "pv-beta")) or
                        (res == "customresourcedefinitions.apiextensions.k8s.io" and n == "widgets.example.com"))
    ex = {p for p in ex if "/secrets/" not in p}
    check_tarball(t, find_file(root, "some.tar.gz"), ex)

    b = wait_final(sim, "labels", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "labels phase")
    ex = expected_items(sim, include_ns={"gamma"}, cluster=False, label="app%3Dweb")
    check_tarball(t, find_file(root, "labels.tar.gz"), ex)

    # threads say what they are (ps -L, top -H, perf): after three backups
    # the two workers are still "cairn-worker", whatever ran on them
    names = []
    for tid in os.listdir("/proc/%d/task" % srv.pid):
        with open("/proc/%d/task/%s/comm" % (srv.pid, tid)) as f:
            names.append(f.read().strip())
    t.eq(names.count("cairn-worker"), 2, "cairn-worker threads in %s" % sorted(names))
    t.check({"cairn", "cairn-lease", "cairn-signals"} <= set(names), "thread names: %s" % sorted(names))


@case
def backup_skips_items_being_deleted(t):
    """Items being deleted (deletionTimestamp set, a finalizer holding
    them) are left out, as Velero does, whether or not the backup reads
    labels; the item scan stops early only where metadata's order says
    deletionTimestamp cannot come any more (issue 27)."""
    root = t.mkdir("store")
    sim = setup(t, root)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "del"}})
    for name in ("live", "going", "bare-going", "bare-live"):
        md = {"name": name}
        if not name.startswith("bare"):
            md["labels"] = {"app": "web"}
        if name.endswith("going"):
            md["finalizers"] = ["example.com/hold"]
        sim.ok("POST", "/api/v1/namespaces/del/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"k": name}})
        if name.endswith("going"):
            sim.ok("DELETE", "/api/v1/namespaces/del/configmaps/" + name)
    going = sim.ok("GET", "/api/v1/namespaces/del/configmaps/going")["metadata"]
    t.check("deletionTimestamp" in going and list(going).index("deletionTimestamp") <
            list(going).index("labels") < list(going).index("managedFields"),
            "kubesim writes metadata in the Go struct's order: %s" % list(going))
    # a custom resource's keys come sorted (finalizers before labels)
    wpath = add_crd(sim, "Widget", "widgets", "del")
    for name in ("w-live", "w-going"):
        md = {"name": name, "labels": {"app": "web"}}
        if name == "w-going":
            md["finalizers"] = ["example.com/hold"]
        sim.ok("POST", wpath, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": md})
    sim.ok("DELETE", wpath + "/w-going")
    wmd = list(sim.ok("GET", wpath + "/w-going")["metadata"])
    t.check("deletionTimestamp" in wmd and wmd == sorted(wmd), "a widget's metadata keys: %s" % wmd)
    srv = server(t, sim)
    create_backup(sim, "all", {"includedNamespaces": ["del"], "includeClusterResources": False})
    create_backup(sim, "web", {"includedNamespaces": ["del"], "includeClusterResources": False,
                               "labelSelector": {"matchLabels": {"app": "web"}}})
    for name, want in (("all", {"live", "bare-live", "w-live"}), ("web", {"live", "w-live"})):
        b = wait_final(sim, name, srv=srv)
        t.eq(b["status"]["phase"], "Completed", "%s phase" % name)
        got = {n.rsplit("/", 1)[1][:-5] for n in tar_names(find_file(root, name + ".tar.gz"))
               if re.match(r"resources/(configmaps|widgets\.example\.com)/namespaces/del/", n)}
        t.eq(got, want, "%s: the items backed up" % name)


@case
def backup_validation_and_failures(t):
    sim = setup(t)
    seed(sim, ("alpha",))
    srv = server(t, sim)
    create_backup(sim, "both", {"includedNamespaces": ["a", "b"], "excludedNamespaces": ["b"]})
    create_backup(sim, "badttl", {"ttl": "forever"})
    # an operator outside the CRD's enum never reaches cairn: the API server refuses it
    st, body, _ = sim.post(BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                "metadata": {"name": "badop", "namespace": NS},
                                "spec": {"labelSelector": {"matchExpressions": [
                                    {"key": "app", "operator": "Like", "values": ["x"]}]}}})
    t.check(st == 422 and 'spec.labelSelector.matchExpressions[0].operator: Unsupported value: "Like"'
            in body.get("message", ""), "operator outside the schema: %s %s" % (st, body))
    create_backup(sim, "badsel", {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": []}]}})
    create_backup(sim, "noloc", {"storageLocation": "nowhere"})
    for name, needle in (("both", "excludes list cannot contain an item in the includes list: b"),
                         ("badttl", "Invalid TTL"), ("badsel", "Invalid label selector"),
                         ("noloc", "backupstoragelocations.cairn.io \"nowhere\" not found")):
        b = wait_final(sim, name, srv=srv)
        t.eq(b["status"]["phase"], "FailedValidation", name + " phase")
        errs = b["status"].get("validationErrors", [])
        t.check(any(needle in e for e in errs), "%s: %r lacks %r" % (name, errs, needle))
    # storage that cannot be reached
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "dead", "namespace": NS},
                         "spec": {"provider": "s3", "objectStorage": {"bucket": "nobucket"},
                                  "credential": {"name": "dead-creds", "key": "cloud"},
                                  "config": {"endpoint": "http://127.0.0.1:9", "region": "us-east-1",
                                             "s3ForcePathStyle": "true"}}})
    sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dead-creds"},
        "data": {"cloud": "W2RlZmF1bHRdCmF3c19hY2Nlc3Nfa2V5X2lkID0geAphd3Nfc2VjcmV0X2FjY2Vzc19rZXkgPSB5Cg=="}})
    create_backup(sim, "dead", {"storageLocation": "dead"})
    b = wait_final(sim, "dead", timeout=90, srv=srv)
    t.eq(b["status"]["phase"], "Failed", "unreachable storage phase")
    t.check("unreachable" in b["status"].get("failureReason", ""), "failureReason: %r" %
            b["status"].get("failureReason"))
    # a resource whose list fails: PartiallyFailed, the rest still backed up
    sim.faults({"method": "GET", "path": "^/api/v1/secrets$", "status": 403, "message": "secrets is forbidden: RBAC says no",
                "count": 1000})
    create_backup(sim, "partial")
    b = wait_final(sim, "partial", srv=srv)
    t.eq(b["status"]["phase"], "PartiallyFailed", "list failure phase")
    t.check(b["status"].get("errors", 0) >= 1, "errors counted")
    root = [v for v in [t.path("store")]][0]
    tb = find_file(root, "partial.tar.gz")
    legacy = check_tarball(t, tb, None)
    t.check(not any("/secrets/" in n for n in legacy), "no secrets in partial backup")
    t.check(any("/configmaps/" in n for n in legacy), "configmaps still backed up")
    with gzip.open(os.path.join(os.path.dirname(tb), "partial-results.gz")) as f:
        res = json.load(f)
    t.check(any("secrets" in e and "RBAC says no" in e for e in res["errors"]["velero"]),
            "results record the list error: %s" % res["errors"])
    # printer columns through the real kubectl
    out = sim.kubectl("get", "backups.cairn.io", "-n", NS).stdout
    hdr = out.splitlines()[0].split()
    for col in ("PHASE", "ITEMS", "TOTAL", "HOLDER", "LOCATION", "AGE"):
        t.check(col in hdr, "kubectl header %r lacks %s" % (hdr, col))
    t.check(re.search(r"^partial\s+PartiallyFailed\s+\d+\s+\d+\s+s1\s", out, re.M), "row: %s" % out)


LIST_PAGE = 500   # the backup's list page size (engine/backup.c lo.limit)


def sim_token_start(token):
    """The (namespace, name) after which a kubesim continue token resumes."""
    import base64
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    return tuple(json.loads(raw)["start"])


def listed_ranges(sim, since, keys):
    """ConfigMap list requests kubesim received from start time `since` on.

    keys: every ConfigMap key (namespace, name) in kubesim's list order.
    kubesim logs a request when it completes, so requests of the killed
    server may be logged after the restart, and a request may be logged
    before the one whose answer it follows (the thread that answered the
    first was not yet scheduled to log it): requests are told apart and
    ordered by their start time. Returns [(query dict, first index, item
    count, status)] in the order they were sent: the items each answer
    held, derived from its continue token and limit.
    """
    import bisect
    from urllib.parse import parse_qs
    out = []
    for r in sorted(sim.requests(), key=lambda r: r["time"]):
        if r["method"] != "GET" or not re.match(CM_LIST, r["path"]) or r.get("watch") or r["time"] < since:
            continue
        q = {k: v[0] for k, v in parse_qs(r["query"]).items()}
        first = bisect.bisect_right(keys, sim_token_start(q["continue"])) if q.get("continue") else 0
        limit = int(q.get("limit", "0"))
        count = len(keys) - first if not limit else min(limit, len(keys) - first)
        out.append((q, first, count if r["status"] == 200 else 0, r["status"]))
    return out


def kill9_resume(t, compact):
    # Parts hold about 500 items here (deflate hands over ~40 KiB at a
    # time, over the 8 KiB part size), so 6000 items give ~12 parts and a
    # kill after 2-6 of them lands mid-backup.
    n = 6000
    root, sim = slow_bulk(t, n, 0.3, "x")
    journal = t.path("journal.db")
    srv = server(t, sim, part_size=8192, journal=journal)
    create_backup(sim, "big", {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]})

    def progress():
        cp = get_backup(sim, "big").get("status", {}).get("checkpoint", {})
        return len(cp.get("parts", [])), cp.get("itemsDone", 0)
    import random
    want = random.randint(2, 6)
    # at least 1000 items stored: the last stored item is past the first
    # list page, so the checkpoint's list position is a real continue token
    wait_for(lambda: progress()[0] >= want and progress()[1] >= 1000, 60,
             "%d checkpointed parts" % want, interval=0.02)
    srv.kill9()
    before = get_backup(sim, "big")["status"]
    t.eq(before["phase"], "InProgress", "phase after kill")
    done_parts = [p["number"] for p in before["checkpoint"]["parts"]]
    k = max(done_parts)
    sim.clear_faults()
    if compact:
        # the API server forgets its history: every continue token handed
        # out so far answers 410 Expired
        sim.compact()
    keys = sorted((o["metadata"]["namespace"], o["metadata"]["name"])
                  for o in sim.ok("GET", "/api/v1/configmaps")["items"])
    restart = time.time()
    srv2 = server(t, sim, part_size=8192, journal=journal)
    b = wait_final(sim, "big", srv=srv2, timeout=90)
    t.eq(b["status"]["phase"], "Completed", "phase after resume")
    t.eq(b["status"]["claim"]["attempt"], 1, "same attempt (own restart)")
    tb = find_file(root, "big.tar.gz")
    want_set = {"resources/configmaps/namespaces/bulk/cm-%06d.json" % i for i in range(n)}
    legacy = check_tarball(t, tb, want_set)
    t.eq(len(legacy), n, "every item exactly once")
    allparts = [p["number"] for p in b["status"]["checkpoint"]["parts"]]
    t.check(len(allparts) >= 3, "several parts: %s" % allparts)
    # parts stored by the restarted server: only numbers after the checkpoint
    # (k+2 when the kill fell between the journal commit of part k+1 and its
    # status write: the journal is ahead, so that part is kept too)
    out2 = srv2.output()
    stored = [int(x) for x in re.findall(r"part (\d+) stored", out2)]
    t.check(stored and min(stored) in (k + 1, k + 2), "restart re-uploaded parts %s (checkpoint had %s)" %
            (stored, done_parts))
    t.check(not set(stored) & set(done_parts), "checkpointed parts stored again: %s" % stored)
    t.eq(allparts, list(range(1, max(allparts) + 1)), "final part list")
    t.eq(sorted(stored), [p for p in allparts if p >= min(stored)], "parts stored by the restart")
    # items written again: at most one part's worth (the one in flight)
    redone = sum(p["items"] for p in b["status"]["checkpoint"]["parts"] if p["number"] > k)
    t.eq(redone + sum(p["items"] for p in before["checkpoint"]["parts"]), n, "item accounting")

    # What the restart listed (kubesim's request log). The items stored
    # before the restart are the first `kept` ConfigMaps of bulk.
    kept = sum(p["items"] for p in b["status"]["checkpoint"]["parts"] if p["number"] < min(stored))
    off = keys.index(("bulk", "cm-000000"))
    reqs = listed_ranges(sim, restart, keys)
    probes = [r for r in reqs if r[0].get("limit") == "1"]      # the progress estimate
    lists = [r for r in reqs if r[0].get("limit") == str(LIST_PAGE)]
    t.eq(len(probes) + len(lists), len(reqs), "ConfigMap requests after the restart: %s" % [r[0] for r in reqs])
    t.check(len(probes) <= 1, "progress probes: %s" % probes)

    def relisted(rs):
        return sum(max(0, min(f + c, off + kept) - max(f, off)) for _, f, c, _ in rs)
    print("# %s: %d items stored before the kill, %d of them listed again (bound %d)" %
          (t.name, kept, relisted(lists), LIST_PAGE))
    if not compact:
        # The list goes on at the page of the last stored item (its continue
        # token is in the journal): of the stored items, at most one list
        # page is listed again (plus the estimate's limit=1 probe). The
        # bound is a page, not a part: parts here hold about a page.
        t.check(relisted(lists) <= LIST_PAGE, "stored items listed again: %d (%d stored, bound: one page of %d)" %
                (relisted(lists), kept, LIST_PAGE))
        t.check(relisted(probes) <= 1, "probe items")
        t.check(lists and lists[0][0].get("continue"), "the resumed list starts at a continue token: %s" %
                [r[0] for r in lists[:3]])
        t.check(not [r for r in lists if not r[0].get("continue")],
                "a list from the first page after the restart: %s" % [r[0] for r in lists])
        t.eq(sum(c for _, _, c, _ in lists), len(keys) - lists[0][1], "items listed by the resumed list")
    else:
        # The token expired: 410. kubesim's Status carries an inconsistent
        # continue token, as the real API server's does: the list goes on
        # from there at the latest state and skips by key what was stored,
        # so of the stored items at most one page is listed again (the
        # unit test test_kube_list_keys covers a 410 without that token:
        # a new list from the first page, skipped by key).
        t.check(lists and lists[0][0].get("continue") and lists[0][3] == 410,
                "the checkpoint's token answered 410: %s" % [(r[0], r[3]) for r in lists[:3]])
        t.check(len(lists) > 1 and lists[1][0].get("continue") and lists[1][3] == 200,
                "then the Status's continue token: %s" % [(r[0], r[3]) for r in lists[:3]])
        t.check(relisted(lists) <= LIST_PAGE, "stored items listed again: %d (%d stored, bound: one "
                "page of %d)" % (relisted(lists), kept, LIST_PAGE))
        t.check("continue token expired" in out2, "server log: %s" % out2[-2000:])
        with gzip.open(find_file(root, "big-logs.gz")) as f:
            blog = f.read().decode()
        t.check("expired" in blog and "nothing is lost or written twice" in blog,
                "backup log: %s" % blog[-2000:])


@case
def backup_kill9_resume(t):
    """Issue 7: kill -9 mid-backup, restart: the list goes on where it was."""
    kill9_resume(t, compact=False)


@case
def backup_kill9_resume_token_expired(t):
    """As above with the API server compacted meanwhile: the token is gone."""
    kill9_resume(t, compact=True)


@case
def backup_kill9_before_first_part(t):
    root, sim = slow_bulk(t, 1500, 0.5, "q")
    journal = t.path("journal.db")
    srv = server(t, sim, journal=journal)   # 8 MiB parts: nothing is cut before the kill
    create_backup(sim, "early", {"includedNamespaces": ["bulk"]})
    wait_for(lambda: get_backup(sim, "early").get("status", {}).get("checkpoint", {}).get("uploadID"),
             30, "the upload to start", interval=0.02)
    srv.kill9()
    sim.clear_faults()
    srv2 = server(t, sim, journal=journal)
    b = wait_final(sim, "early", srv=srv2)
    t.eq(b["status"]["phase"], "Completed", "phase after restart")
    legacy = check_tarball(t, find_file(root, "early.tar.gz"), None)
    t.eq(len([x for x in legacy if "/namespaces/bulk/cm-" in x]), 1500, "every ConfigMap once")
    left = []
    for d, dirs, files in os.walk(root):
        if ".cairn-uploads" in d.split(os.sep):
            left += files
    t.eq(left, [], "uploads left behind")


@case
def backup_sigterm_then_resume(t):
    n = 2000
    # Pages of 500 items a second apart: the signal lands while the backup
    # runs even on a loaded machine (0.3 s pages made the whole backup
    # shorter than the test's reaction to its first checkpoint).
    root, sim = slow_bulk(t, n, 1.0, "y")
    journal = t.path("journal.db")
    srv = server(t, sim, part_size=8192, journal=journal)
    create_backup(sim, "term", {"includedNamespaces": ["bulk"]})
    wait_for(lambda: get_backup(sim, "term").get("status", {}).get("checkpoint", {}).get("parts"),
             60, "a checkpoint", interval=0.02)
    t0 = time.monotonic()
    srv.signal(15)
    rc = srv.wait(15)
    t.eq(rc, 0, "exit code after SIGTERM")
    t.check(time.monotonic() - t0 < 10, "stopped promptly")
    t.eq(get_backup(sim, "term")["status"]["phase"], "InProgress", "phase after SIGTERM")
    sim.clear_faults()
    srv2 = server(t, sim, part_size=8192, journal=journal)
    b = wait_final(sim, "term", srv=srv2, timeout=90)
    t.eq(b["status"]["phase"], "Completed", "phase after restart")
    legacy = check_tarball(t, find_file(root, "term.tar.gz"), None)
    cms = [x for x in legacy if "/configmaps/namespaces/bulk/" in x]
    t.eq(len(cms), n, "every ConfigMap once")


@case
def backup_fenced_when_claim_is_taken(t):
    root, sim = slow_bulk(t, 2000, 0.3, "z")
    srv = server(t, sim, part_size=8192)
    # Created with the cleanup finalizer, as schedules and sync create
    # theirs: otherwise the collector (every server's, owner or not; see
    # docs/protocol.md) adds it on its next pass, which may fall after the
    # takeover below. That write is not the fenced worker's (metadata only,
    # conditional on the resourceVersion listed; the new owner's next write
    # gets a 409, re-reads and finds its claim intact), and here every
    # write after the takeover must be one.
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "stolen", "namespace": NS, "finalizers": ["cairn.io/backup-cleanup"]},
                        "spec": {"includedNamespaces": ["bulk"]}})
    wait_for(lambda: get_backup(sim, "stolen").get("status", {}).get("checkpoint", {}).get("parts"),
             60, "a checkpoint", interval=0.02)
    # another server, alive (its Lease is fresh and long), takes the item
    # over as issue 8's takeover writes it
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    sim.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "cairn-other", "labels": {"cairn.io/server-lease": "true"}},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 3600, "acquireTime": now,
                 "renewTime": now, "leaseTransitions": 0}})
    for _ in range(20):
        b = get_backup(sim, "stolen")
        b["status"]["claim"] = {"holder": "other", "worker": "other/0", "attempt": 2,
                                "claimedAt": "2026-01-01T00:00:00Z"}
        st, _, _ = sim.request("PUT", "%s/stolen/status" % BK, b)
        if st == 200:
            break
    t.eq(st, 200, "takeover write")
    steal_rv = int(get_backup(sim, "stolen")["metadata"]["resourceVersion"])
    wait_for(lambda: "claim lost to other" in srv.output(), 20, "the server to notice")
    time.sleep(1.0)
    b = get_backup(sim, "stolen")
    if int(b["metadata"]["resourceVersion"]) != steal_rv:
        late = [r for r in sim.requests() if "/backups/stolen" in r["path"] and r["method"] != "GET"]
        t.check(False, "written after the takeover (rv %s -> %s): %s" % (
            steal_rv, b["metadata"]["resourceVersion"],
            [(r["seq"], r["conn"], r["userAgent"], r["status"]) for r in late[-6:]]))
    t.eq(b["status"]["claim"]["holder"], "other", "holder")
    t.check(srv.alive(), "server keeps running")
    for f in ("stolen.tar.gz", "velero-backup.json", "stolen-logs.gz"):
        try:
            find_file(root, f)
            t.check(False, "the fenced server wrote %s" % f)
        except CheckFailed as e:
            t.check("not found" in str(e), str(e))


@case
def backup_s3(t):
    try:
        from s3rver import S3rver
    except ImportError:
        t.skip("tests/lib/s3rver.py missing")
    s3 = S3rver(t)
    sim = setup(t, s3=s3, bsl={"provider": "s3", "objectStorage": {"bucket": "cairn", "prefix": "pfx"},
                               "credential": {"name": "s3-creds", "key": "cloud"},
                               "config": {"endpoint": s3.endpoint, "region": "us-east-1",
                                          "s3ForcePathStyle": "true"},
                               "default": True})
    seed(sim, ("alpha", "beta"))
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    # distinct random payloads: ~9 MB of gzip, so at least two 5 MiB parts
    for c in range(10):
        sim.ok("POST", "/_sim/bulk", {"items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cm-%06d" % (c * 250 + i), "namespace": "bulk"},
             "data": {"payload": os.urandom(2700).hex()}} for i in range(250)]})
    srv = server(t, sim, part_size=5 << 20, extra=["--log-level", "info"])
    create_backup(sim, "s3b")
    b = wait_final(sim, "s3b", srv=srv, timeout=120)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("failureReason"))
    t.check(len(b["status"]["checkpoint"]["parts"]) >= 2, "several S3 parts")
    dst = t.path("s3b.tar.gz")
    s3.aws("s3", "cp", "s3://cairn/pfx/backups/s3b/s3b.tar.gz", dst)
    want = {p for p in expected_items(sim) if "backups.cairn.io" not in p}
    legacy = [p for p in check_tarball(t, dst, None) if "backups.cairn.io" not in p]
    t.eq(set(legacy), want, "S3 backup item set")
    for f in ("velero-backup.json", "s3b-resource-list.json.gz", "s3b-results.gz", "s3b-logs.gz"):
        s3.aws("s3", "cp", "s3://cairn/pfx/backups/s3b/" + f, t.path(f))


@case
def backup_50k_objects_several_parts(t):
    """Issue 7: a 50k-object backup produces several parts, every item once."""
    root = t.mkdir("store")
    sim = setup(t, root)
    n = 50000
    part_size = 1 << 20
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "many"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"app": "many"}},
              "data": {"settings.conf": "listen 8080\nworkers 4\n" * 3}},
             n, name="cm-{i:06d}", namespace="many")
    srv = server(t, sim, part_size=part_size)
    create_backup(sim, "fifty", {"includedNamespaces": ["many"], "includedResources": ["configmaps"]})
    b = wait_final(sim, "fifty", srv=srv, timeout=120)
    t.eq(b["status"]["phase"], "Completed", "phase")
    t.eq(b["status"]["progress"]["itemsBackedUp"], n, "itemsBackedUp")
    parts = b["status"]["checkpoint"]["parts"]
    t.check(len(parts) >= 3, "several parts at --part-size %d: %s" % (
        part_size, [(p["number"], p["bytes"]) for p in parts]))
    t.eq([p["number"] for p in parts], list(range(1, len(parts) + 1)), "part numbers")
    t.check(all(p["bytes"] >= part_size for p in parts[:-1]),
            "a part before the last is under --part-size: %s" % [p["bytes"] for p in parts])
    t.eq(sum(p["items"] for p in parts), n, "items over the parts")
    last = [p["lastItem"] for p in parts]
    t.eq(last, sorted(last), "parts end at ascending item keys")
    t.eq(last[-1], "/configmaps/many/cm-%06d" % (n - 1), "last item of the last part")
    tb = find_file(root, "fifty.tar.gz")
    t.eq(os.path.getsize(tb), sum(p["bytes"] for p in parts), "tarball = its parts")
    want = {"resources/configmaps/namespaces/many/cm-%06d.json" % i for i in range(n)}
    legacy = check_tarball(t, tb, want)
    t.eq(len(legacy), n, "every item exactly once")
    with tarfile.open(tb, "r:gz") as tf:
        for i in (0, n // 2, n - 1):
            o = json.loads(tf.extractfile("resources/configmaps/namespaces/many/cm-%06d.json" % i).read())
            t.eq((o["apiVersion"], o["kind"], o["metadata"]["name"]), ("v1", "ConfigMap", "cm-%06d" % i),
                 "item %d" % i)


main()
