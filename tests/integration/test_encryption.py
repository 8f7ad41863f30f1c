"""Client-side encryption and `cairn backup verify` (issue 22).

A BackupStorageLocation with spec.encryption (keys in a Secret, one per key
id) makes every object of a backup AES-256-GCM encrypted: no stored byte
shows a Secret's value; the backup restores equal to the original in
another cluster that syncs it from storage; `cairn decrypt` and an
independent reader (scripts/cairn-decrypt.py, python3-cryptography) give a
tarball GNU tar reads; one changed byte in any part fails the restore and
`cairn backup verify` names the part; backups made before and after a key
rotation both restore; kill -9 with a restart and a takeover still give a
whole, decryptable backup. verify works with and without a cluster.
"""
import base64
import gzip
import json
import os
import subprocess
import sys
import tarfile
import time
import zlib

from bkworld import World, NS, BK, wait_parts
from cairntest import BIN, SRCDIR, CheckFailed, case, free_port, main, wait_for

MAGIC = b"cairnenc"
CHUNK = 65536
REF = os.path.join(SRCDIR, "scripts", "cairn-decrypt.py")
TIMINGS = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"]


def stored_size(plain):
    """crypt_stored_size(): a segment's stored size for plain bytes."""
    chunks = max(1, (plain + CHUNK - 1) // CHUNK)
    return 64 + plain + 20 * chunks


def new_key(t, name):
    key = os.urandom(32)
    path = t.path(name)
    with open(path, "w") as f:
        f.write(base64.b64encode(key).decode() + "\n")
    return key, path


def enc_world(t, root, key_ids=("k1",), keys=None, sim=None, sync="0"):
    """A kubesim with cairn's CRDs and an fs location encrypting with the
    first key id; returns (world, {id: (key, keyfile)})."""
    w = World(t, sim=sim)
    keys = keys or {kid: new_key(t, kid + ".key") for kid in key_ids}
    w.secret("cairn-keys", {kid: k for kid, (k, _) in keys.items()})
    w.fs_location(root, encryption={"keyID": key_ids[0], "secretRef": {"name": "cairn-keys"}},
                  backupSyncPeriod=sync)
    return w, keys


def seed_app(w, n_bulk=0):
    """Namespace app: Secrets with values we can search for, ConfigMaps,
    and n_bulk ConfigMaps of random text (for several parts)."""
    w.namespace("app")
    secrets = {}
    for i in range(4):
        val = ("hunter2-%d-" % i) + os.urandom(12).hex()
        secrets["s%d" % i] = val
        w.sim.ok("POST", "/api/v1/namespaces/app/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s%d" % i},
            "type": "Opaque", "data": {"password": base64.b64encode(val.encode()).decode()}})
    for i in range(3):
        w.sim.ok("POST", "/api/v1/namespaces/app/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm%d" % i},
            "data": {"k": "v%d" % i}})
    for c in range(0, n_bulk, 200):
        w.sim.ok("POST", "/_sim/bulk", {"items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "bulk-%05d" % i, "namespace": "app"},
             "data": {"payload": os.urandom(1000).hex()}} for i in range(c, min(n_bulk, c + 200))]})
    return secrets


def stored_files(root):
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            out.append(os.path.join(d, f))
    return sorted(out)


def backup_file(root, name, f):
    return os.path.join(root, "backups", name, f)


def decrypt(t, keyfiles, src, dst, check=True):
    argv = [BIN, "decrypt"]
    for kf in keyfiles:
        argv += ["--key-file", kf]
    r = subprocess.run(argv + [src, dst], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise CheckFailed("cairn decrypt %s: %s" % (src, r.stderr))
    return r


def tar_items(path):
    r = subprocess.run(["tar", "tzf", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed("GNU tar cannot read %s: %s" % (path, r.stderr))
    return [n for n in r.stdout.split() if n.startswith("resources/") and
            "-preferredversion/" not in n]


def verify(*args, env=None):
    return subprocess.run([BIN, "backup", "verify"] + list(args), capture_output=True,
                          text=True, env=env)


def app_objects(sim, plural):
    items = sim.ok("GET", "/api/v1/namespaces/app/%s" % plural)["items"]
    return {o["metadata"]["name"]: o.get("data") for o in items}


@case
def encrypted_backup_keeps_secrets_secret(t):
    root = t.mkdir("store")
    w, keys = enc_world(t, root)
    secrets = seed_app(w, n_bulk=600)
    srv = w.server(part_size=8192)
    w.create_backup("enc1", {"includedNamespaces": ["app"]})
    b = w.wait_backup("enc1", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("failureReason"))
    t.eq(b["status"].get("encryption"), {"keyID": "k1", "algorithm": "AES-256-GCM"},
         "status.encryption")
    parts = b["status"]["checkpoint"]["parts"]
    t.check(len(parts) >= 3, "several parts: %d" % len(parts))
    t.check(all(len(p.get("sha256", "")) == 64 for p in parts), "every part has a SHA-256")

    # every stored byte: no Secret value, plain or base64; every object encrypted
    files = stored_files(root)
    t.check(len(files) >= 5, "stored files: %s" % files)
    needles = []
    for v in secrets.values():
        needles += [v.encode(), base64.b64encode(v.encode())]
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        t.check(data[:8] == MAGIC, "%s is not encrypted (starts %r)" % (path, data[:16]))
        for n in needles:
            t.check(n not in data, "%s holds a Secret value" % path)
        t.check(b"hunter2" not in data, "%s holds Secret text" % path)

    # cairn decrypt and an independent reader give the same tarball
    tb = backup_file(root, "enc1", "enc1.tar.gz")
    decrypt(t, [keys["k1"][1]], tb, t.path("enc1.tar.gz"))
    r = subprocess.run([sys.executable, REF, keys["k1"][1], tb, t.path("ref.tar.gz")],
                       capture_output=True, text=True)
    t.eq(r.returncode, 0, "reference decryptor: %s" % r.stderr)
    with open(t.path("enc1.tar.gz"), "rb") as f1, open(t.path("ref.tar.gz"), "rb") as f2:
        t.check(f1.read() == f2.read(), "cairn decrypt and the reference differ")
    items = tar_items(t.path("enc1.tar.gz"))
    t.eq(len(items), 4 + 3 + 600 + 1, "items (Secrets, ConfigMaps, the namespace)")
    with tarfile.open(t.path("enc1.tar.gz")) as tf:
        sec = json.loads(tf.extractfile("resources/secrets/namespaces/app/s0.json").read())
    t.eq(base64.b64decode(sec["data"]["password"]).decode(), secrets["s0"], "Secret in the tarball")
    with open(t.path("logs.gz"), "wb"):
        pass
    decrypt(t, [keys["k1"][1]], backup_file(root, "enc1", "enc1-logs.gz"), t.path("logs.gz"))
    with gzip.open(t.path("logs.gz")) as f:
        t.check(b"backup started" in f.read(), "logs decrypt to gzip text")

    # verify, with the cluster and without one
    r = verify("enc1", "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.eq(r.returncode, 0, "verify: %s %s" % (r.stdout, r.stderr))
    t.check("verified" in r.stdout and "%d parts" % len(parts) in r.stdout, r.stdout)
    bsl = w.sim.ok("GET", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations/default" % NS)
    with open(t.path("bsl.json"), "w") as f:
        json.dump(bsl, f)
    r = verify("enc1", "--location-from-file", t.path("bsl.json"), "--key-file",
               "k1=" + keys["k1"][1])
    t.eq(r.returncode, 0, "offline verify: %s %s" % (r.stdout, r.stderr))
    r = verify("enc1", "--location-from-file", t.path("bsl.json"))
    t.check(r.returncode == 1 and "--key-file" in r.stderr, "offline without keys: %s" % r.stderr)

    # another cluster syncs the backup from storage and restores it equal
    srv.stop()
    w2, _ = enc_world(t, root, keys=keys, sim=t.kubesim(name="kubesim-b"), sync="1s")
    srv2 = w2.server(sid="s2")
    wait_for(lambda: w2.sim.get("%s/enc1" % BK)[0] == 200 and
             w2.backup("enc1").get("status", {}).get("phase") == "Completed", 30,
             "enc1 synced into the second cluster")
    w2.create_restore("r1", "enc1")
    rs = w2.wait_restore("r1", srv=srv2)
    t.eq(rs["status"]["phase"], "Completed", "restore (%s)" % rs["status"])
    t.eq(app_objects(w2.sim, "secrets"), app_objects(w.sim, "secrets"), "Secrets restored")
    t.eq(app_objects(w2.sim, "configmaps"), app_objects(w.sim, "configmaps"), "ConfigMaps restored")


@case
def changed_byte_fails_restore_and_verify_names_the_part(t):
    root = t.mkdir("store")
    w, keys = enc_world(t, root)
    seed_app(w, n_bulk=600)
    srv = w.server(part_size=8192)
    w.create_backup("tb", {"includedNamespaces": ["app"]})
    b = w.wait_backup("tb", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "phase")
    parts = b["status"]["checkpoint"]["parts"]
    t.check(len(parts) >= 3, "several parts: %d" % len(parts))
    tb = backup_file(root, "tb", "tb.tar.gz")
    offsets, at = [], 0
    for p in parts:
        offsets.append((p["number"], at, stored_size(p["bytes"])))
        at += stored_size(p["bytes"])
    t.eq(os.path.getsize(tb), at, "stored tarball size from the part sizes")
    kube = ["--kubeconfig", w.sim.kubeconfig, "-n", NS]
    picks = [offsets[0], offsets[len(offsets) // 2], offsets[-1]]
    for num, start, size in picks:
        for where in (5, size // 2, size - 3):    # header, middle, last tag
            with open(tb, "r+b") as f:
                f.seek(start + where)
                old = f.read(1)
                f.seek(start + where)
                f.write(bytes([old[0] ^ 0x01]))
            r = verify("tb", *kube)
            t.eq(r.returncode, 1, "verify with byte %d of part %d changed: %s" % (where, num, r.stdout))
            t.check("part %d " % num in r.stdout, "verify names part %d: %s" % (num, r.stdout))
            r = decrypt(t, [keys["k1"][1]], tb, t.path("x.tar.gz"), check=False)
            t.check(r.returncode == 1 and "part %d " % num in r.stderr and
                    not os.path.exists(t.path("x.tar.gz")), "decrypt: %s" % r.stderr)
            if where == size // 2 and num == picks[1][0]:
                w.create_restore("bad", "tb", {"namespaceMapping": {"app": "app-copy"}})
                rs = w.wait_restore("bad", srv=srv)
                t.eq(rs["status"]["phase"], "Failed", "restore of a changed backup")
                t.check("part %d " % num in rs["status"].get("failureReason", ""),
                        "restore names the part: %s" % rs["status"].get("failureReason"))
            with open(tb, "r+b") as f:
                f.seek(start + where)
                f.write(old)
    r = verify("tb", *kube)
    t.eq(r.returncode, 0, "verify after the bytes were put back: %s" % r.stdout)
    # a part cut out at a part boundary: the archive is short of its parts
    with open(tb, "rb") as f:
        data = f.read()
    num, start, size = offsets[1]
    with open(tb, "wb") as f:
        f.write(data[:start] + data[start + size:])
    r = verify("tb", *kube)
    t.eq(r.returncode, 1, "verify without part %d: %s" % (num, r.stdout))
    t.check("part" in r.stdout, "verify says which part: %s" % r.stdout)


@case
def key_rotation_keeps_old_backups_readable(t):
    root = t.mkdir("store")
    w, keys = enc_world(t, root)
    seed_app(w)
    srv = w.server()
    w.create_backup("before", {"includedNamespaces": ["app"]})
    t.eq(w.wait_backup("before", srv=srv)["status"]["phase"], "Completed", "backup before")
    # rotate: add k2 to the Secret, write with k2 from now on
    k2, k2file = new_key(t, "k2.key")
    sec = w.sim.ok("GET", "/api/v1/namespaces/%s/secrets/cairn-keys" % NS)
    sec["data"]["k2"] = base64.b64encode(k2).decode()
    w.sim.ok("PUT", "/api/v1/namespaces/%s/secrets/cairn-keys" % NS, sec)
    path = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations/default" % NS
    bsl = w.sim.ok("GET", path)
    bsl["spec"]["encryption"]["keyID"] = "k2"
    w.sim.ok("PUT", path, bsl)
    w.create_backup("after", {"includedNamespaces": ["app"]})
    a = w.wait_backup("after", srv=srv)
    t.eq(a["status"]["phase"], "Completed", "backup after")
    t.eq(a["status"]["encryption"]["keyID"], "k2", "the new backup's key")
    t.eq(w.backup("before")["status"]["encryption"]["keyID"], "k1", "the old backup's key")
    # each object names its key: k2 alone opens the new, not the old
    r = decrypt(t, ["k2=" + k2file], backup_file(root, "after", "after.tar.gz"), t.path("a.tgz"))
    r = decrypt(t, ["k2=" + k2file], backup_file(root, "before", "before.tar.gz"), t.path("b.tgz"),
                check=False)
    t.check(r.returncode == 1 and 'key "k1"' in r.stderr, "old backup with the new key: %s" % r.stderr)
    for name, dst in (("before", "app-before"), ("after", "app-after")):
        w.create_restore("r-" + name, name, {"namespaceMapping": {"app": dst}})
        rs = w.wait_restore("r-" + name, srv=srv)
        t.eq(rs["status"]["phase"], "Completed", "restore of %s (%s)" % (name, rs["status"]))
        got = {o["metadata"]["name"]: o["data"] for o in
               w.sim.ok("GET", "/api/v1/namespaces/%s/secrets" % dst)["items"]
               if o["metadata"]["name"].startswith("s")}
        t.eq(got, {k: v for k, v in app_objects(w.sim, "secrets").items() if k.startswith("s")},
             "Secrets restored from %s" % name)


@case
def server_verifies_and_shows_it(t):
    """cairn server --verify-period writes status.verification; describe
    and /status.json show the encryption and the last verification; a
    changed byte turns the next verification Failed, naming the part."""
    import webcheck
    root = t.mkdir("store")
    w, keys = enc_world(t, root)
    seed_app(w, n_bulk=600)
    port = free_port()
    srv = w.server(part_size=8192, extra=["--verify-period", "2s", "--listen",
                                          "127.0.0.1:%d" % port])
    w.create_backup("v1", {"includedNamespaces": ["app"]})
    t.eq(w.wait_backup("v1", srv=srv)["status"]["phase"], "Completed", "phase")

    def verified(result):
        def f():
            v = w.backup("v1").get("status", {}).get("verification", {})
            return v if v.get("result") == result else None
        return f
    v = wait_for(verified("Passed"), 30, "a passed verification")
    t.eq(v["verifiedBy"], "s1", "verifiedBy")
    t.check(v["partsChecked"] >= 3 and v["itemsChecked"] == 608, "counts: %s" % v)
    r = subprocess.run([BIN, "backup", "describe", "v1", "--kubeconfig", w.sim.kubeconfig,
                        "-n", NS], capture_output=True, text=True)
    t.check("Encryption:        AES-256-GCM, key k1" in r.stdout and
            "Verified:          Passed by s1" in r.stdout, "describe: %s" % r.stdout)

    def in_status():
        st, _, body = webcheck.get(port, "/status.json")
        doc = json.loads(body) if st == 200 else {}
        mine = [x for x in doc.get("recent", []) if x.get("name") == "v1"]
        return (doc, mine[0]) if mine and mine[0].get("verification") else None
    doc, item = wait_for(in_status, 20, "v1 in /status.json with its verification")
    t.eq(item["encryption"], {"keyID": "k1", "algorithm": "AES-256-GCM"}, "status.json encryption")
    t.eq(item["verification"]["result"], "Passed", "status.json verification")
    with open(webcheck.SCHEMA) as f:
        schema = json.load(f)
    errs = webcheck.validate(doc, schema, schema)
    t.check(not errs, "status.json against its schema: %s" % errs[:5])
    # a changed byte in the second part: the next pass fails, naming it
    parts = w.backup("v1")["status"]["checkpoint"]["parts"]
    tb = backup_file(root, "v1", "v1.tar.gz")
    with open(tb, "r+b") as f:
        f.seek(stored_size(parts[0]["bytes"]) + 100)
        b = f.read(1)
        f.seek(stored_size(parts[0]["bytes"]) + 100)
        f.write(bytes([b[0] ^ 4]))
    v = wait_for(verified("Failed"), 30, "a failed verification")
    t.check("part %d " % parts[1]["number"] in v["message"], "names the part: %s" % v["message"])


@case
def s3_backup_with_both_encryptions(t):
    """An S3 location with SSE-KMS (config.serverSideEncryption, kmsKeyId)
    and client-side encryption: every request that creates an object
    carries the signed SSE headers (seen by the proxy in front of s3rver),
    no stored byte shows a Secret, and the backup verifies."""
    from faultproxy import FaultProxy
    from s3rver import S3rver
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    w = World(t)
    key, keyfile = new_key(t, "k1.key")
    w.secret("cairn-keys", {"k1": key})
    kms = "arn:aws:kms:us-east-1:111122223333:key/0000-1111"
    w.s3_location(s3, endpoint=proxy.endpoint,
                  config={"serverSideEncryption": "aws:kms", "kmsKeyId": kms},
                  encryption={"keyID": "k1", "secretRef": {"name": "cairn-keys"}})
    secrets = seed_app(w, n_bulk=600)
    srv = w.server(part_size=256 << 10)
    w.create_backup("sse", {"includedNamespaces": ["app"]})
    b = w.wait_backup("sse", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("failureReason"))
    writes = [q for q in proxy.requests if (q["method"] == "PUT" and "partNumber=" not in q["query"])
              or (q["method"] == "POST" and "uploads=" in q["query"])]
    t.check(len(writes) >= 5, "object writes seen: %d" % len(writes))
    for q in writes:
        h = q["headers"]
        auth = h.get("authorization", "")
        t.check(h.get("x-amz-server-side-encryption") == "aws:kms" and
                h.get("x-amz-server-side-encryption-aws-kms-key-id") == kms and
                "x-amz-server-side-encryption;" in auth and
                "x-amz-server-side-encryption-aws-kms-key-id" in auth,
                "%s %s?%s without signed SSE-KMS headers" % (q["method"], q["path"], q["query"]))
    listed = s3.storage_tool("list", "pfx/").stdout.decode().split("\n")
    keys = [l.split()[1] for l in listed if l.startswith("K ")]
    t.check(len(keys) >= 5, "stored objects: %s" % keys)
    for k in keys:
        s3.storage_tool("get", k, t.path("raw"))
        with open(t.path("raw"), "rb") as f:
            data = f.read()
        t.check(data[:8] == MAGIC, "%s is not encrypted" % k)
        for v in secrets.values():
            t.check(v.encode() not in data and base64.b64encode(v.encode()) not in data,
                    "%s holds a Secret value" % k)
    r = verify("sse", "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.eq(r.returncode, 0, "verify: %s %s" % (r.stdout, r.stderr))


@case
def volume_data_is_encrypted_too(t):
    """A hostPath volume copied by the built-in mover goes through the
    same encrypting store: its index and chunk packs show none of the
    volume's bytes, verify reads the index whole, the index decrypts to the
    volume's entries (the file's chunk list, keyed chunk names) and the
    packs to its bytes (docs/plugins.md, "Incremental copies")."""
    root = t.mkdir("store")
    w, keys = enc_world(t, root)
    w.namespace("shop")
    vol = t.mkdir("vol")
    marker = "volume-secret-" + os.urandom(8).hex()
    with open(os.path.join(vol, "secret.txt"), "w") as f:
        f.write(marker * 100)
    w.sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": vol},
                 "claimRef": {"namespace": "shop", "name": "data"}}})
    w.sim.ok("POST", "/api/v1/namespaces/shop/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"volumeName": "pv-data", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    srv = w.server()
    w.create_backup("vb", {"includedNamespaces": ["shop"]})
    b = w.wait_backup("vb", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "phase (%s)" % b["status"].get("failureReason"))
    arch = backup_file(root, "vb", os.path.join("volumes", "pv-data.index.tar.gz"))
    t.check(os.path.exists(arch), "volume index %s" % arch)
    packdir = os.path.join(root, "plugins", "cairn-hostpath", "pv-data", "packs")
    packs = [os.path.join(packdir, f) for f in sorted(os.listdir(packdir)) if f.endswith(".pack")]
    t.check(packs, "chunk packs in %s" % packdir)
    for path in stored_files(root):
        with open(path, "rb") as f:
            data = f.read()
        t.check(data[:8] == MAGIC, "%s is not encrypted" % path)
        t.check(marker.encode() not in data, "%s holds the volume's bytes" % path)
    r = verify("vb", "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.eq(r.returncode, 0, "verify: %s %s" % (r.stdout, r.stderr))
    t.check("1 volume archives" in r.stdout, r.stdout)
    decrypt(t, [keys["k1"][1]], arch, t.path("vol.tar.gz"))
    with tarfile.open(t.path("vol.tar.gz")) as tf:
        got = tf.extractfile([m for m in tf.getmembers() if m.name.endswith("secret.txt")][0])
        listing = got.read().decode()
    t.check(listing.startswith("cairn-chunks 1 hmac-sha256:k1\n"), "a keyed chunk list: %s" % listing[:200])
    plain = b""
    for i, p in enumerate(packs):
        decrypt(t, [keys["k1"][1]], p, t.path("pack-%d" % i))
        with open(t.path("pack-%d" % i), "rb") as f:
            data = f.read()
        at = 0
        while at < len(data):   # records: CCK1, flags, 3 zero, plain, payload (BE32), name, payload
            t.eq(data[at:at + 4], b"CCK1", "pack record magic")
            flags, n = data[at + 4], int.from_bytes(data[at + 12:at + 16], "big")
            payload = data[at + 48:at + 48 + n]
            plain += zlib.decompress(payload) if flags & 1 else payload
            at += 48 + n
    t.check((marker * 100).encode() in plain, "the volume's file, decrypted from its pack")


@case
def install_sets_up_and_keeps_keys(t):
    """cairn install --encryption-key-file / --encrypt: the keys Secret and
    the location's spec.encryption; a re-run never loses a key or turns
    encryption off, and refuses a different key under an id in use."""
    sim = t.kubesim()
    kube = ["--kubeconfig", sim.kubeconfig]
    sec = "/api/v1/namespaces/%s/secrets/cairn-encryption" % NS
    bsl = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations/default" % NS

    def run(*args):
        r = subprocess.run([BIN, "install"] + kube + list(args), capture_output=True)
        r.stdout, r.stderr = (x.decode("utf-8", "replace") for x in (r.stdout, r.stderr))
        return r
    key1, f1 = new_key(t, "k1.key")
    r = run("--encryption-key-file", f1)
    t.eq(r.returncode, 0, "install: %s" % r.stderr)
    t.check("keep a copy outside the cluster" in r.stdout, r.stdout)
    data = sim.ok("GET", sec)["data"]
    t.eq(base64.b64decode(data["key-1"]), key1, "the key in the Secret")
    t.eq(sim.ok("GET", bsl)["spec"]["encryption"],
         {"keyID": "key-1", "secretRef": {"name": "cairn-encryption"}}, "spec.encryption")
    _, other = new_key(t, "other.key")
    r = run("--encryption-key-file", other)
    t.check(r.returncode == 2 and "another key under id key-1" in r.stderr,
            "a different key under key-1: %s" % r.stderr)
    r = run("--encrypt", "--encryption-key-id", "key-2")   # rotate to a generated key
    t.eq(r.returncode, 0, "rotation: %s" % r.stderr)
    t.check("just generated" in r.stdout, r.stdout)
    data = sim.ok("GET", sec)["data"]
    t.eq(sorted(data), ["key-1", "key-2"], "both keys after the rotation")
    t.eq(base64.b64decode(data["key-1"]), key1, "key-1 kept")
    t.eq(len(base64.b64decode(data["key-2"])), 32, "key-2 generated")
    t.eq(sim.ok("GET", bsl)["spec"]["encryption"]["keyID"], "key-2", "writes with key-2")
    r = run()
    t.eq(r.returncode, 0, "re-run without flags: %s" % r.stderr)
    t.eq(sim.ok("GET", bsl)["spec"]["encryption"]["keyID"], "key-2", "still encrypting")
    t.eq(len(sim.ok("GET", sec)["data"]), 2, "keys kept")
    r = subprocess.run([BIN, "uninstall"] + kube, capture_output=True, text=True)
    t.eq(r.returncode, 0, "uninstall: %s" % r.stderr)
    t.eq(sim.get(sec)[0], 200, "uninstall keeps the keys Secret")


def slow_encrypted(t, root, n=3000):
    w, keys = enc_world(t, root)
    w.namespace("bulk")
    w.sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"payload": "p" * 300}}, n,
               name="cm-{i:06d}", namespace="bulk")
    w.sim.faults({"method": "GET", "path": "^/api/v1/(namespaces/[^/]+/)?configmaps$",
                  "delay": 0.3, "count": 100000})
    return w, keys


def check_whole(t, w, root, keys, name, n):
    tb = backup_file(root, name, name + ".tar.gz")
    decrypt(t, [keys["k1"][1]], tb, t.path(name + ".tgz"))
    items = [i for i in tar_items(t.path(name + ".tgz")) if "/configmaps/namespaces/bulk/" in i]
    t.eq(len(items), n, "every ConfigMap once")
    t.eq(len(set(items)), n, "no ConfigMap twice")
    r = verify(name, "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.eq(r.returncode, 0, "verify: %s %s" % (r.stdout, r.stderr))


@case
def kill9_restart_and_takeover_stay_decryptable(t):
    n = 3000
    root = t.mkdir("store")
    w, keys = slow_encrypted(t, root, n)
    spec = {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]}
    # a restart with the same journal
    journal = t.path("journal-a.db")
    a = w.server(sid="a", part_size=8192, journal=journal, extra=TIMINGS)
    w.create_backup("restarted", spec)
    wait_parts(w, "restarted", 3)
    a.kill9()
    a2 = w.server(sid="a", part_size=8192, journal=journal, extra=TIMINGS)
    # ... and a takeover by another server while the first is dead
    w.create_backup("taken", spec)
    wait_for(lambda: w.backup("taken").get("status", {}).get("claim", {}).get("holder") == "a",
             30, "a to claim the second backup")
    wait_parts(w, "taken", 3)
    a2.kill9()
    b = w.server(sid="b", part_size=8192, extra=TIMINGS)
    w.sim.clear_faults()
    fin = w.wait_backup("taken", srv=b, timeout=120)
    t.eq(fin["status"]["phase"], "Completed", "taken over backup")
    t.eq(fin["status"]["claim"]["holder"], "b", "holder after takeover")
    fin = w.wait_backup("restarted", srv=b, timeout=120)
    t.eq(fin["status"]["phase"], "Completed", "restarted backup")
    check_whole(t, w, root, keys, "restarted", n)
    check_whole(t, w, root, keys, "taken", n)


main()
