"""A full journal disk (issue 19): the server says so and waits.

The server's journal lives on a small tmpfs of its own (a private mount
namespace made with unshare(1), so nothing is left mounted if the test
dies); the test fills that filesystem through /proc/<pid>/root. While the
journal cannot be written: the Backup claimed meanwhile says so in
status.conditions[JournalWritable], /readyz is 503 naming the journal, and
a Backup created meanwhile stays New (nothing new is claimed). Once space
is back, both complete.
"""
import errno
import os
import shutil
import subprocess

from cairntest import BIN, case, main, wait_for, free_port, CheckFailed
from webcheck import get

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def can_mount(t):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    d = t.mkdir("probe-mnt")
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs '%s'" % d],
                       capture_output=True)
    return r.returncode == 0


def fill(path):
    """Write zeros to path until the filesystem is full."""
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


def cond(b, typ):
    for c in b.get("status", {}).get("conditions", []):
        if c.get("type") == typ:
            return c
    return None


@case
def journal_disk_full_waits_and_says_so(t):
    if not can_mount(t):
        t.skip("cannot mount a tmpfs here (needs root and mount namespaces)")
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": t.mkdir("store")}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 200}}, 300,
             name="cm-{i:04d}", namespace="bulk")
    jdir = t.mkdir("jfs")
    port = free_port()
    cmd = ("mount -t tmpfs -o size=4m tmpfs '%s' && exec '%s' server --kubeconfig '%s' "
           "--namespace %s --server-id s1 --journal '%s/journal.db' --retry-period 200ms "
           "--part-size 16384 --listen 127.0.0.1:%d --log-level info" %
           (jdir, BIN, sim.kubeconfig, NS, jdir, port))
    srv = t.spawn(["unshare", "-m", "sh", "-c", cmd], name="server")

    def ready():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-2000:])
        try:
            return get(port, "/readyz", timeout=2)[0] == 200
        except OSError:
            return False
    wait_for(ready, 30, "/readyz 200")
    # the server's own view of its journal directory: the tmpfs
    filler = "/proc/%d/root%s/filler" % (srv.pid, jdir)
    fill(filler)
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "first", "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})

    def said():
        b = sim.ok("GET", "%s/first" % BK)
        c = cond(b, "JournalWritable")
        return b if c is not None and c["status"] == "False" else None
    b = wait_for(said, 60, "the Backup to say the journal is unwritable", interval=0.2)
    c = cond(b, "JournalWritable")
    t.check("cannot write its journal" in c["message"], "message: %s" % c["message"])
    t.eq(c["reason"], "JournalUnwritable", "reason")
    t.check(b["status"]["phase"] in ("InProgress", "New"), "phase %s" % b["status"].get("phase"))
    status, _, body = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(get(port, "/readyz")),
                               30, "/readyz 503 while the journal is full")
    t.check(b"journal" in body, "readyz body: %r" % body[:300])
    # nothing new is claimed meanwhile
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "second", "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})
    import time
    time.sleep(3)
    b2 = sim.ok("GET", "%s/second" % BK)
    t.check(b2.get("status", {}).get("phase", "New") in ("", "New"),
            "claimed while the journal is full: %s" % b2.get("status"))
    t.eq(sim.ok("GET", "%s/first" % BK)["status"].get("phase"), b["status"]["phase"],
         "first backup's phase meanwhile")
    # space again: both complete, readiness back
    os.unlink(filler)
    for name in ("first", "second"):
        fb = wait_for(lambda: (lambda x: x if x.get("status", {}).get("phase") in FINAL else None)(
            sim.ok("GET", "%s/%s" % (BK, name))), 90, "backup %s to finish" % name, interval=0.2)
        t.eq(fb["status"]["phase"], "Completed", "%s phase (%s)" % (name, fb["status"].get("failureReason")))
    fb = sim.ok("GET", "%s/first" % BK)
    t.eq(cond(fb, "JournalWritable")["status"], "True", "JournalWritable after recovery")
    wait_for(ready, 30, "/readyz 200 again")
    t.check("taking work again" in srv.output(), "recovery not logged")


@case
def journal_disk_full_during_a_restore_says_so(t):
    """The issue's case: a Restore running when the journal's disk fills
    shows it in its status and completes once there is room again."""
    if not can_mount(t):
        t.skip("cannot mount a tmpfs here (needs root and mount namespaces)")
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": t.mkdir("store")}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 200}}, 400,
             name="cm-{i:04d}", namespace="bulk")
    jdir = t.mkdir("jfs")
    cmd = ("mount -t tmpfs -o size=4m tmpfs '%s' && exec '%s' server --kubeconfig '%s' "
           "--namespace %s --server-id s1 --journal '%s/journal.db' --retry-period 200ms "
           "--restore-workers 2 --log-level info" % (jdir, BIN, sim.kubeconfig, NS, jdir))
    srv = t.spawn(["unshare", "-m", "sh", "-c", cmd], name="server")
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "src", "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})
    b = wait_for(lambda: (lambda x: x if x.get("status", {}).get("phase") in FINAL else None)(
        sim.ok("GET", "%s/src" % BK)), 60, "the backup", interval=0.2)
    t.eq(b["status"]["phase"], "Completed", "backup")
    # slow creates: the restore is still running when the disk fills
    sim.faults({"method": "POST", "path": "/namespaces/copy/configmaps$", "delay": 0.1,
                "count": 100000})
    RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "r1", "namespace": NS},
                        "spec": {"backupName": "src", "includedNamespaces": ["bulk"],
                                 "namespaceMapping": {"bulk": "copy"}}})
    wait_for(lambda: sim.ok("GET", "%s/r1" % RS).get("status", {}).get("phase") == "InProgress",
             30, "the restore to start", interval=0.1)
    filler = "/proc/%d/root%s/filler" % (srv.pid, jdir)
    fill(filler)

    def said():
        r = sim.ok("GET", "%s/r1" % RS)
        c = cond(r, "JournalWritable")
        return r if c is not None and c["status"] == "False" else None
    r = wait_for(said, 60, "the Restore to say the journal is unwritable", interval=0.2)
    t.check(r["status"]["phase"] == "InProgress", "phase %s" % r["status"].get("phase"))
    os.unlink(filler)
    sim.clear_faults()
    r = wait_for(lambda: (lambda x: x if x.get("status", {}).get("phase") in FINAL else None)(
        sim.ok("GET", "%s/r1" % RS)), 90, "the restore to finish", interval=0.2)
    t.eq(r["status"]["phase"], "Completed", "restore (%s)" % r["status"].get("failureReason"))
    got = sim.ok("GET", "/api/v1/namespaces/copy/configmaps")["items"]
    t.eq(len([o for o in got if o["metadata"]["name"].startswith("cm-")]), 400, "restored")


main()
