"""restore_tarball: Velero-layout (format 1.1.0) tarballs for the restore
tests, built with Python's tarfile from objects read out of a kubesim, plus
hostile archives, and the storage/cluster objects a restore needs (an fs
BackupStorageLocation and a Completed Backup). Standard library only."""
import gzip
import io
import json
import os
import tarfile
import zlib

# (group, version, plural, namespaced) of what the tests back up.
RESOURCES = [
    ("", "v1", "namespaces", False),
    ("", "v1", "configmaps", True),
    ("", "v1", "secrets", True),
    ("", "v1", "serviceaccounts", True),
    ("", "v1", "services", True),
    ("", "v1", "persistentvolumes", False),
    ("", "v1", "persistentvolumeclaims", True),
    ("apps", "v1", "deployments", True),
    ("apps", "v1", "statefulsets", True),
    ("rbac.authorization.k8s.io", "v1", "roles", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", False),
]

SYSTEM_NS = {"default", "kube-system", "kube-public", "kube-node-lease", "cairn-system"}


def coll_path(group, version, plural):
    return ("/api/%s/%s" % (version, plural)) if group == "" else \
        ("/apis/%s/%s/%s" % (group, version, plural))


def dump(sim, resources=RESOURCES, skip_ns=SYSTEM_NS):
    """Every object of the resources, as [(group, version, plural, obj)]."""
    out = []
    for group, version, plural, namespaced in resources:
        lst = sim.ok("GET", coll_path(group, version, plural))
        for o in lst.get("items", []):
            o.setdefault("apiVersion", version if not group else "%s/%s" % (group, version))
            o.setdefault("kind", lst.get("kind", "List")[:-4])
            ns = o["metadata"].get("namespace", "")
            if ns in skip_ns or (plural == "namespaces" and o["metadata"]["name"] in skip_ns):
                continue
            out.append((group, version, plural, o))
    return out


def item_paths(group, version, plural, obj):
    rg = plural if not group else "%s.%s" % (plural, group)
    ns = obj["metadata"].get("namespace")
    scope = ("namespaces/%s" % ns) if ns else "cluster"
    name = obj["metadata"]["name"]
    return ("resources/%s/%s/%s.json" % (rg, scope, name),
            "resources/%s/%s-preferredversion/%s/%s.json" % (rg, version, scope, name))


def entries_for(items, legacy=True, preferred=True):
    """[(path, bytes)] for items, Velero writes both paths."""
    ents = [("metadata/version", b"1.1.0\n")]
    for group, version, plural, obj in items:
        data = json.dumps(obj, separators=(",", ":")).encode()
        lp, pp = item_paths(group, version, plural, obj)
        if legacy:
            ents.append((lp, data))
        if preferred:
            ents.append((pp, data))
    return ents


def tar_bytes(entries, gz=True):
    """A tar(.gz) of entries: (path, bytes) for files, or a tarfile.TarInfo
    with optional data as (TarInfo, bytes|None) for anything hostile."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            if isinstance(e[0], tarfile.TarInfo):
                ti, data = e
                tf.addfile(ti, io.BytesIO(data) if data is not None else None)
            else:
                path, data = e
                ti = tarfile.TarInfo(path)
                ti.size = len(data)
                ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(data))
    b = raw.getvalue()
    return gzip.compress(b) if gz else b


def tar_raw(entries):
    """The plain tar of entries ((path, bytes) files) and the byte offset
    after each entry: (raw, [end of entry 1, end of entry 2, ...]). The
    end-of-archive blocks and the record padding follow the last offset."""
    raw = io.BytesIO()
    ends = []
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path, data in entries:
            ti = tarfile.TarInfo(path)
            ti.size = len(data)
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))
            ends.append(raw.tell())
    return raw.getvalue(), ends


def gzip_flushed(raw, cut):
    """One gzip member of raw with a full flush at offset cut: (data, the
    compressed length at the flush). data[:that] inflates to raw[:cut]
    exactly, without the member's trailer."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = c.compress(raw[:cut]) + c.flush(zlib.Z_FULL_FLUSH)
    return head + c.compress(raw[cut:]) + c.flush(), len(head)


def bomb_tarball(good_entries, zeros=256 << 20):
    """A gzip bomb: good entries, then one tar entry of `zeros` zero bytes,
    compressed ~1000:1 and streamed so the test never holds the expansion."""
    head = io.BytesIO()
    with tarfile.open(fileobj=head, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for path, data in good_entries:
            ti = tarfile.TarInfo(path)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        ti = tarfile.TarInfo("resources/configmaps/namespaces/app1/bomb.json")
        ti.size = zeros
        tf.addfile(ti)       # header only; data follows below
    hb = head.getvalue()
    hb = hb[:len(hb) - 1024] if hb.endswith(b"\0" * 1024) else hb
    # tarfile pads the archive to a 10240-byte record: strip trailing zeros
    # back to the end of the last header block.
    hb = hb.rstrip(b"\0")
    hb += b"\0" * ((-len(hb)) % 512)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [c.compress(hb)]
    chunk = b"\0" * (1 << 20)
    for _ in range(zeros >> 20):
        out.append(c.compress(chunk))
    out.append(c.compress(b"\0" * 1024))
    out.append(c.flush())
    return b"".join(out)


def resource_list(tarball):
    """Velero's <backup>-resource-list.json.gz content for the items of a
    tarball: {"<apiVersion>/<Kind>": ["ns/name" | "name", ...]} (sorted),
    or None when the tarball does not read (a truncated or hostile one)."""
    out = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:*") as tf:
            for ti in tf:
                parts = ti.name.split("/")
                if not ti.isfile() or parts[0] != "resources" or not ti.name.endswith(".json"):
                    continue
                try:
                    o = json.loads(tf.extractfile(ti).read())
                    md = o["metadata"]
                    key = "%s/%s" % (o["apiVersion"], o["kind"])
                except (ValueError, KeyError, TypeError, RecursionError):
                    continue
                ns = md.get("namespace")
                out.setdefault(key, set()).add("%s/%s" % (ns, md["name"]) if ns else md["name"])
    except (tarfile.TarError, EOFError, OSError, zlib.error):
        return None
    return {k: sorted(v) for k, v in sorted(out.items())}


def install_backup(sim, store_root, name, tarball, phase="Completed", ns="cairn-system",
                   bsl="default", rlist="auto", parts=None):
    """Put tarball under the fs store in Velero's layout and create the
    BackupStorageLocation (once) and a Backup `name` in `phase`. The
    resource list is rlist (a dict), derived from the tarball ("auto"),
    or not written (None). parts: the status.checkpoint.parts to record
    (number, bytes, sha256 of each), or none."""
    d = os.path.join(store_root, "backups", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name + ".tar.gz"), "wb") as f:
        f.write(tarball)
    if rlist == "auto":
        rlist = resource_list(tarball)
    if rlist is not None:
        with gzip.open(os.path.join(d, name + "-resource-list.json.gz"), "wb") as f:
            f.write(json.dumps(rlist).encode())
    # labelled as cairn's sync labels a Backup it finds in storage: a
    # server must not take it for a new backup in the moment before its
    # status is written (engine/server.c)
    backup = {"apiVersion": "cairn.io/v1", "kind": "Backup",
              "metadata": {"name": name, "namespace": ns,
                           "labels": {"cairn.io/synced": "true"}},
              "spec": {"storageLocation": bsl}}
    with open(os.path.join(d, "velero-backup.json"), "w") as f:
        json.dump(backup, f)
    st, _, _ = sim.get("/apis/cairn.io/v1/namespaces/%s/backupstoragelocations/%s" % (ns, bsl))
    if st == 404:
        sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % ns,
               {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                "metadata": {"name": bsl, "namespace": ns},
                "spec": {"provider": "fs", "default": True,
                         "objectStorage": {"bucket": "local"},
                         "config": {"path": store_root}}})
    created = sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/backups" % ns, backup)
    created["status"] = {"phase": phase}
    if parts is not None:
        created["status"]["checkpoint"] = {"parts": parts}
    sim.ok("PUT", "/apis/cairn.io/v1/namespaces/%s/backups/%s/status" % (ns, name), created)


def create_restore(sim, name, spec, ns="cairn-system"):
    return sim.ok("POST", "/apis/cairn.io/v1/namespaces/%s/restores" % ns,
                  {"apiVersion": "cairn.io/v1", "kind": "Restore",
                   "metadata": {"name": name, "namespace": ns}, "spec": spec})


def get_restore(sim, name, ns="cairn-system"):
    return sim.ok("GET", "/apis/cairn.io/v1/namespaces/%s/restores/%s" % (ns, name))


FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def read_gz_json(store_root, key):
    with gzip.open(os.path.join(store_root, key)) as f:
        return json.loads(f.read())


# Fields a restore must reset (and the ones the target cluster assigns).
META_RESET = ("uid", "resourceVersion", "generation", "creationTimestamp", "selfLink",
              "managedFields", "ownerReferences", "generateName", "deletionTimestamp",
              "deletionGracePeriodSeconds")


def normalize(obj, keep_status=False):
    o = json.loads(json.dumps(obj))
    md = o.get("metadata", {})
    for k in META_RESET:
        md.pop(k, None)
    labels = md.get("labels") or {}
    labels.pop("cairn.io/backup-name", None)
    labels.pop("cairn.io/restore-name", None)
    if not labels:
        md.pop("labels", None)
    # what the PV controller writes when it binds (again, after a restore)
    anns = md.get("annotations") or {}
    for k in ("pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller"):
        anns.pop(k, None)
    if not anns:
        md.pop("annotations", None)
    if not keep_status:
        o.pop("status", None)
    if o.get("kind") == "Service":
        spec = o.get("spec", {})
        if spec.get("clusterIP") != "None":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for p in spec.get("ports", []):
            p.pop("nodePort", None)
    if o.get("kind") == "PersistentVolume":
        cr = o.get("spec", {}).get("claimRef")
        if cr:
            cr.pop("uid", None)
            cr.pop("resourceVersion", None)
    return o
