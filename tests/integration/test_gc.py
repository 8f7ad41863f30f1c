"""Retention and deletion: cairn server's GC and cleanup finalizer, fs storage.

- a Backup whose TTL ran out is removed from storage and from the cluster
  (with --gc-period 1s), a live one is not;
- deleting a Backup object (as kubectl delete does) removes every key under
  backups/<name>/ before the object goes (the finalizer holds it), and a
  Restore of that backup is left alone;
- a ReadOnly location keeps its files: the object is released, storage
  untouched.
"""
import os
import time

from cairntest import BIN, case, main, wait_for, cairn, CheckFailed

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FIN = "cairn.io/backup-cleanup"


def setup(t, access="ReadWrite"):
    sim = t.kubesim()
    sim.install_crds(NS)
    store = t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": store}, "default": True,
                                  "accessMode": access, "backupSyncPeriod": "0"}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "demo"}})
    for i in range(3):
        sim.ok("POST", "/api/v1/namespaces/demo/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i},
            "data": {"a": "b"}})
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "s1", "--journal", t.path("journal.db"),
                   "--retry-period", "200ms", "--gc-period", "1s"], name="server")
    return sim, store, srv


def backup(sim, srv, name, ttl):
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name},
                        "spec": {"includedNamespaces": ["demo"], "ttl": ttl}})

    def done():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-2000:])
        b = sim.get(BK + "/" + name)[1]
        return b if b.get("status", {}).get("phase") == "Completed" else None
    return wait_for(done, 30, "backup %s completed" % name)


def keys(store, name):
    d = os.path.join(store, "backups", name)
    if not os.path.isdir(d):
        return []
    return sorted(os.listdir(d))


def gone(sim, name):
    return sim.get(BK + "/" + name)[0] == 404


@case
def expired_backups_are_removed(t):
    sim, store, srv = setup(t)
    b = backup(sim, srv, "short", "3s")
    backup(sim, srv, "long", "1h")
    t.check(b["status"].get("expiration"), "expiration set by the engine")
    t.check("short.tar.gz" in keys(store, "short") and "velero-backup.json" in keys(store, "short"),
            "files written: %s" % keys(store, "short"))
    wait_for(lambda: gone(sim, "short"), 20, "expired backup deleted")
    t.eq(keys(store, "short"), [], "expired backup's files")
    time.sleep(1.5)
    t.check(not gone(sim, "long"), "unexpired backup kept")
    t.check("long.tar.gz" in keys(store, "long"), "unexpired backup's files kept")
    # Storage went first: the delete of the object came after the last
    # file was gone (the finalizer held the object otherwise).
    t.check("expired at" in srv.output(), "GC logged the expiry")


@case
def deleting_a_backup_removes_its_files(t):
    sim, store, srv = setup(t)
    backup(sim, srv, "doomed", "1h")
    wait_for(lambda: FIN in sim.get(BK + "/doomed")[1]["metadata"].get("finalizers", []),
             10, "cleanup finalizer on the finished backup")
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "from-doomed"},
                        "spec": {"backupName": "doomed"}})
    n = len(keys(store, "doomed"))
    t.check(n >= 3, "files before delete: %d" % n)
    # kubectl delete, as a user would.
    sim.kubectl("delete", "backups.cairn.io", "doomed", "-n", NS, "--wait=false")
    wait_for(lambda: gone(sim, "doomed"), 20, "deleted backup released")
    t.eq(keys(store, "doomed"), [], "files of the deleted backup")
    t.eq(sim.get(RS + "/from-doomed")[0], 200, "restore of the deleted backup left alone")
    # The CLI's way ends the same: files gone, then the object.
    backup(sim, srv, "via-cli", "1h")
    wait_for(lambda: FIN in sim.get(BK + "/via-cli")[1]["metadata"].get("finalizers", []),
             10, "cleanup finalizer")
    r = cairn("backup", "delete", "via-cli", "--confirm", "--kubeconfig", sim.kubeconfig,
              "--namespace", NS)
    t.eq(r.returncode, 0, "cairn backup delete: %s" % r.stderr)
    wait_for(lambda: gone(sim, "via-cli"), 20, "backup deleted by the CLI released")
    t.eq(keys(store, "via-cli"), [], "files of the backup deleted by the CLI")


@case
def readonly_location_keeps_files(t):
    sim, store, srv = setup(t, access="ReadWrite")
    backup(sim, srv, "kept", "1h")
    wait_for(lambda: FIN in sim.get(BK + "/kept")[1]["metadata"].get("finalizers", []),
             10, "cleanup finalizer")
    sim.patch(BSL + "/default", {"spec": {"accessMode": "ReadOnly"}})
    before = keys(store, "kept")
    sim.delete(BK + "/kept")
    wait_for(lambda: gone(sim, "kept"), 20, "backup object released")
    t.eq(keys(store, "kept"), before, "files in a ReadOnly location")


main()
