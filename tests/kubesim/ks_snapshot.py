"""A minimal CSI snapshot world: the external-snapshotter's objects and
controllers, and a CSI driver whose volumes are directories.

Switchable like the other controllers (kubesim --controllers ...,snapshot;
part of `all`). Its CRDs are what a cluster gets from
kubernetes-csi/external-snapshotter (client/config/crd, v8): kubesim
--snapshot-crds installs them at start (a cluster with the snapshotter
deployed); without them nothing here runs.

Modelled (snapshot-controller pkg/common-controller, csi-snapshotter
sidecar pkg/sidecar-controller, external-provisioner's restore path):
- VolumeSnapshotClass: cluster-scoped, `driver`, `deletionPolicy`,
  `parameters`; the default class of a driver is the one annotated
  snapshot.storage.kubernetes.io/is-default-class=true.
- VolumeSnapshot with spec.source.persistentVolumeClaimName (dynamic): the
  class (the default of the claim's PV's CSI driver when unset, written
  into the spec as the controller does) must exist and have the PV's
  driver, the claim must be Bound to a CSI PV; then a
  VolumeSnapshotContent `snapcontent-<snapshot uid>` is created
  (deletionPolicy of the class, volumeSnapshotRef with uid), the
  snapshot's status.boundVolumeSnapshotContentName set, both get their
  bound-protection finalizers; the "driver" cuts the snapshot (a copy of
  the volume's directory) and after --snapshot-seconds the content's
  status {snapshotHandle, creationTime (ns), readyToUse, restoreSize
  (bytes)} is set and mirrored on the snapshot (restoreSize as a
  Quantity, creationTime as RFC 3339). Failures land in status.error
  {message, time} (readyToUse false), with the real controllers' texts
  for the common ones.
- VolumeSnapshot with spec.source.volumeSnapshotContentName
  (pre-provisioned): bound when that content's volumeSnapshotRef names
  it; ready when the content is (a content with source.snapshotHandle is
  ready at once if the driver holds that snapshot, else status.error).
- Deletion: every content carries the bound-protection finalizer; a
  deleted VolumeSnapshot whose content's policy is Delete takes its
  content along; a deleted content with policy Delete deletes the
  driver's snapshot; Retain keeps both the content (of a deleted
  snapshot) and the data. Finalizers are removed by the controller when
  it has done that.
- Provisioning from a snapshot: a Pending claim whose dataSource is a
  ready VolumeSnapshot of its namespace, whose StorageClass's provisioner
  is the snapshot's driver, gets a PV `pvc-<claim uid>` (claimRef with
  uid, capacity = its request, reclaim policy of the class, annotation
  pv.kubernetes.io/provisioned-by) holding a copy of the snapshot; the PV
  binder (controller `pv`) binds them. A request smaller than the
  snapshot's restoreSize is refused with the provisioner's message (the
  claim stays Pending; the message is in the sim's log).

The driver: a PV with spec.csi.volumeHandle H keeps its data in
CSI_ROOT/volumes/H (tests put files there); snapshots live in
CSI_ROOT/snapshots/<handle> (a copy made when the content is created)
with <handle>.json {size, driver}. Not modelled: VolumeGroupSnapshots,
the snapshot validation webhook, sourceVolumeMode, Events.
"""

import copy
import json
import os
import shutil
import time
import uuid

from ks_core import ApiError
from ks_types import now_rfc3339

GROUP = "snapshot.storage.k8s.io"
VS, VSC, VSCLASS = (GROUP, "volumesnapshots"), (GROUP, "volumesnapshotcontents"), (GROUP, "volumesnapshotclasses")
ANN_DEFAULT = "snapshot.storage.kubernetes.io/is-default-class"
FIN_VS_BOUND = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
FIN_VSC_BOUND = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
MANAGER = "snapshot-controller"


def _crd(kind, plural, scope, schema, columns, short):
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, GROUP),
                     "annotations": {"api-approved.kubernetes.io":
                                     "https://github.com/kubernetes-csi/external-snapshotter/pull/955"}},
        "spec": {"group": GROUP, "scope": scope,
                 "names": {"kind": kind, "listKind": kind + "List", "plural": plural,
                           "singular": kind.lower(), "shortNames": short},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}} if kind != "VolumeSnapshotClass" else {},
                               "additionalPrinterColumns": columns,
                               "schema": {"openAPIV3Schema": schema}}]}}


def _obj(props, required=None):
    d = {"type": "object", "properties": props}
    if required:
        d["required"] = required
    return d


S, B, I64 = {"type": "string"}, {"type": "boolean"}, {"type": "integer", "format": "int64"}
ERR = _obj({"message": S, "time": {"type": "string", "format": "date-time"}})
REF = _obj({k: S for k in ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")})
TOP = {"apiVersion": S, "kind": S, "metadata": {"type": "object"}}


def crds():
    """The three CustomResourceDefinitions (their v1 schemas, trimmed of descriptions)."""
    cls = _obj(dict(TOP, driver=S, deletionPolicy={"type": "string", "enum": ["Delete", "Retain"]},
                    parameters={"type": "object", "additionalProperties": S}), ["deletionPolicy", "driver"])
    vs = _obj(dict(TOP, spec=_obj({
        "source": _obj({"persistentVolumeClaimName": S, "volumeSnapshotContentName": S}),
        "volumeSnapshotClassName": S}, ["source"]),
        status=_obj({"boundVolumeSnapshotContentName": S,
                     "creationTime": {"type": "string", "format": "date-time"},
                     "error": ERR, "readyToUse": B,
                     "restoreSize": {"x-kubernetes-int-or-string": True,
                                     "anyOf": [{"type": "integer"}, {"type": "string"}]},
                     "volumeGroupSnapshotName": S})), ["spec"])
    vsc = _obj(dict(TOP, spec=_obj({
        "deletionPolicy": {"type": "string", "enum": ["Delete", "Retain"]}, "driver": S,
        "source": _obj({"snapshotHandle": S, "volumeHandle": S}), "sourceVolumeMode": S,
        "volumeSnapshotClassName": S, "volumeSnapshotRef": REF},
        ["deletionPolicy", "driver", "source", "volumeSnapshotRef"]),
        status=_obj({"creationTime": I64, "error": ERR, "readyToUse": B,
                     "restoreSize": {"type": "integer", "format": "int64", "minimum": 0},
                     "snapshotHandle": S, "volumeGroupSnapshotHandle": S})), ["spec"])
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    return [
        _crd("VolumeSnapshotClass", "volumesnapshotclasses", "Cluster", cls,
             [{"name": "Driver", "type": "string", "jsonPath": ".driver"},
              {"name": "DeletionPolicy", "type": "string", "jsonPath": ".deletionPolicy"}, age], ["vsclass"]),
        _crd("VolumeSnapshot", "volumesnapshots", "Namespaced", vs,
             [{"name": "ReadyToUse", "type": "boolean", "jsonPath": ".status.readyToUse"},
              {"name": "SourcePVC", "type": "string", "jsonPath": ".spec.source.persistentVolumeClaimName"},
              {"name": "RestoreSize", "type": "string", "jsonPath": ".status.restoreSize"},
              {"name": "SnapshotContent", "type": "string", "jsonPath": ".status.boundVolumeSnapshotContentName"},
              age], ["vs"]),
        _crd("VolumeSnapshotContent", "volumesnapshotcontents", "Cluster", vsc,
             [{"name": "ReadyToUse", "type": "boolean", "jsonPath": ".status.readyToUse"},
              {"name": "RestoreSize", "type": "integer", "jsonPath": ".status.restoreSize"},
              {"name": "DeletionPolicy", "type": "string", "jsonPath": ".spec.deletionPolicy"},
              {"name": "Driver", "type": "string", "jsonPath": ".spec.driver"}, age], ["vsc", "vscs"]),
    ]


def _qty_bytes(q):
    s = str(q or "0")
    for suf, m in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40),
                   ("k", 10 ** 3), ("M", 10 ** 6), ("G", 10 ** 9), ("T", 10 ** 12)):
        if s.endswith(suf):
            return int(float(s[:-len(suf)]) * m)
    try:
        return int(s)
    except ValueError:
        return 0


def _quantity(n):
    """Bytes as the Quantity the snapshot controller writes (binary suffix when exact)."""
    for suf, m in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n and n % m == 0:
            return "%d%s" % (n // m, suf)
    return str(n)


class Snapshots:
    """The snapshot controllers; tick() runs under the sim lock from the
    Controllers loop."""

    def __init__(self, sim, ctl, csi_root, ready_seconds=1.0):
        self.sim, self.ctl = sim, ctl
        self.root = csi_root
        self.ready_seconds = float(ready_seconds)
        self.cut_at = {}        # content name -> when its snapshot was cut
        self.rv = 0
        os.makedirs(os.path.join(csi_root, "volumes"), exist_ok=True)
        os.makedirs(os.path.join(csi_root, "snapshots"), exist_ok=True)

    # ------------------------------------------------------------ plumbing
    def _on(self):
        return all(k in self.sim.by_rkey for k in (VS, VSC, VSCLASS))

    def _objs(self, rkey):
        return self.ctl._objs(rkey)

    def _create(self, rkey, ns, body):
        try:
            self.sim.create(self.sim.by_rkey[rkey], ns, body)
        except ApiError as e:
            print("ks_snapshot: creating %s %s: %s" % (rkey[1], body["metadata"].get("name"), e), flush=True)

    def _status(self, rkey, key, obj, status):
        if obj.get("status") == status:
            return obj
        obj = copy.deepcopy(obj)
        obj["status"] = status
        return self.ctl._write(rkey, key, obj, status_only=True)

    def _write(self, rkey, key, obj):
        return self.ctl._write(rkey, key, obj)

    def _del(self, rkey, key, obj):
        """Drop our finalizers; the object goes once it has none."""
        obj = copy.deepcopy(obj)
        fins = [f for f in obj["metadata"].get("finalizers") or [] if f not in (FIN_VS_BOUND, FIN_VSC_BOUND)]
        if fins:
            obj["metadata"]["finalizers"] = fins
            self._write(rkey, key, obj)
            return
        self.sim._del(self.sim.by_rkey[rkey], key, obj)

    @staticmethod
    def _error(msg):
        return {"message": msg, "time": now_rfc3339()}

    def _snap_dir(self, handle):
        return os.path.join(self.root, "snapshots", handle)

    def _snap_meta(self, handle):
        try:
            with open(self._snap_dir(handle) + ".json") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------ loop
    def tick(self, now):
        if not self._on() or (self.sim.rv == self.rv and not self.cut_at):
            return
        loc = self.sim.local
        saved = loc.manager
        loc.manager = MANAGER
        try:
            for _ in range(4):          # until nothing moves
                before = self.sim.rv
                self._sync_contents(now)
                self._sync_snapshots()
                self._provision()
                if self.sim.rv == before:
                    break
        finally:
            loc.manager = saved
            self.rv = self.sim.rv

    # ------------------------------------------------------------ snapshots
    def _class_for(self, vs, driver):
        classes = self._objs(VSCLASS)
        name = (vs.get("spec") or {}).get("volumeSnapshotClassName")
        if name:
            c = classes.get(("", name))
            if c is None:
                return None, ('failed to get input parameters to create snapshot %s: "volumesnapshotclass.'
                              'snapshot.storage.k8s.io \\"%s\\" not found"' % (vs["metadata"]["name"], name))
            return c, None
        defaults = [c for c in classes.values() if c.get("driver") == driver
                    and ((c["metadata"].get("annotations") or {}).get(ANN_DEFAULT) == "true")]
        if len(defaults) != 1:
            return None, ("cannot find default snapshot class" if not defaults
                          else "%d default snapshot classes were found" % len(defaults))
        return defaults[0], None

    def _sync_snapshots(self):
        contents = self._objs(VSC)
        for key, vs in sorted(self._objs(VS).items()):
            md = vs["metadata"]
            src = (vs.get("spec") or {}).get("source") or {}
            bound = (vs.get("status") or {}).get("boundVolumeSnapshotContentName")
            vsc = contents.get(("", bound)) if bound else None
            if md.get("deletionTimestamp"):
                self._delete_snapshot(key, vs, vsc)
                continue
            if src.get("persistentVolumeClaimName") and not bound:
                self._dynamic(key, vs)
            elif src.get("volumeSnapshotContentName") and not bound:
                c = contents.get(("", src["volumeSnapshotContentName"]))
                ref = ((c or {}).get("spec") or {}).get("volumeSnapshotRef") or {}
                if c is not None and ref.get("name") == md["name"] and ref.get("namespace") == md["namespace"]:
                    if not ref.get("uid"):
                        c = copy.deepcopy(c)
                        c["spec"]["volumeSnapshotRef"]["uid"] = md["uid"]
                        c["metadata"].setdefault("finalizers", [])
                        if FIN_VSC_BOUND not in c["metadata"]["finalizers"]:
                            c["metadata"]["finalizers"].append(FIN_VSC_BOUND)
                        self._write(VSC, ("", c["metadata"]["name"]), c)
                    self._bind(key, vs, src["volumeSnapshotContentName"])
                elif c is None:
                    self._status(VS, key, vs, {"readyToUse": False, "error": self._error(
                        "VolumeSnapshotContent %s not found" % src["volumeSnapshotContentName"])})
            elif vsc is not None:
                self._mirror(key, vs, vsc)

    def _bind(self, key, vs, content):
        vs = copy.deepcopy(vs)
        fins = vs["metadata"].setdefault("finalizers", [])
        if FIN_VS_BOUND not in fins:
            fins.append(FIN_VS_BOUND)
            vs = self._write(VS, key, vs)
        st = dict(vs.get("status") or {})
        st["boundVolumeSnapshotContentName"] = content
        st.setdefault("readyToUse", False)
        self._status(VS, key, vs, st)

    def _dynamic(self, key, vs):
        """A VolumeSnapshot of a claim: its content, from the claim's CSI PV."""
        ns, name, uid = key[0], vs["metadata"]["name"], vs["metadata"]["uid"]
        claim_name = vs["spec"]["source"]["persistentVolumeClaimName"]
        pvc = self._objs(("", "persistentvolumeclaims")).get((ns, claim_name))
        if pvc is None:
            self._status(VS, key, vs, {"readyToUse": False, "error": self._error(
                'failed to take snapshot %s: failed to get input parameters to create snapshot: '
                '"persistentvolumeclaim \\"%s\\" not found"' % (name, claim_name))})
            return
        pvname = (pvc.get("spec") or {}).get("volumeName")
        pv = self._objs(("", "persistentvolumes")).get(("", pvname)) if pvname else None
        if pv is None or (pvc.get("status") or {}).get("phase") != "Bound":
            self._status(VS, key, vs, {"readyToUse": False, "error": self._error(
                "the source claim %s is not bound" % claim_name)})
            return
        csi = (pv.get("spec") or {}).get("csi") or {}
        if not csi.get("driver"):
            self._status(VS, key, vs, {"readyToUse": False, "error": self._error(
                "volume %s is not a CSI volume" % pvname)})
            return
        cls, err = self._class_for(vs, csi["driver"])
        if err is None and cls.get("driver") != csi["driver"]:
            err = ("failed to create snapshot content: the snapshot class %s is for driver %s, the volume's "
                   "driver is %s" % (cls["metadata"]["name"], cls.get("driver"), csi["driver"]))
        if err:
            self._status(VS, key, vs, {"readyToUse": False, "error": self._error(err)})
            return
        if not vs["spec"].get("volumeSnapshotClassName"):
            vs = copy.deepcopy(vs)
            vs["spec"]["volumeSnapshotClassName"] = cls["metadata"]["name"]
            vs = self._write(VS, key, vs)
        cname = "snapcontent-" + uid
        if ("", cname) not in self.sim.stores[VSC].objs:
            self._create(VSC, None, {
                "apiVersion": GROUP + "/v1", "kind": "VolumeSnapshotContent",
                "metadata": {"name": cname, "finalizers": [FIN_VSC_BOUND]},
                "spec": {"deletionPolicy": cls.get("deletionPolicy", "Delete"), "driver": csi["driver"],
                         "source": {"volumeHandle": csi.get("volumeHandle", "")},
                         "volumeSnapshotClassName": cls["metadata"]["name"],
                         "volumeSnapshotRef": {"apiVersion": GROUP + "/v1", "kind": "VolumeSnapshot",
                                               "name": name, "namespace": ns, "uid": uid,
                                               "resourceVersion": vs["metadata"].get("resourceVersion", "")}}})
            size = _qty_bytes(((pvc.get("status") or {}).get("capacity") or {}).get("storage")
                              or ((pv.get("spec") or {}).get("capacity") or {}).get("storage"))
            self._cut("snapshot-" + uid, csi["driver"], csi.get("volumeHandle", ""), size)
            self.cut_at[cname] = time.time()
        self._bind(key, vs, cname)

    def _cut(self, handle, driver, volume_handle, size):
        """The driver's CreateSnapshot: a copy of the volume's directory."""
        dst = self._snap_dir(handle)
        src = os.path.join(self.root, "volumes", volume_handle)
        if not os.path.exists(dst):
            if os.path.isdir(src):
                shutil.copytree(src, dst, symlinks=True)
            else:
                os.makedirs(dst)
        with open(dst + ".json", "w") as f:
            json.dump({"size": size, "driver": driver, "source": volume_handle}, f)

    def _mirror(self, key, vs, vsc):
        """The snapshot's status from its content's."""
        cst = vsc.get("status") or {}
        st = dict(vs.get("status") or {})
        st["readyToUse"] = bool(cst.get("readyToUse"))
        if cst.get("restoreSize") is not None:
            st["restoreSize"] = _quantity(int(cst["restoreSize"]))
        if cst.get("creationTime"):
            st["creationTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                               time.gmtime(int(cst["creationTime"]) / 1e9))
        if cst.get("error"):
            st["error"] = cst["error"]
        else:
            st.pop("error", None)
        self._status(VS, key, vs, st)

    def _delete_snapshot(self, key, vs, vsc):
        if vsc is not None:
            if (vsc.get("spec") or {}).get("deletionPolicy") == "Delete":
                if not vsc["metadata"].get("deletionTimestamp"):
                    self.sim.delete(self.sim.by_rkey[VSC], None, vsc["metadata"]["name"], {})
            # Retain: the content stays (and keeps its finalizer until
            # it is deleted itself)
        self._del(VS, key, vs)

    # ------------------------------------------------------------ contents
    def _sync_contents(self, now):
        for key, c in sorted(self._objs(VSC).items()):
            name, spec = c["metadata"]["name"], c.get("spec") or {}
            src = spec.get("source") or {}
            st = c.get("status") or {}
            if c["metadata"].get("deletionTimestamp"):
                handle = st.get("snapshotHandle") or src.get("snapshotHandle")
                if spec.get("deletionPolicy") == "Delete" and handle:
                    shutil.rmtree(self._snap_dir(handle), ignore_errors=True)
                    try:
                        os.unlink(self._snap_dir(handle) + ".json")
                    except OSError:
                        pass
                self.cut_at.pop(name, None)
                self._del(VSC, key, c)
                continue
            if FIN_VSC_BOUND not in (c["metadata"].get("finalizers") or []):
                c = copy.deepcopy(c)     # the content's protection, as the controller adds it
                c["metadata"]["finalizers"] = (c["metadata"].get("finalizers") or []) + [FIN_VSC_BOUND]
                c = self._write(VSC, key, c)
            if st.get("readyToUse") or st.get("error"):
                continue
            if src.get("snapshotHandle"):       # pre-provisioned
                meta = self._snap_meta(src["snapshotHandle"])
                if meta is None or meta.get("driver") != spec.get("driver"):
                    self._status(VSC, key, c, {"readyToUse": False, "error": self._error(
                        "snapshot %s of driver %s does not exist" % (src["snapshotHandle"], spec.get("driver")))})
                    continue
                self._status(VSC, key, c, {"readyToUse": True, "snapshotHandle": src["snapshotHandle"],
                                           "restoreSize": int(meta.get("size", 0)),
                                           "creationTime": int(time.time() * 1e9)})
                continue
            cut = self.cut_at.get(name)
            if cut is None:
                self.cut_at[name] = cut = now  # a content kubesim restarted without: cut now
                ref = spec.get("volumeSnapshotRef") or {}
                self._cut("snapshot-" + (ref.get("uid") or name), spec.get("driver", ""),
                          src.get("volumeHandle", ""), 0)
            if now - cut < self.ready_seconds:
                continue
            ref = spec.get("volumeSnapshotRef") or {}
            handle = "snapshot-" + (ref.get("uid") or name)
            meta = self._snap_meta(handle) or {}
            self.cut_at.pop(name, None)
            self._status(VSC, key, c, {"readyToUse": True, "snapshotHandle": handle,
                                       "restoreSize": int(meta.get("size", 0)),
                                       "creationTime": int(cut * 1e9)})

    # ------------------------------------------------------------ provisioning
    def _provision(self):
        """external-provisioner: claims whose dataSource is a ready VolumeSnapshot."""
        classes = self._objs(("storage.k8s.io", "storageclasses"))
        snaps = self._objs(VS)
        contents = self._objs(VSC)
        pvs = self._objs(("", "persistentvolumes"))
        for key, pvc in sorted(self._objs(("", "persistentvolumeclaims")).items()):
            spec = pvc.get("spec") or {}
            ds = spec.get("dataSource") or {}
            if (ds.get("kind") != "VolumeSnapshot" or ds.get("apiGroup") != GROUP or spec.get("volumeName")
                    or pvc["metadata"].get("deletionTimestamp")
                    or ("", "pvc-" + pvc["metadata"]["uid"]) in pvs):
                continue
            vs = snaps.get((key[0], ds.get("name")))
            if vs is None or not (vs.get("status") or {}).get("readyToUse"):
                continue
            vsc = contents.get(("", (vs.get("status") or {}).get("boundVolumeSnapshotContentName")))
            sc = classes.get(("", spec.get("storageClassName") or ""))
            if vsc is None or sc is None or sc.get("provisioner") != vsc["spec"].get("driver"):
                continue
            want = _qty_bytes((spec.get("resources") or {}).get("requests", {}).get("storage"))
            size = int((vsc.get("status") or {}).get("restoreSize") or 0)
            if want < size:
                print("ks_snapshot: claim %s/%s: requested volume size %d is less than the size %d for the "
                      "source snapshot %s" % (key[0], key[1], want, size, ds.get("name")), flush=True)
                continue
            self._provision_one(pvc, sc, vsc)

    def _provision_one(self, pvc, sc, vsc):
        md, spec = pvc["metadata"], pvc["spec"]
        name = "pvc-" + md["uid"]
        handle = "%s-%s" % (name, uuid.uuid4().hex[:8])
        src = self._snap_dir(vsc["status"]["snapshotHandle"])
        dst = os.path.join(self.root, "volumes", handle)
        if os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True)
        else:
            os.makedirs(dst)
        self._create(("", "persistentvolumes"), None, {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": sc["provisioner"]}},
            "spec": {"capacity": {"storage": spec["resources"]["requests"]["storage"]},
                     "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                     "storageClassName": spec.get("storageClassName"),
                     "volumeMode": spec.get("volumeMode") or "Filesystem",
                     "csi": {"driver": sc["provisioner"], "volumeHandle": handle},
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}}})


def install(sim, ctl, csi_root, ready_seconds, with_crds):
    """Hook the controller into kubesim's Controllers (and, with_crds,
    create the snapshot CRDs as a cluster with the snapshotter has them)."""
    if with_crds:
        crd_rt = sim.by_rkey[("apiextensions.k8s.io", "customresourcedefinitions")]
        for c in crds():
            sim.create(crd_rt, None, c)
    ctl.snap = Snapshots(sim, ctl, csi_root, ready_seconds)
