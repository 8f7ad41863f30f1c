"""Backups through S3 faults (issue 19): at 15% injected faults (503
SlowDown, 500, connection resets before and after the server did the work,
errors inside 200 replies) every backup completes whole; a backup that
fails for good leaves no multipart upload behind.

The fault proxy (tests/lib/faultproxy.py) sits between `cairn server` and
s3rver.
"""
import os
import subprocess
import tarfile

from bkworld import World
from cairntest import case, main, wait_for
from faultproxy import FaultProxy
from s3rver import S3rver


def seed_bulk(w, n=1800):
    """n ConfigMaps of ~5 KB random text in namespace bulk: about 2.5 KB of
    gzip each, so parts of a few hundred KiB give several parts."""
    w.namespace("bulk")
    for c in range(0, n, 300):
        w.sim.ok("POST", "/_sim/bulk", {"items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cm-%06d" % i, "namespace": "bulk"},
             "data": {"payload": os.urandom(2600).hex()}} for i in range(c, min(n, c + 300))]})


def uploads_left(s3):
    """Multipart uploads s3rver still holds (its upload directories)."""
    left = []
    for d, dirs, files in os.walk(os.path.join(s3.dir, "data")):
        if os.path.basename(os.path.dirname(d)) == "uploads" and "key" in files:
            left.append(d)
    return left


@case
def backups_complete_through_s3_faults(t):
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0.15, seed=1919,
                       kinds=("slowdown", "500", "reset", "reset_reply", "error200"))
    w = World(t)
    w.s3_location(s3, endpoint=proxy.endpoint)
    seed_bulk(w)
    srv = w.server(part_size=256 << 10)
    names = ["f%d" % i for i in range(6)]
    for n in names:
        w.create_backup(n, {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]})
    for n in names:
        b = w.wait_backup(n, srv=srv, timeout=240)
        t.eq(b["status"]["phase"], "Completed", "backup %s (%s)" % (n, b["status"].get("failureReason")))
        t.check(len(b["status"]["checkpoint"]["parts"]) >= 3, "several parts: %s" %
                b["status"]["checkpoint"]["parts"])
        dst = t.path(n + ".tar.gz")
        s3.storage_tool("get", "pfx/backups/%s/%s.tar.gz" % (n, n), dst)
        r = subprocess.run(["tar", "tzf", dst], capture_output=True, text=True)
        t.eq(r.returncode, 0, "GNU tar reads %s: %s" % (n, r.stderr))
        with tarfile.open(dst) as tf:
            cms = [m for m in tf.getnames() if m.startswith("resources/configmaps/namespaces/bulk/")]
        t.eq(len(cms), 1800, "every ConfigMap of %s once" % n)
    print("# faults injected: %s" % proxy.counts)
    t.check(proxy.faults() >= 10, "too few faults to mean anything: %s" % proxy.counts)
    for kind in ("slowdown", "500", "reset", "reset_reply"):
        t.check(proxy.counts[kind] > 0, "no %s fault was injected: %s" % (kind, proxy.counts))
    t.eq(uploads_left(s3), [], "multipart uploads left behind")


@case
def failed_backup_aborts_its_upload(t):
    """Part 2 is refused every time: the backup fails after part 1 was
    stored, and its upload (with part 1) is aborted, not left to be billed."""
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    proxy.rule("500", method="PUT", query="partNumber=2&", times=None)
    w = World(t)
    w.s3_location(s3, endpoint=proxy.endpoint)
    seed_bulk(w, 900)
    srv = w.server(part_size=1 << 20)
    w.create_backup("doomed", {"includedNamespaces": ["bulk"]})
    b = w.wait_backup("doomed", srv=srv, timeout=120)
    t.eq(b["status"]["phase"], "Failed", "phase")
    t.check("part 2" in b["status"].get("failureReason", "") and "InternalError" in
            b["status"].get("failureReason", ""), "reason: %s" % b["status"].get("failureReason"))
    t.check([q for q in proxy.requests if q["method"] == "PUT" and "partNumber=1&" in q["query"]
             and q["status"] == 200], "part 1 was stored first")
    # the abort follows the Failed status (bk_fail), which the watch may
    # deliver first
    def aborts():
        return [q for q in proxy.requests if q["method"] == "DELETE" and "uploadId=" in q["query"]]
    wait_for(aborts, 10, "the AbortMultipartUpload")
    t.eq(len(aborts()), 1, "one AbortMultipartUpload")
    t.eq(uploads_left(s3), [], "multipart uploads left behind")


main()
