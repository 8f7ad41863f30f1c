"""bkworld.py: a backup test world in a few calls: kubesim with cairn's CRDs,
a BackupStorageLocation (fs or S3 through s3rver, optionally behind the
fault proxy), `cairn server`, Backups and Restores over the API.

    from bkworld import World
    w = World(t)                               # kubesim + CRDs + namespace
    w.fs_location(root)                        # or w.s3_location(s3, endpoint=proxy.endpoint)
    w.secret("enc", {"k1": key_bytes})         # a Secret (values are raw bytes)
    srv = w.server(part_size=5 << 20)          # cairn server (killed at the end)
    w.create_backup("b1", {"includedNamespaces": ["app"]})
    b = w.wait_backup("b1", srv=srv)           # the Backup once its phase is final
    w.create_restore("r1", "b1"); w.wait_restore("r1")

Used by the storage, encryption, verify and backup walk tests; find_file()
is shared with tests/integration/test_backup.py, which keeps its own older
copy of the other helpers.
"""
import base64
import os
import time

from cairntest import BIN, CheckFailed, wait_for

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


class World:
    def __init__(self, t, sim=None):
        self.t = t
        self.sim = sim or t.kubesim()
        self.sim.install_crds(NS)

    def secret(self, name, data, ns=NS):
        """Create Secret name with data {key: bytes or str}."""
        enc = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
               for k, v in data.items()}
        return self.sim.ok("POST", "/api/v1/namespaces/%s/secrets" % ns, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": enc})

    def location(self, spec, name="default"):
        return self.sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1",
                                         "kind": "BackupStorageLocation",
                                         "metadata": {"name": name, "namespace": NS},
                                         "spec": spec})

    def fs_location(self, root, name="default", default=True, **extra):
        spec = {"provider": "fs", "objectStorage": {"bucket": "bk"},
                "config": {"path": root}, "default": default}
        spec.update(extra)
        return self.location(spec, name)

    def s3_location(self, s3, endpoint=None, name="default", prefix="pfx", default=True,
                    config=None, **extra):
        """An S3 location on s3rver s3 (its credentials in Secret s3-creds)."""
        if not self.sim.get("/api/v1/namespaces/%s/secrets/s3-creds" % NS)[0] == 200:
            with open(s3.creds_file, "rb") as f:
                self.secret("s3-creds", {"cloud": f.read()})
        cfg = {"endpoint": endpoint or s3.endpoint, "region": "us-east-1",
               "s3ForcePathStyle": "true"}
        cfg.update(config or {})
        spec = {"provider": "s3", "objectStorage": {"bucket": s3.bucket, "prefix": prefix},
                "credential": {"name": "s3-creds", "key": "cloud"}, "config": cfg,
                "default": default}
        spec.update(extra)
        return self.location(spec, name)

    def server(self, sid="s1", part_size=8 << 20, journal=None, extra=()):
        journal = journal or self.t.path("journal-%s.db" % sid)
        return self.t.spawn([BIN, "server", "--kubeconfig", self.sim.kubeconfig,
                             "--namespace", NS, "--server-id", sid, "--journal", journal,
                             "--part-size", str(part_size), "--retry-period", "200ms",
                             "--log-level", "info"] + list(extra), name="server-" + sid)

    def create_backup(self, name, spec=None):
        return self.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                        "metadata": {"name": name, "namespace": NS},
                                        "spec": spec or {}})

    def backup(self, name):
        return self.sim.ok("GET", "%s/%s" % (BK, name))

    def wait_backup(self, name, timeout=90, srv=None):
        def done():
            if srv is not None and not srv.alive():
                raise CheckFailed("server exited: %s" % srv.output()[-3000:])
            b = self.backup(name)
            return b if b.get("status", {}).get("phase") in FINAL else None
        return wait_for(done, timeout, "backup %s to finish" % name, interval=0.1)

    def create_restore(self, name, backup, spec=None):
        body = {"backupName": backup}
        body.update(spec or {})
        return self.sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                                        "metadata": {"name": name, "namespace": NS},
                                        "spec": body})

    def wait_restore(self, name, timeout=90, srv=None):
        def done():
            if srv is not None and not srv.alive():
                raise CheckFailed("server exited: %s" % srv.output()[-3000:])
            r = self.sim.ok("GET", "%s/%s" % (RS, name))
            return r if r.get("status", {}).get("phase") in FINAL else None
        return wait_for(done, timeout, "restore %s to finish" % name, interval=0.1)

    def namespace(self, name, labels=None):
        md = {"name": name}
        if labels:
            md["labels"] = labels
        return self.sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": md})


def wait_parts(w, name, n, timeout=60):
    """Wait until backup name has at least n checkpointed parts."""
    def enough():
        cp = w.backup(name).get("status", {}).get("checkpoint", {})
        return len(cp.get("parts", [])) >= n
    wait_for(enough, timeout, "%d checkpointed parts of %s" % (n, name), interval=0.02)


def now():
    return time.time()


def find_file(root, fname):
    """The path of file fname stored under root (a local-directory
    location), not one of an upload still being assembled."""
    for d, _, files in os.walk(root):
        if fname in files and ".cairn-uploads" not in d:
            return os.path.join(d, fname)
    raise CheckFailed("%s not found under %s" % (fname, root))
