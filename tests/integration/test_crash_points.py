"""Crashes at exact points of a backup's finish (issue 19).

A server is made to die (SIGKILL to itself, exactly a kill -9) at a named
point through $CAIRN_FAULT (base/fault.h); then a restart with the same
journal, or another server after the Lease expired, must finish the
backup from there: the tarball the dead owner completed is recognised,
the metadata files are written and the phase is Completed.
"""
import base64
import gzip
import json
import os
import subprocess
import tarfile
import time

from cairntest import BIN, case, main, wait_for, CheckFailed

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
TIMINGS = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"]
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
META = ("velero-backup.json", "%s-logs.gz", "%s-resource-list.json.gz", "%s-results.gz")


def setup(t, bsl):
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS}, "spec": bsl})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "bulk"}})
    return sim


def fill(sim, n, size):
    """n ConfigMaps of `size` random bytes (hex) each in namespace bulk."""
    for c in range(0, n, 250):
        sim.ok("POST", "/_sim/bulk", {"items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cm-%06d" % i, "namespace": "bulk"},
             "data": {"payload": os.urandom(size).hex()}} for i in range(c, min(n, c + 250))]})


def server(t, sim, sid, journal, part_size, env=None):
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                    "--server-id", sid, "--journal", journal, "--part-size", str(part_size),
                    "--log-level", "info"] + TIMINGS, name="server-" + sid, env=env)


def get_backup(sim, name):
    return sim.ok("GET", "%s/%s" % (BK, name))


def wait_final(sim, name, srv, timeout=90):
    def done():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        b = get_backup(sim, name)
        return b if b.get("status", {}).get("phase") in FINAL else None
    return wait_for(done, timeout, "backup %s to finish" % name, interval=0.1)


def crash_at(t, sim, point, name, journal, part_size):
    """Start a server that dies at `point`, create the backup, wait for the death."""
    srv = server(t, sim, "s1", journal, part_size, env={"CAIRN_FAULT": point})
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name, "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})
    wait_for(lambda: not srv.alive(), 120, "the server to die at " + point, interval=0.05)
    t.check("fault point %s" % point.split("@")[0] in srv.output(),
            "died elsewhere: %s" % srv.output()[-2000:])
    b = get_backup(sim, name)
    t.eq(b["status"]["phase"], "InProgress", "phase after the crash")
    return b


def check_done(t, b, tarball, n, meta_dir=None):
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("failureReason"))
    r = subprocess.run(["tar", "tzf", tarball], capture_output=True, text=True)
    t.eq(r.returncode, 0, "GNU tar reads the tarball: %s" % r.stderr[-300:])
    with tarfile.open(tarball, "r:gz") as tf:
        names = tf.getnames()
    t.eq(names, r.stdout.split(), "GNU tar and tarfile agree")
    cms = [x for x in names if x.startswith("resources/configmaps/namespaces/bulk/cm-")]
    t.eq(len(cms), n, "ConfigMaps in the tarball")
    t.eq(len(set(names)), len(names), "every entry once")
    if meta_dir is not None:
        for f in META:
            f = f % b["metadata"]["name"] if "%s" in f else f
            t.check(os.path.exists(os.path.join(meta_dir, f)), "%s missing" % f)
        with open(os.path.join(meta_dir, "velero-backup.json")) as f:
            t.eq(json.load(f)["status"]["phase"], "Completed", "velero-backup.json phase")


def fs_setup(t):
    root = t.mkdir("store")
    sim = setup(t, {"provider": "fs", "objectStorage": {"bucket": "bk"},
                    "config": {"path": root}, "default": True})
    return root, sim


def bdir(root, name):
    return os.path.join(root, "backups", name)


@case
def crash_after_complete_restart_fs(t):
    """Killed between joining the parts and Completed; restarted with its journal."""
    root, sim = fs_setup(t)
    fill(sim, 1500, 200)
    journal = t.path("journal.db")
    b = crash_at(t, sim, "backup.after-complete", "fin", journal, 65536)
    t.check(len(b["status"]["checkpoint"]["parts"]) >= 3, "several parts")
    t.check(os.path.exists(os.path.join(bdir(root, "fin"), "fin.tar.gz")), "tarball complete")
    t.check(not os.path.exists(os.path.join(bdir(root, "fin"), "velero-backup.json")),
            "no velero-backup.json yet")
    srv = server(t, sim, "s1", journal, 65536)
    b = wait_final(sim, "fin", srv)
    check_done(t, b, os.path.join(bdir(root, "fin"), "fin.tar.gz"), 1500, bdir(root, "fin"))
    out = srv.output()
    t.check("starting the tarball again" not in out, "the tarball was started again")
    t.check("finishing from there" in out, "the completed upload was not recognised")


@case
def errors_before_a_crash_stay_in_the_results(t):
    """An error recorded before a crash (a list refused, ahead of the parts
    the next owner keeps) is in the resumed backup's results: phase
    PartiallyFailed, errors 1, its message once in <name>-results.gz."""
    root, sim = fs_setup(t)
    for c in range(0, 1500, 250):
        sim.ok("POST", "/_sim/bulk", {"items": [
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": "s-%06d" % i, "namespace": "bulk"},
             "data": {"k": base64.b64encode(os.urandom(200)).decode()}}
            for i in range(c, min(1500, c + 250))]})
    # ConfigMaps are walked before Secrets: their list fails for good
    sim.faults({"method": "GET", "path": "^/api/v1/namespaces/bulk/configmaps$", "status": 403})
    crash_at(t, sim, "backup.after-part@2", "err", t.path("j1.db"), 65536)
    srv = server(t, sim, "s2", t.path("j2.db"), 65536)     # a takeover: state from status
    b = wait_final(sim, "err", srv)
    st = b["status"]
    t.eq((st["phase"], st.get("errors"), st["claim"]["attempt"]), ("PartiallyFailed", 1, 2),
         "phase, errors, attempt (%s)" % st.get("failureReason"))
    t.check("resuming after part" in srv.output(), "the takeover kept the parts")
    with gzip.open(os.path.join(bdir(root, "err"), "err-results.gz"), "rt") as f:
        results = f.read()
    t.eq(results.count("error listing configmaps"), 1, "the refused list once in the results: %s" % results)


@case
def crash_after_complete_takeover_s3(t):
    """Killed after CompleteMultipartUpload; another server takes over."""
    try:
        from s3rver import S3rver
    except ImportError:
        t.skip("tests/lib/s3rver.py missing")
    import base64
    s3 = S3rver(t)
    sim = setup(t, {"provider": "s3", "objectStorage": {"bucket": "cairn"},
                    "credential": {"name": "s3-creds", "key": "cloud"},
                    "config": {"endpoint": s3.endpoint, "region": "us-east-1",
                               "s3ForcePathStyle": "true"}, "default": True})
    with open(s3.creds_file, "rb") as f:
        sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds"},
            "data": {"cloud": base64.b64encode(f.read()).decode()}})
    fill(sim, 2500, 2700)      # ~7 MB of gzip: two parts of 5 MiB
    b = crash_at(t, sim, "backup.after-complete", "s3fin", t.path("j1.db"), 5 << 20)
    t.check(len(b["status"]["checkpoint"]["parts"]) >= 2, "several parts")
    srv = server(t, sim, "s2", t.path("j2.db"), 5 << 20)
    b = wait_final(sim, "s3fin", srv)
    t.eq(b["status"]["claim"]["holder"], "s2", "taken over")
    d = t.mkdir("got")
    for f in META:
        f = f % "s3fin" if "%s" in f else f
        s3.aws("s3", "cp", "s3://cairn/backups/s3fin/" + f, os.path.join(d, f))
    s3.aws("s3", "cp", "s3://cairn/backups/s3fin/s3fin.tar.gz", os.path.join(d, "s3fin.tar.gz"))
    check_done(t, b, os.path.join(d, "s3fin.tar.gz"), 2500, d)
    t.check("finishing from there" in srv.output(), "the completed upload was not recognised")


@case
def crash_after_complete_tarball_lost_restarts(t):
    """The completed tarball vanished before the restart: the tarball starts
    again, its journal's old parts cleared (was: UNIQUE constraint failed)."""
    root, sim = fs_setup(t)
    fill(sim, 1000, 200)
    journal = t.path("journal.db")
    crash_at(t, sim, "backup.after-complete", "lost", journal, 65536)
    os.unlink(os.path.join(bdir(root, "lost"), "lost.tar.gz"))
    srv = server(t, sim, "s1", journal, 65536)
    b = wait_final(sim, "lost", srv)
    check_done(t, b, os.path.join(bdir(root, "lost"), "lost.tar.gz"), 1000, bdir(root, "lost"))
    t.check("starting the tarball again" in srv.output(), "the restart did not start again")


@case
def crash_after_metadata_restart(t):
    """Killed after the metadata files, before Completed: finished on restart."""
    root, sim = fs_setup(t)
    fill(sim, 500, 200)
    journal = t.path("journal.db")
    crash_at(t, sim, "backup.after-metadata", "meta", journal, 65536)
    srv = server(t, sim, "s1", journal, 65536)
    b = wait_final(sim, "meta", srv)
    check_done(t, b, os.path.join(bdir(root, "meta"), "meta.tar.gz"), 500, bdir(root, "meta"))


@case
def late_complete_of_stalled_owner(t):
    """docs/protocol.md "Writes in flight": the old owner stalls with its
    CompleteMultipartUpload in flight, another server takes over and lists
    the parts, then the complete lands: the new owner recognises the
    tarball instead of failing on the vanished upload."""
    root, sim = fs_setup(t)
    fill(sim, 1000, 200)
    s1 = server(t, sim, "s1", t.path("j1.db"), 65536,
                env={"CAIRN_FAULT": "backup.before-complete:stop"})
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "late", "namespace": NS},
                        "spec": {"includedNamespaces": ["bulk"]}})
    wait_for(lambda: "fault point backup.before-complete" in s1.output(), 60,
             "the owner to stall before its complete")
    tarball = os.path.join(bdir(root, "late"), "late.tar.gz")
    t.check(not os.path.exists(tarball), "completed before the stall")
    # the new owner's lists are slow: the late complete lands mid-resume
    sim.faults({"method": "GET", "query": "limit=", "delay": 1.5})
    s2 = server(t, sim, "s2", t.path("j2.db"), 65536)
    wait_for(lambda: "resuming after part" in s2.output(), 60, "the takeover to resume")
    s1.signal(18)      # SIGCONT: the complete in flight lands now
    wait_for(lambda: os.path.exists(tarball), 30, "the late complete")
    sim.clear_faults()
    b = wait_final(sim, "late", s2)
    check_done(t, b, tarball, 1000, bdir(root, "late"))
    t.eq(b["status"]["claim"]["holder"], "s2", "holder")
    t.check("completed meanwhile" in s2.output(), "the late complete was not recognised")
    wait_for(lambda: "claim lost" in s1.output() or "fenced" in s1.output(), 30,
             "the old owner to stand down")


main()
