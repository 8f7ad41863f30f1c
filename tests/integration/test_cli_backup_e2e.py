"""The backup CLI against the real thing: kubesim seeded with a small
application, a local-directory storage location, `cairn server`, and the
user's verbs from `backup create --wait` to `backup delete`."""
import json
import os
import subprocess
import tarfile

from cairntest import case, main, cairn, wait_for, BIN

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS


def setup(t):
    sim = t.kubesim()
    sim.install_crds(NS)
    root = t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default"},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk", "prefix": "site"},
                                  "config": {"path": root}, "default": True}})
    for ns in ("shop", "other"):
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})
        for i in range(30):
            sim.ok("POST", "/api/v1/namespaces/%s/configmaps" % ns, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm-%02d" % i, "labels": {"app": "web" if i % 2 else "db"}},
                "data": {"k": "v%d" % i}})
    return sim, root


def cli(sim, *args, **kw):
    return cairn(*(list(args) + ["--kubeconfig", sim.kubeconfig]), **kw)


@case
def create_wait_get_describe_logs_download_delete(t):
    sim, root = setup(t)
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "srv-e2e", "--journal", t.path("journal.db"),
                   "--retry-period", "200ms"], name="server")
    errf = t.path("wait.err")
    with open(errf, "wb") as ef, open(t.path("wait.out"), "wb") as of:
        p = subprocess.Popen([BIN, "backup", "create", "shop1", "--include-namespaces", "shop",
                              "-l", "app=web", "--wait", "--kubeconfig", sim.kubeconfig],
                             stdout=of, stderr=ef, stdin=subprocess.DEVNULL)
        t.on_cleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        # Fail fast (with the server's words) if the server dies.
        wait_for(lambda: p.poll() is not None or not srv.alive(), 120, "the backup to end")
        t.check(srv.alive(), "server exited: %s" % srv.output()[-2000:])
    with open(errf) as f, open(t.path("wait.out")) as g:
        r = subprocess.CompletedProcess(p.args, p.returncode, g.read(), f.read())
    t.eq(r.returncode, 0, "exit code of --wait (stderr %r, server %s)" % (r.stderr, srv.output()[-1500:]))
    t.check("backup shop1: Completed" in r.stderr, "final progress line: %r" % r.stderr)
    t.check("completed" in r.stdout, r.stdout)

    r = cli(sim, "backup", "get")
    t.eq(r.returncode, 0, "get")
    row = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("shop1 ")][0]
    t.eq(row[1], "Completed", "STATUS")
    t.eq(row[3], "srv-e2e", "HOLDER")
    obj = json.loads(cli(sim, "backup", "get", "shop1", "-o", "json").stdout)
    total = obj["status"]["progress"]["itemsBackedUp"]
    t.check(total >= 15, "at least the 15 matching ConfigMaps: %r" % obj["status"]["progress"])
    t.eq(row[2].split("/")[0], str(total), "ITEMS column")

    r = cli(sim, "backup", "describe", "shop1")
    t.eq(r.returncode, 0, "describe")
    for want in ("Phase:  Completed", "Holder:      srv-e2e", "Label selector:    app=web",
                 "site/backups/shop1/shop1.tar.gz"):
        t.check(want in r.stdout, "describe lacks %r:\n%s" % (want, r.stdout))

    r = cli(sim, "backup", "logs", "shop1")
    t.eq(r.returncode, 0, "logs: %r" % r.stderr)
    t.check(len(r.stdout.strip()) > 0, "the server's backup log is printed")

    r = cli(sim, "backup", "download", "shop1", cwd=t.dir)
    t.eq(r.returncode, 0, "download: %r" % r.stderr)
    with tarfile.open(t.path("shop1.tar.gz")) as tf:
        names = tf.getnames()
        t.eq(tf.extractfile("metadata/version").read(), b"1.1.0\n", "metadata/version")
    cms = sorted(n for n in names if n.startswith("resources/configmaps/namespaces/shop/"))
    t.eq(cms, ["resources/configmaps/namespaces/shop/cm-%02d.json" % i for i in range(1, 30, 2)],
         "the labelled ConfigMaps of shop, legacy path")
    t.check(subprocess.run(["tar", "tzf", t.path("shop1.tar.gz")], capture_output=True).returncode == 0,
            "GNU tar reads the download")

    stored = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
              if "/backups/shop1/" in os.path.join(d, f)]
    t.check(len(stored) >= 3, "files of shop1 in storage: %r" % stored)
    r = cli(sim, "backup", "delete", "shop1", "--confirm")
    t.eq(r.returncode, 0, "delete: %r" % r.stderr)
    t.check(not any(os.path.exists(p) for p in stored), "storage files removed")
    wait_for(lambda: sim.get(BK + "/shop1")[0] == 404, 10, "Backup object gone")


main()
