"""A local store whose filesystem turns read-only for a while (issue 19).

The server runs in a private mount namespace (unshare(1)) where the store
directory is a bind mount of itself; the test remounts that bind mount
read-only and back (nsenter(1)), which is what a filesystem remounted
read-only after an error, or an NFS export flipped for maintenance, looks
like: every write fails with EROFS. Writes wait for it with backoff up to
the location's config.readOnlyWait (storage/store_fs.c):

- read-only before the backup starts, writable again while it waits: the
  backup ends Completed and its tarball is whole (GNU tar reads it);
- read-only for longer than readOnlyWait: the backup ends Failed, and the
  reason says the filesystem stayed read-only and for how long;
- SIGTERM while a write waits: the server stops when its shutdown grace is
  over instead of holding the shutdown for the wait, and leaves the backup
  InProgress for the next owner (not Failed).

Needs root and mount namespaces; skipped elsewhere.
"""
import os
import shutil
import signal
import subprocess
import tarfile

from cairntest import BIN, CheckFailed, case, main, wait_for

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def can_mount(t):
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    d = t.mkdir("probe-mnt")
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind '%s' '%s'" % (d, d)],
                       capture_output=True)
    return r.returncode == 0


def world(t, config, extra=""):
    if not can_mount(t):
        t.skip("cannot bind-mount here (needs root and mount namespaces)")
    sim = t.kubesim()
    sim.install_crds(NS)
    store = t.mkdir("store")
    config = dict(config, path=store)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": config, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 200}}, 200,
             name="cm-{i:04d}", namespace="bulk")
    cmd = ("mount --bind '%s' '%s' && exec '%s' server --kubeconfig '%s' --namespace %s "
           "--server-id s1 --journal '%s' --retry-period 200ms --part-size 16384 "
           "--log-level info %s" % (store, store, BIN, sim.kubeconfig, NS, t.path("j.db"), extra))
    srv = t.spawn(["unshare", "-m", "sh", "-c", cmd], name="server")
    # the shell execs cairn only after the bind mount is in place
    wait_for(lambda: os.path.realpath("/proc/%d/exe" % srv.pid) == os.path.realpath(BIN),
             20, "the server to start in its mount namespace")
    return sim, store, srv


def remount(t, srv, store, mode):
    r = subprocess.run(["nsenter", "-t", str(srv.pid), "-m", "mount", "-o",
                        "remount,bind,%s" % mode, store], capture_output=True, text=True)
    t.eq(r.returncode, 0, "remount %s: %s" % (mode, r.stderr))


def start_backup(sim, name):
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name, "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})


def final(sim, name, timeout):
    def done():
        b = sim.ok("GET", "%s/%s" % (BK, name))
        return b if b.get("status", {}).get("phase") in FINAL else None
    return wait_for(done, timeout, "backup %s to finish" % name, interval=0.2)


@case
def readonly_store_backup_waits_and_completes(t):
    sim, store, srv = world(t, {})
    remount(t, srv, store, "ro")
    start_backup(sim, "b1")
    # the backup reached the store and waits for it (not a fixed sleep)
    wait_for(lambda: "the filesystem is read-only; waiting up to 2m" in srv.output(), 60,
             "the server to wait for the read-only store")
    t.check(sim.ok("GET", "%s/b1" % BK).get("status", {}).get("phase") not in FINAL,
            "the backup ended while the store was read-only")
    remount(t, srv, store, "rw")
    b = final(sim, "b1", 120)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("failureReason"))
    tgz = os.path.join(store, "backups", "b1", "b1.tar.gz")
    r = subprocess.run(["tar", "tzf", tgz], capture_output=True, text=True)
    t.eq(r.returncode, 0, "GNU tar reads the tarball: %s" % r.stderr[-300:])
    with tarfile.open(tgz, "r:gz") as tf:
        names = [n for n in tf.getnames()
                 if n.startswith("resources/configmaps/namespaces/bulk/")]
    t.eq(len(names), 200, "ConfigMaps in the tarball")
    t.check("writable again after" in srv.output(), "the server says the store came back")


@case
def readonly_store_past_the_bound_fails_clearly(t):
    sim, store, srv = world(t, {"readOnlyWait": "2s"})
    remount(t, srv, store, "ro")
    start_backup(sim, "b1")
    b = final(sim, "b1", 60)
    why = b["status"].get("failureReason", "")
    t.eq(b["status"]["phase"], "Failed", "phase (%s)" % why)
    for want in ("stayed read-only for", "config.readOnlyWait, 2s", "Read-only file system"):
        t.check(want in why, "failureReason names %r: %s" % (want, why))
    # writable again: the next backup completes
    remount(t, srv, store, "rw")
    start_backup(sim, "b2")
    b = final(sim, "b2", 120)
    t.eq(b["status"]["phase"], "Completed", "next backup (%s)" % b["status"].get("failureReason"))


@case
def sigterm_ends_the_readonly_wait(t):
    sim, store, srv = world(t, {"readOnlyWait": "10m"}, "--shutdown-grace 2s")
    remount(t, srv, store, "ro")
    start_backup(sim, "b1")
    wait_for(lambda: "the filesystem is read-only; waiting up to 10m" in srv.output(), 60,
             "the server to wait for the read-only store")
    srv.signal(signal.SIGTERM)
    try:
        rc = srv.wait(30)
    except subprocess.TimeoutExpired:
        raise CheckFailed("the server still waits for the store 30 s after SIGTERM: %s" %
                          srv.output()[-1500:])
    t.eq(rc, 0, "exit code after SIGTERM")
    b = sim.ok("GET", "%s/b1" % BK)
    t.eq(b.get("status", {}).get("phase"), "InProgress",
         "left for the next owner (%s)" % b.get("status", {}).get("failureReason"))


main()
