"""Light controllers and registry strategies of a real cluster, each switchable
(kubesim --controllers LIST, default all; `none` for the old inline world).

- namespace: DELETE of a Namespace leaves it Terminating (spec.finalizers
  ["kubernetes"], as pkg/registry/core/namespace/strategy.go sets them at
  create) for --namespace-delete-seconds; then the namespace controller
  (pkg/controller/namespace/deletion) deletes its content, waits for objects
  with finalizers, finalizes and deletes it. Creates inside get 403 with the
  NamespaceTerminating cause (plugin/pkg/admission/namespace/lifecycle), a
  create of the namespace itself 409.
- pod: graceful deletion as pkg/registry/core/pod/strategy.go
  CheckGracefulDelete decides (gracePeriodSeconds, else
  spec.terminationGracePeriodSeconds, defaulted to 30; 0 when the pod is not
  scheduled or has finished): the pod keeps deletionTimestamp = now + grace
  until the "kubelet" deletes it, after min(grace, --pod-delete-seconds).
- job: the batch strategy (pkg/registry/batch/job/strategy.go
  generateSelector, pkg/apis/batch/validation ValidateGeneratedSelector):
  generated selector and controller-uid / job-name labels; a Job carrying a
  selector without manualSelector: true that does not match its own uid gets
  422.
- pv: a minimal PersistentVolume binder following
  pkg/controller/volume/persistentvolume/pv_controller.go syncClaim /
  syncVolume (bind, Lost, Released, Available; Delete reclaim policy deletes
  the released PV as an external provisioner would), plus the defaulting of
  reclaim policy / volumeMode and the DefaultStorageClass admission."""

import bisect
import copy
import threading
import time

from ks_core import loads, invalid_many
from ks_types import now_rfc3339

ALL = ("namespace", "pod", "job", "pv", "snapshot")   # snapshot: ks_snapshot.py
MANAGER = "kube-controller-manager"
WAKE_RKEYS = [("", "persistentvolumes"), ("", "persistentvolumeclaims"), ("storage.k8s.io", "storageclasses"),
              ("snapshot.storage.k8s.io", "volumesnapshots"), ("snapshot.storage.k8s.io", "volumesnapshotcontents"),
              ("snapshot.storage.k8s.io", "volumesnapshotclasses")]

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"

LEGACY_UID, UID_LABEL = "controller-uid", "batch.kubernetes.io/controller-uid"
LEGACY_NAME, NAME_LABEL = "job-name", "batch.kubernetes.io/job-name"


def parse_list(spec):
    """--controllers value -> set of names (ValueError on an unknown one)."""
    if spec in (None, "", "all"):
        return set(ALL)
    if spec == "none":
        return set()
    out = set()
    for x in spec.split(","):
        x = x.strip()
        if x not in ALL:
            raise ValueError("unknown controller %r (known: %s, all, none)" % (x, ", ".join(ALL)))
        out.add(x)
    return out


# ------------------------------------------------------------ Go value printing
def go_map(m):
    """%#v of a map[string]string (fmt sorts the keys)."""
    if m is None:
        return "map[string]string(nil)"
    return "map[string]string{" + ", ".join('"%s":"%s"' % (k, m[k]) for k in sorted(m)) + "}"


def go_selector(sel):
    """%#v of a v1.LabelSelector (ErrorBody dereferences the pointer)."""
    ml = go_map(sel.get("matchLabels")) if sel.get("matchLabels") is not None else "map[string]string(nil)"
    exprs = sel.get("matchExpressions")
    if not exprs:
        me = "[]v1.LabelSelectorRequirement(nil)"
    else:
        me = "[]v1.LabelSelectorRequirement{" + ", ".join(
            'v1.LabelSelectorRequirement{Key:"%s", Operator:"%s", Values:%s}' % (
                e.get("key", ""), e.get("operator", ""),
                "[]string{" + ", ".join('"%s"' % v for v in e.get("values") or []) + "}" if e.get("values") else "[]string(nil)")
            for e in exprs) + "}"
    return "v1.LabelSelector{MatchLabels:%s, MatchExpressions:%s}" % (ml, me)


def selector_matches(sel, labels):
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def _qty(s):
    """A resource.Quantity string -> float bytes (enough for comparing sizes)."""
    if isinstance(s, (int, float)):
        return float(s)
    s = str(s or "0").strip()
    suffixes = [("Ki", 1024), ("Mi", 1024 ** 2), ("Gi", 1024 ** 3), ("Ti", 1024 ** 4), ("Pi", 1024 ** 5),
                ("Ei", 1024 ** 6), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("P", 1e15), ("E", 1e18),
                ("m", 1e-3)]
    for suf, mult in suffixes:
        if s.endswith(suf):
            try:
                return float(s[:-len(suf)]) * mult
            except ValueError:
                return 0.0
    try:
        return float(s)
    except ValueError:
        return 0.0


class Controllers:
    def __init__(self, sim, enabled, namespace_seconds=2.0, pod_seconds=2.0):
        self.sim = sim
        self.enabled = set(enabled)
        self.ns_seconds = float(namespace_seconds)
        self.pod_seconds = float(pod_seconds)
        self.ns_due = {}        # namespace -> when its content gets deleted
        self.ns_cleaning = set()  # namespaces whose content deletion has run
        self.pod_due = {}       # (ns, name) -> when the "kubelet" deletes the pod
        self.pv_rv = 0          # last resourceVersion the binder looked at
        self.parsed = {}        # rkey -> {key: (stored bytes, parsed object)} (_objs)
        self.snap = None        # ks_snapshot.Snapshots (ks_snapshot.install)
        self.stop = False
        self.thread = None
        # what wakes the loop before its 0.2 s tick: writes of the objects the
        # binder and the snapshot controller watch, and due times set here
        self.wake = sim.waker(WAKE_RKEYS)

    def on(self, name):
        return name in self.enabled

    def start(self):
        if not self.enabled:
            return
        self.thread = threading.Thread(target=self.run, name="kubesim-controllers", daemon=True)
        self.thread.start()

    # ---------------------------------------------------------------- strategies
    def prepare(self, rt, obj, old):
        """Defaulting and strategy rules of a write (create when old is None),
        under the store lock, before the commit. May raise ApiError (422)."""
        k = rt.kind
        if rt.group == "" and k == "Pod" and old is None and self.on("pod"):
            spec = obj.get("spec")
            if isinstance(spec, dict):
                spec.setdefault("terminationGracePeriodSeconds", 30)
        elif rt.group == "batch" and k == "Job" and self.on("job"):
            if old is None:
                self._job_create(rt, obj)
        elif rt.group == "" and k == "PersistentVolume" and self.on("pv"):
            spec = obj.get("spec")
            if isinstance(spec, dict):
                spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
                spec.setdefault("volumeMode", "Filesystem")
            if old is None:
                obj.setdefault("status", {})["lastPhaseTransitionTime"] = now_rfc3339()
        elif rt.group == "" and k == "PersistentVolumeClaim" and self.on("pv"):
            spec = obj.get("spec")
            if isinstance(spec, dict):
                spec.setdefault("volumeMode", "Filesystem")
                if old is None and "storageClassName" not in spec:
                    dflt = self._default_class()
                    if dflt:
                        spec["storageClassName"] = dflt

    def _default_class(self):
        st = self.sim.stores.get(("storage.k8s.io", "storageclasses"))
        if not st:
            return None
        best = None
        for key, (data, _) in st.objs.items():
            o = loads(data)
            if ((o["metadata"].get("annotations") or {}).get(ANN_DEFAULT_CLASS) == "true"
                    and (best is None or o["metadata"].get("creationTimestamp", "") > best[0])):
                best = (o["metadata"].get("creationTimestamp", ""), key[1])
        return best[1] if best else None

    def _job_create(self, rt, job):
        md = job["metadata"]
        spec = job.get("spec")
        if not isinstance(spec, dict):
            spec = job["spec"] = {}
        tmpl = spec.get("template")
        if not isinstance(tmpl, dict):
            tmpl = spec["template"] = {}
        tmd = tmpl.get("metadata")
        if not isinstance(tmd, dict):
            tmd = tmpl["metadata"] = {}
        uid, name = md["uid"], md.get("name", "")
        manual = spec.get("manualSelector") is True
        if not manual:
            # generateSelector: labels and selector the user did not set
            labels = tmd.get("labels")
            if not isinstance(labels, dict):
                labels = tmd["labels"] = {}
            for key, val in ((LEGACY_NAME, name), (NAME_LABEL, name), (LEGACY_UID, uid), (UID_LABEL, uid)):
                labels.setdefault(key, val)
            sel = spec.get("selector")
            if not isinstance(sel, dict):
                sel = spec["selector"] = {}
            ml = sel.get("matchLabels")
            if not isinstance(ml, dict):
                ml = sel["matchLabels"] = {}
            ml.setdefault(UID_LABEL, uid)
        for f, v in (("parallelism", 1), ("completions", 1), ("backoffLimit", 6), ("completionMode", "NonIndexed"),
                     ("suspend", False), ("podReplacementPolicy", "TerminatingOrFailed")):
            spec.setdefault(f, v)
        errs = []
        labels = tmd.get("labels") or {}
        base = "spec.template.metadata"
        if not manual and spec.get("selector") is not None:
            # ValidateGeneratedSelector (RequirePrefixedLabels on create)
            for key, val in ((LEGACY_UID, uid), (LEGACY_NAME, name), (UID_LABEL, uid), (NAME_LABEL, name)):
                fld = "%s.labels[%s]" % (base, key)
                if key not in labels:
                    errs.append(("FieldValueRequired", fld, "Required value: must be '%s'" % val))
                elif labels[key] != val:
                    errs.append(("FieldValueInvalid", fld, "Invalid value: %s: must be '%s'" % (go_map(labels), val)))
            expected = {LEGACY_UID: uid, LEGACY_NAME: name, UID_LABEL: uid, NAME_LABEL: name}
            if not selector_matches(spec["selector"], expected):
                errs.append(("FieldValueInvalid", "spec.selector",
                             "Invalid value: %s: `selector` not auto-generated" % go_selector(spec["selector"])))
        if spec.get("selector") is None:
            errs.append(("FieldValueRequired", "spec.selector", "Required value"))
        elif not selector_matches(spec["selector"], labels):
            errs.append(("FieldValueInvalid", base + ".labels",
                         "Invalid value: %s: `selector` does not match template `labels`" % go_map(labels)))
        rp = ((tmpl.get("spec") or {}).get("restartPolicy")) or "Always"
        if rp not in ("OnFailure", "Never"):
            errs.append(("FieldValueNotSupported", "spec.template.spec.restartPolicy",
                         'Unsupported value: "%s": supported values: "OnFailure", "Never"' % rp))
        if errs:
            raise invalid_many(rt, name, errs)

    # ---------------------------------------------------------------- deletion
    def on_delete(self, rt, key, entry, obj, opts):
        """DELETE of a Namespace or Pod (store lock held). -> (code, body) when
        handled here, else None."""
        sim = self.sim
        md = obj["metadata"]
        if rt.group == "" and rt.kind == "Namespace" and self.on("namespace"):
            if md.get("deletionTimestamp"):
                return 200, obj
            md["deletionTimestamp"] = now_rfc3339()
            md["deletionGracePeriodSeconds"] = 0
            obj.setdefault("status", {})["phase"] = "Terminating"
            obj, _ = sim._put(rt, key, obj, "MODIFIED", entry)
            self.ns_due[key[1]] = time.time() + self.ns_seconds
            self.wake.notify_all()
            return 200, obj
        if rt.group == "" and rt.kind == "Pod" and self.on("pod"):
            grace = (opts or {}).get("gracePeriodSeconds")
            spec = obj.get("spec") or {}
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds") or 0
            if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                grace = 0
            if md.get("deletionTimestamp"):
                if grace == 0 and not md.get("finalizers"):
                    return 200, sim._del(rt, key, obj)
                return 200, obj
            if grace > 0:
                md["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace))
                md["deletionGracePeriodSeconds"] = grace
                obj, _ = sim._put(rt, key, obj, "MODIFIED", entry)
                self.pod_due[key] = time.time() + min(grace, self.pod_seconds)
                self.wake.notify_all()
                return 200, obj
            if md.get("finalizers"):
                return None
            return 200, sim._del(rt, key, obj)
        return None

    def ns_may_finish(self, ns):
        return not self.on("namespace") or ns in self.ns_cleaning

    # ---------------------------------------------------------------- loop
    def run(self):
        sim = self.sim
        while not self.stop:
            with sim.lock:
                self.wake.wait(0.2)
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - a controller never takes kubesim down
                    import traceback
                    traceback.print_exc()

    def tick(self):
        sim = self.sim
        now = time.time()
        loc = sim.local
        saved = (getattr(loc, "manager", None), getattr(loc, "user_agent", ""), getattr(loc, "sub", None),
                 getattr(loc, "user", None))
        loc.manager, loc.user_agent, loc.sub, loc.user = MANAGER, "kube-controller-manager/v1.32.4", None, None
        loc.applied = None
        try:
            for ns, due in list(self.ns_due.items()):
                if due <= now:
                    del self.ns_due[ns]
                    self._finish_namespace(ns)
            for key, due in list(self.pod_due.items()):
                if due <= now:
                    del self.pod_due[key]
                    st = sim.stores[("", "pods")]
                    e = st.objs.get(key)
                    if e is not None and b'"deletionTimestamp"' in e[0]:
                        o = loads(e[0])
                        if not o["metadata"].get("finalizers"):
                            sim._del(sim.by_rkey[("", "pods")], key, o)
            if self.on("pv") and sim.rv != self.pv_rv:
                if self._volumes_changed():
                    self._sync_volumes()
                self.pv_rv = sim.rv
            if self.snap is not None and self.on("snapshot"):
                self.snap.tick(now)
        finally:
            loc.manager, loc.user_agent, loc.sub, loc.user = saved

    def _finish_namespace(self, ns):
        """The namespace controller: delete the content, then finalize."""
        sim = self.sim
        nrt = sim.by_rkey[("", "namespaces")]
        e = sim.stores[("", "namespaces")].objs.get(("", ns))
        if e is None:
            return
        self.ns_cleaning.add(ns)
        sim._delete_ns_contents(ns)
        e = sim.stores[("", "namespaces")].objs.get(("", ns))
        if e is None:
            return
        o = loads(e[0])
        if (o.get("spec") or {}).get("finalizers") and not any(True for _ in sim._ns_objects(ns)):
            o["spec"]["finalizers"] = []
            if not o["spec"]["finalizers"]:
                o["spec"].pop("finalizers")
            sim._put(nrt, ("", ns), o, "MODIFIED", e)
        sim._maybe_finish_ns(ns)

    def reset(self):
        self.ns_due.clear()
        self.ns_cleaning.clear()
        self.pod_due.clear()
        self.pv_rv = 0

    def forget_namespace(self, ns):
        self.ns_cleaning.discard(ns)
        self.ns_due.pop(ns, None)

    # ---------------------------------------------------------------- PV binder
    def _objs(self, rkey):
        """The objects of one resource, parsed, for reading only: callers copy
        before they change one. A parse is kept while the store holds the same
        bytes (every write stores new ones), so a tick costs a pass over the
        keys, not a parse of every object: the informer cache of the real
        controllers, whose full resyncs walk that cache too."""
        st = self.sim.stores.get(rkey)
        if st is None:
            return {}
        cache = self.parsed.setdefault(rkey, {})
        out = {}
        for k, (d, _) in st.objs.items():
            c = cache.get(k)
            if c is None or c[0] is not d:
                c = cache[k] = (d, loads(d))
            out[k] = c[1]
        if len(cache) > len(out):
            for k in [k for k in cache if k not in out]:
                del cache[k]
        return out

    def _write(self, rkey, key, obj, status_only=False):
        sim = self.sim
        rt = sim.by_rkey[rkey]
        e = sim.stores[rkey].objs.get(key)
        if e is None:
            return obj
        cur = loads(e[0])
        if cur == obj:
            return obj
        sim.local.sub = "status" if status_only else None
        try:
            obj["metadata"].pop("managedFields", None)
            sim._track(rt, cur, obj)        # as kube-controller-manager
            new, _ = sim._put(rt, key, obj, "MODIFIED", e)
        finally:
            sim.local.sub = None
        return new

    def _set_claim(self, key, claim, phase, pv=None):
        st = claim.get("status") or {}
        if st.get("phase") == phase and (pv is None or st.get("capacity") == (pv.get("spec") or {}).get("capacity")):
            return claim
        claim = copy.deepcopy(claim)
        st = claim.setdefault("status", {})
        st["phase"] = phase
        if pv is not None and phase == "Bound":
            st["accessModes"] = (pv.get("spec") or {}).get("accessModes") or []
            if (pv.get("spec") or {}).get("capacity"):
                st["capacity"] = pv["spec"]["capacity"]
        return self._write(("", "persistentvolumeclaims"), key, claim, True)

    def _set_volume(self, name, pv, phase):
        if (pv.get("status") or {}).get("phase") == phase:
            return pv
        pv = copy.deepcopy(pv)
        pv.setdefault("status", {})["phase"] = phase
        pv["status"]["lastPhaseTransitionTime"] = now_rfc3339()
        return self._write(("", "persistentvolumes"), ("", name), pv, True)

    @staticmethod
    def _bound_to(pv, claim):
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref:
            return False
        md = claim["metadata"]
        return (ref.get("name") == md["name"] and ref.get("namespace") == md["namespace"]
                and (not ref.get("uid") or ref.get("uid") == md["uid"]))

    def _bind(self, pv, claim):
        """pv_controller.bind: claimRef on the volume, volumeName and the
        bind-completed annotation on the claim, both Bound."""
        md = claim["metadata"]
        pv = copy.deepcopy(pv)
        name = pv["metadata"]["name"]
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if not (ref.get("name") == md["name"] and ref.get("namespace") == md["namespace"] and ref.get("uid") == md["uid"]):
            if not self._bound_to(pv, claim):
                pv["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
            pv.setdefault("spec", {})["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": md["namespace"],
                                                     "name": md["name"], "uid": md["uid"], "apiVersion": "v1",
                                                     "resourceVersion": md.get("resourceVersion", "")}
            pv = self._write(("", "persistentvolumes"), ("", name), pv)
        pv = self._set_volume(name, pv, "Bound")
        claim = copy.deepcopy(claim)
        ckey = (md["namespace"], md["name"])
        spec = claim.setdefault("spec", {})
        anns = claim["metadata"].setdefault("annotations", {})
        changed = False
        if not spec.get("volumeName"):
            spec["volumeName"] = name
            anns[ANN_BOUND_BY_CONTROLLER] = "yes"
            changed = True
        if anns.get(ANN_BIND_COMPLETED) != "yes":
            anns[ANN_BIND_COMPLETED] = "yes"
            changed = True
        if changed:
            claim = self._write(("", "persistentvolumeclaims"), ckey, claim)
        self._set_claim(ckey, claim, "Bound", pv)

    @staticmethod
    def _satisfies(pv, claim):
        ps, cs = pv.get("spec") or {}, claim.get("spec") or {}
        if (ps.get("storageClassName") or "") != (cs.get("storageClassName") or ""):
            return False
        if (ps.get("volumeMode") or "Filesystem") != (cs.get("volumeMode") or "Filesystem"):
            return False
        if not set(cs.get("accessModes") or []) <= set(ps.get("accessModes") or []):
            return False
        want = ((cs.get("resources") or {}).get("requests") or {}).get("storage")
        have = (ps.get("capacity") or {}).get("storage")
        return want is None or _qty(have) >= _qty(want)

    def _volumes_changed(self):
        """Whether a PV or PVC changed since the binder last looked (the event
        history; when it was trimmed past that point, assume so)."""
        sim = self.sim
        if not sim.hist_rvs or sim.hist_rvs[0] > self.pv_rv + 1:
            return True
        i = bisect.bisect_right(sim.hist_rvs, self.pv_rv)
        for ev in sim.hist[i:]:
            if ev[1] in (("", "persistentvolumes"), ("", "persistentvolumeclaims")):
                return True
        return False

    def _sync_volumes(self):
        for _ in range(4):          # until nothing moves (each pass may bind)
            before = self.sim.rv
            claims = self._objs(("", "persistentvolumeclaims"))
            pvs = self._objs(("", "persistentvolumes"))
            for key, claim in sorted(claims.items()):
                if claim["metadata"].get("deletionTimestamp"):
                    continue
                self._sync_claim(key, claim, pvs)
            pvs = self._objs(("", "persistentvolumes"))
            claims = self._objs(("", "persistentvolumeclaims"))
            for (_, name), pv in sorted(pvs.items()):
                self._sync_volume(name, pv, claims)
            if self.sim.rv == before:
                return

    def _sync_claim(self, key, claim, pvs):
        anns = claim["metadata"].get("annotations") or {}
        vname = (claim.get("spec") or {}).get("volumeName")
        phase = (claim.get("status") or {}).get("phase")
        if phase == "Lost":
            return
        if ANN_BIND_COMPLETED in anns:
            # syncBoundClaim
            pv = pvs.get(("", vname)) if vname else None
            if pv is None:
                self._set_claim(key, claim, "Lost")
            elif not (pv.get("spec") or {}).get("claimRef"):
                self._bind(pv, claim)
            elif pv["spec"]["claimRef"].get("uid") == claim["metadata"]["uid"]:
                self._bind(pv, claim)
            else:
                self._set_claim(key, claim, "Lost")
            return
        # syncUnboundClaim
        if vname:
            pv = pvs.get(("", vname))
            if pv is None:
                self._set_claim(key, claim, "Pending")
            elif not (pv.get("spec") or {}).get("claimRef"):
                if self._satisfies(pv, claim):
                    self._bind(pv, claim)
                else:
                    self._set_claim(key, claim, "Pending")
            elif self._bound_to(pv, claim):
                self._bind(pv, claim)
            else:
                self._set_claim(key, claim, "Pending")
            return
        pre = [pv for pv in pvs.values() if self._bound_to(pv, claim) and self._satisfies(pv, claim)]
        free = sorted((pv for pv in pvs.values() if not (pv.get("spec") or {}).get("claimRef")
                       and (pv.get("status") or {}).get("phase") in (None, "Pending", "Available")
                       and self._satisfies(pv, claim)),
                      key=lambda p: (_qty(((p.get("spec") or {}).get("capacity") or {}).get("storage")),
                                     p["metadata"]["name"]))
        pick = (pre or free or [None])[0]
        if pick is None:
            self._set_claim(key, claim, "Pending")
        else:
            self._bind(pick, claim)

    def _sync_volume(self, name, pv, claims):
        sim = self.sim
        ref = (pv.get("spec") or {}).get("claimRef")
        phase = (pv.get("status") or {}).get("phase")
        if pv["metadata"].get("deletionTimestamp"):
            return
        if not ref or not ref.get("uid"):
            self._set_volume(name, pv, "Available")
            return
        claim = claims.get((ref.get("namespace", ""), ref.get("name", "")))
        if claim is not None and claim["metadata"]["uid"] != ref.get("uid"):
            claim = None
        if claim is None:
            if phase not in ("Released", "Failed"):
                pv = self._set_volume(name, pv, "Released")
            if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
                # the provisioner deletes the volume (and its data)
                rt = sim.by_rkey[("", "persistentvolumes")]
                e = sim.stores[("", "persistentvolumes")].objs.get(("", name))
                if e is not None:
                    o = loads(e[0])
                    if o["metadata"].get("finalizers"):
                        if not o["metadata"].get("deletionTimestamp"):
                            o["metadata"]["deletionTimestamp"] = now_rfc3339()
                            o["metadata"]["deletionGracePeriodSeconds"] = 0
                            sim._put(rt, ("", name), o, "MODIFIED", e)
                    else:
                        sim._del(rt, ("", name), o)
            return
        vname = (claim.get("spec") or {}).get("volumeName")
        if not vname:
            return      # the claim sync binds it
        if vname == name:
            self._set_volume(name, pv, "Bound")
            return
        # bound to a claim that is bound elsewhere: unbindVolume
        pv = copy.deepcopy(pv)
        anns = pv["metadata"].get("annotations") or {}
        if anns.get(ANN_BOUND_BY_CONTROLLER):
            pv["spec"].pop("claimRef", None)
            anns.pop(ANN_BOUND_BY_CONTROLLER, None)
        else:
            pv["spec"]["claimRef"]["uid"] = ""
        pv = self._write(("", "persistentvolumes"), ("", name), pv)
        self._set_volume(name, pv, "Available")

