"""Backup sync across clusters and storage location health.

- a backup made in one kubesim appears in a second kubesim whose server
  points at the same storage: Backup object (label cairn.io/synced=true,
  status as stored) and its VolumePluginBackups; a ReadOnly location is
  never written by the sync; a restore from the synced backup succeeds
  in the second cluster (tests/helpers/restore_runner runs restores until
  cairn server does);
- a synced Backup still without its status is never run as a new backup
  (it would write over the stored one) and gets its status on the next
  sync; a new backup to a ReadOnly location fails validation;
- a location turns Unavailable with a message when its directory is
  replaced by a file, and when s3rver is stopped; Available again when it
  comes back; a backup to an unavailable location fails with the reason.
"""
import base64
import gzip
import json
import os
import shutil

from cairntest import BIN, BUILDDIR, case, main, wait_for, CheckFailed
from faultproxy import FaultProxy
from s3rver import S3rver

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
VPB = "/apis/cairn.io/v1/namespaces/%s/volumepluginbackups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
RUNNER = os.path.join(BUILDDIR, "tests", "helpers", "restore_runner")


def cluster(t, name, store, access="ReadWrite", period="1s", seed=False):
    sim = t.kubesim(name=name)
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": store}, "default": True,
                                  "accessMode": access, "backupSyncPeriod": period,
                                  "validationFrequency": "1s"}})
    if seed:
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": "demo",
                                                            "labels": {"team": "a"}}})
        for i in range(3):
            sim.ok("POST", "/api/v1/namespaces/demo/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i},
                "data": {"k": "v%d" % i}})
    return sim


def server(t, sim, sid):
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                    "--server-id", sid, "--journal", t.path("journal-%s.db" % sid),
                    "--retry-period", "200ms", "--gc-period", "1h"], name="server-" + sid)


def wait_phase(sim, path, phases, timeout=30, srv=None):
    def done():
        if srv is not None and not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-2000:])
        st, o, _ = sim.get(path)
        return o if st == 200 and o.get("status", {}).get("phase") in phases else None
    return wait_for(done, timeout, "%s in %s" % (path, phases), interval=0.1)


def tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            st = os.stat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def source_backup(t, store):
    """Backup b1 of namespace demo, made in a first cluster into store."""
    src = cluster(t, "source", store, period="0", seed=True)
    s1 = server(t, src, "s1")
    src.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "b1", "labels": {"app": "demo"}},
                        "spec": {"includedNamespaces": ["demo"], "ttl": "240h"}})
    b1 = wait_phase(src, BK + "/b1", ("Completed",), srv=s1)
    s1.stop()
    return b1


@case
def sync_into_a_second_cluster_and_restore(t):
    store = t.mkdir("store")
    b1 = source_backup(t, store)
    # The engine does not write volume plugin objects yet: put one where
    # Velero's layout keeps them, as a backup with a volume would.
    vpbs = [{"apiVersion": "cairn.io/v1", "kind": "VolumePluginBackup",
             "metadata": {"name": "b1-data", "namespace": NS, "uid": "x",
                          "labels": {"cairn.io/backup-name": "b1",
                                     "cairn.io/volume-name": "data"}},
             "spec": {"volume": "data", "backup": "b1", "provider": "hostpath"},
             "status": {"phase": "Completed", "progress": {"totalBytes": 10, "bytesDone": 10}}}]
    with gzip.open(os.path.join(store, "backups", "b1", "b1-volumepluginbackups.json.gz"),
                   "wt") as f:
        json.dump(vpbs, f)

    before = tree(store)
    dst = cluster(t, "target", store, access="ReadOnly")
    s2 = server(t, dst, "s2")
    synced = wait_phase(dst, BK + "/b1", ("Completed",), srv=s2)
    t.eq(synced["metadata"]["labels"].get("cairn.io/synced"), "true", "synced label")
    t.eq(synced["metadata"]["labels"].get("app"), "demo", "labels kept")
    t.eq(synced["spec"]["storageLocation"], "default", "storage location")
    t.eq(synced["spec"]["includedNamespaces"], ["demo"], "spec kept")
    for k in ("phase", "startTimestamp", "completionTimestamp", "expiration", "progress"):
        t.eq(synced["status"].get(k), b1["status"].get(k), "status.%s preserved" % k)
    t.check(synced["metadata"]["uid"] != b1["metadata"]["uid"], "a new object")
    vpb = wait_for(lambda: dst.get(VPB + "/b1-data")[1] if dst.get(VPB + "/b1-data")[0] == 200
                   else None, 10, "VolumePluginBackup synced")
    t.eq(vpb["status"]["progress"], {"totalBytes": 10, "bytesDone": 10}, "VPB status")
    bsl = wait_for(lambda: dst.get(BSL + "/default")[1].get("status", {}).get("lastSyncedTime")
                   and dst.get(BSL + "/default")[1], 10, "lastSyncedTime")
    t.eq(bsl["status"]["phase"], "Available", "location phase")
    t.eq(tree(store), before, "a ReadOnly location was written to")
    # Deleting the synced Backup from a ReadOnly location keeps the files,
    # so the next sync brings it back.
    dst.delete(BK + "/b1")
    def resynced():
        st, b, _ = dst.get(BK + "/b1")
        return (st == 200 and b["metadata"]["uid"] != synced["metadata"]["uid"] and
                b.get("status", {}).get("phase") == "Completed")
    wait_for(resynced, 20, "backup synced again after delete")
    t.eq(tree(store), before, "files after deleting from a ReadOnly location")

    # A restore from the synced backup in the second cluster.
    if not os.access(RUNNER, os.X_OK):
        raise CheckFailed("%s is not built" % RUNNER)
    t.spawn([RUNNER, "--kubeconfig", dst.kubeconfig, "--namespace", NS, "--journal",
             t.path("restore-journal.db"), "--server-id", "r1", "--period-ms", "100"],
            name="restore-runner")
    dst.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "r1"}, "spec": {"backupName": "b1"}})
    r = wait_phase(dst, RS + "/r1", ("Completed", "PartiallyFailed", "Failed",
                                     "FailedValidation"), timeout=60)
    t.eq(r["status"]["phase"], "Completed", "restore phase (%s)" % r.get("status"))
    for i in range(3):
        st, cm, _ = dst.get("/api/v1/namespaces/demo/configmaps/c%d" % i)
        t.eq(st, 200, "restored configmap c%d" % i)
        t.eq(cm["data"], {"k": "v%d" % i}, "restored data")


@case
def synced_backup_is_never_run(t):
    """A synced Backup is created first and given its stored status next:
    in between it has no phase. No server may take it for a new backup
    (that would write over the stored one), and one left without its
    status (a failed write) gets it on the next sync. Nothing at all is
    written to a ReadOnly location: a new backup to it fails validation."""
    store = t.mkdir("store")
    b1 = source_backup(t, store)
    before = tree(store)
    dst = cluster(t, "target", store, access="ReadOnly", period="1s")
    # As a sync whose status write was lost leaves it.
    dst.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "b1", "labels": {"cairn.io/synced": "true"}},
                        "spec": {"includedNamespaces": ["demo"],
                                 "storageLocation": "default"}})
    s2 = server(t, dst, "s2")
    fixed = wait_phase(dst, BK + "/b1", ("Completed",), srv=s2)
    for k in ("startTimestamp", "completionTimestamp", "progress"):
        t.eq(fixed["status"].get(k), b1["status"].get(k), "status.%s from storage" % k)
    t.check(fixed["status"].get("claim") == b1["status"].get("claim"),
            "claimed in the target cluster: %s" % fixed["status"].get("claim"))
    dst.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "b2"}, "spec": {"includedNamespaces": ["demo"]}})
    b2 = wait_phase(dst, BK + "/b2", ("FailedValidation", "Completed", "Failed"), srv=s2)
    t.eq(b2["status"]["phase"], "FailedValidation", "backup to a ReadOnly location")
    t.check(any("read-only" in e for e in b2["status"].get("validationErrors", [])),
            "validation says why: %s" % b2["status"].get("validationErrors"))
    t.check("backup %s/b1: claimed" % NS not in s2.output(), "b1 claimed by s2")
    t.eq(tree(store), before, "a ReadOnly location was written to")


@case
def fs_location_unavailable_and_back(t):
    store = t.mkdir("store")
    sim = cluster(t, "k", store, period="0")
    server(t, sim, "s1")
    wait_phase(sim, BSL + "/default", ("Available",))
    shutil.rmtree(store)
    with open(store, "w") as f:
        f.write("not a directory")
    bsl = wait_phase(sim, BSL + "/default", ("Unavailable",))
    t.check(store in bsl["status"].get("message", ""), "message names the path: %s" % bsl["status"])
    t.check(bsl["status"].get("lastValidationTime"), "lastValidationTime")
    os.unlink(store)
    os.mkdir(store)
    bsl = wait_phase(sim, BSL + "/default", ("Available",))
    t.check("message" not in bsl["status"], "message cleared: %s" % bsl["status"])


@case
def s3_location_unavailable_and_back(t):
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    sim = t.kubesim()
    sim.install_crds(NS)
    with open(s3.creds_file, "rb") as f:
        sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"},
            "data": {"cloud": base64.b64encode(f.read()).decode()}})
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "s3", "objectStorage": {"bucket": "cairn"},
                                  "config": {"endpoint": proxy.endpoint, "region": "us-east-1",
                                             "forcePathStyle": "true"},
                                  "credential": {"name": "s3", "key": "cloud"},
                                  "default": True, "validationFrequency": "1s",
                                  "backupSyncPeriod": "0"}})
    srv = server(t, sim, "s1")
    wait_phase(sim, BSL + "/default", ("Available",), srv=srv)
    s3.proc.stop()
    bsl = wait_phase(sim, BSL + "/default", ("Unavailable",), timeout=40, srv=srv)
    t.check(bsl["status"].get("message"), "a message says why: %s" % bsl["status"])
    # A backup to the unavailable location fails with the reason.
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "while-down"}, "spec": {"includedNamespaces": ["x"]}})
    b = wait_phase(sim, BK + "/while-down", ("Failed",), timeout=60, srv=srv)
    t.check("unreachable" in b["status"].get("failureReason", ""),
            "failure reason: %s" % b["status"].get("failureReason"))
    # s3rver back on the same data; the proxy keeps the endpoint.
    os.unlink(os.path.join(s3.dir, "ready"))
    s3b = S3rver(t)
    proxy.upstream_port = s3b.port
    bsl = wait_phase(sim, BSL + "/default", ("Available",), timeout=40, srv=srv)
    t.check("message" not in bsl["status"], "message cleared")


main()
