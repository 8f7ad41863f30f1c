"""The object store and API semantics of kubesim (no HTTP here).

Objects are stored serialized (compact JSON bytes) with their labels, in one
dict per resource keyed by (namespace, name), plus a sorted key list that is
kept sorted lazily.  Every write bumps one global resourceVersion and appends
an event to a bounded history that watchers read."""

import base64
import bisect
import copy
import json
import random
import re
import threading
import time
import uuid

from ks_types import RType, builtin_types, now_rfc3339, parse_ts, format_micro
from ks_select import label_match, field_match
import ks_patch
import ks_validate
import ks_managed

_enc = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_enc_sorted = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode


def dumps(obj):
    return _enc(obj).encode("utf-8")


def encode(rt, obj):
    """An object as the real server writes it: built-ins in Go struct field
    order (normalize), custom resources from Go maps, i.e. keys sorted at
    every level."""
    if rt.custom:
        return _enc_sorted(obj).encode("utf-8")
    return _enc(obj).encode("utf-8")


loads = json.loads

STATUS_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                  405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
                  413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
                  429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                  504: "Timeout"}


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None, meta=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or []
        self.meta = meta or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": self.meta, "status": "Failure",
              "message": self.message}
        if self.reason:
            st["reason"] = self.reason
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(rt, name):
    d = {"name": name}
    if rt.group:
        d["group"] = rt.group
    d["kind"] = rt.plural
    return d


def not_found(rt, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (rt.qualified, name), _details(rt, name))


def already_exists(rt, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (rt.qualified, name), _details(rt, name))


def conflict(rt, name, msg="the object has been modified; please apply your changes to the latest version and try again"):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s' % (rt.qualified, name, msg),
                    _details(rt, name))


def invalid(rt, name, field, detail, reason="FieldValueInvalid", by_resource=False):
    d = {"name": name}
    if rt.group:
        d["group"] = rt.group
    d["kind"] = rt.plural if by_resource else rt.kind
    d["causes"] = [{"reason": reason, "message": detail, "field": field}]
    what = rt.qualified if by_resource else rt.qualified_kind
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s: %s' % (what, name, field, detail), d)


def invalid_many(rt, name, errs, by_resource=False):
    """apierrors.NewInvalid of a field.ErrorList: errs = [(cause reason, field,
    body)] with body as field.Error.ErrorBody() prints it ("Invalid value: ..:
    detail", "Required value", ...). One error: "K "n" is invalid: f: body";
    several: "[f: body, f2: body2]" (utilerrors aggregate)."""
    d = {"name": name}
    if rt.group:
        d["group"] = rt.group
    d["kind"] = rt.plural if by_resource else rt.kind
    d["causes"] = [{"reason": r, "message": b, "field": f} for r, f, b in errs]
    what = rt.qualified if by_resource else rt.qualified_kind
    texts = []
    for _, f, b in errs:
        t = "%s: %s" % (f, b) if f else b
        if t not in texts:
            texts.append(t)
    agg = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (what, name, agg), d)


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"

META_ORDER = ["name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
              "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
              "annotations", "ownerReferences", "finalizers", "managedFields"]


def normalize(obj):
    """Field order as the Go structs print it: apiVersion, kind, metadata, ..., status."""
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind")}
    md = obj.get("metadata") or {}
    m = {k: md[k] for k in META_ORDER if k in md}
    for k, v in md.items():
        if k not in m:
            m[k] = v
    out["metadata"] = m
    for k, v in obj.items():
        if k not in ("apiVersion", "kind", "metadata", "status"):
            out[k] = v
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def _skey(k):
    """The order etcd keeps objects in: by the bytes of "namespace/name" (the
    key under /registry/RESOURCE/), not by the (namespace, name) tuple: "a-b/x"
    comes before "a/x"."""
    return (k[0] + "/", k[1])


class RStore:
    """One resource: dict (ns, name) -> (json bytes, labels), key list sorted as
    etcd sorts (lazily)."""
    __slots__ = ("objs", "keys", "unsorted")

    def __init__(self):
        self.objs = {}
        self.keys = []
        self.unsorted = False

    def put(self, k, v):
        objs = self.objs
        if k not in objs:
            keys = self.keys
            if not keys or _skey(k) > _skey(keys[-1]):
                keys.append(k)
            elif not self.unsorted and len(keys) < 20000:
                bisect.insort(keys, k, key=_skey)
            else:
                keys.append(k)
                self.unsorted = True
        objs[k] = v

    def ensure_sorted(self):
        if self.unsorted:
            self.keys.sort(key=_skey)
            self.unsorted = False

    def remove(self, k):
        del self.objs[k]
        self.ensure_sorted()
        i = bisect.bisect_left(self.keys, _skey(k), key=_skey)
        if i < len(self.keys) and self.keys[i] == k:
            del self.keys[i]

    def ns_range(self, ns):
        self.ensure_sorted()
        if ns is None:
            return 0, len(self.keys)
        return (bisect.bisect_left(self.keys, (ns + "/",), key=_skey),
                bisect.bisect_left(self.keys, (ns + "/\x00",), key=_skey))

    def after(self, k):
        """Index of the first key after k (a continue token's start)."""
        self.ensure_sorted()
        return bisect.bisect_right(self.keys, _skey(k), key=_skey)


def version_key(v):
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (0, 0, 0, v)
    lvl = {"alpha": 1, "beta": 2, None: 3}[m.group(2)]
    return (lvl, int(m.group(1)), int(m.group(3) or 0), "")


def _crd_scale(v):
    sc = (v.get("subresources") or {}).get("scale")
    if not isinstance(sc, dict):
        return False
    return (sc.get("specReplicasPath", ".spec.replicas"), sc.get("statusReplicasPath", ".status.replicas"),
            sc.get("labelSelectorPath"))


def _dget(obj, path):
    for p in path.strip(".").split("."):
        obj = obj.get(p) if isinstance(obj, dict) else None
    return obj


def _dset(obj, path, value):
    parts = path.strip(".").split(".")
    for p in parts[:-1]:
        if not isinstance(obj.get(p), dict):
            obj[p] = {}
        obj = obj[p]
    obj[parts[-1]] = value


def scale_of(rt, obj):
    sp, stp, selp = rt.scale
    md = obj["metadata"]
    m = {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md}
    st = {"replicas": _dget(obj, stp) or 0}
    if selp:
        sel = _dget(obj, selp)
        if sel:
            st["selector"] = sel
    else:
        ml = _dget(obj, ".spec.selector.matchLabels") or {}
        if ml:
            st["selector"] = ",".join("%s=%s" % kv for kv in sorted(ml.items()))
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": m,
            "spec": {"replicas": _dget(obj, sp) or 0}, "status": st}


class Watcher:
    def __init__(self, rt, ns, lsel, fsel):
        self.rt = rt
        self.ns = ns
        self.lsel = lsel
        self.fsel = fsel
        self.rv = 0
        self.initial = []
        self.expired = None

    def matches(self, ns, name, data, labels):
        if self.lsel and not label_match(self.lsel, labels):
            return False
        if self.fsel and not field_match(self.fsel, ns, name, lambda: loads(data)):
            return False
        return True

    def convert(self, ev):
        """History event -> (type, object bytes) or None."""
        rv, rkey, ens, name, etype, data, labels, old_data, old_labels = ev
        if rkey != self.rt.rkey or (self.ns is not None and ens != self.ns):
            return None
        if etype != "MODIFIED":
            return (etype, data) if self.matches(ens, name, data, labels) else None
        nm = self.matches(ens, name, data, labels)
        om = self.matches(ens, name, old_data, old_labels)
        if nm and om:
            return ("MODIFIED", data)
        if nm:
            return ("ADDED", data)
        if om:
            o = loads(old_data)
            o["metadata"]["resourceVersion"] = str(rv)
            return ("DELETED", dumps(o))
        return None


class Sim:
    def __init__(self, history=10000, continue_ttl=300.0):
        self.lock = threading.RLock()
        # Conditions on self.lock that a write of their resources notifies
        # ((group, plural) -> [Condition]; reset and compact notify all): a
        # watch or a controller wakes for its own resources, not for each
        # write of a restore of 31k Secrets.
        self.wakers = {}
        self.all_wakers = []
        self.watch_conds = {}   # (group, plural) -> the Condition its watches wait on
        self.rv = 0
        self.hist_max = max(100, history)
        # etcd compaction: continue tokens and watch history older than this
        # (seconds) are gone (0: never)
        self.ttl = float(continue_ttl or 0)
        self.watchers = 0
        self.rbac_gen = 0       # bumped by every write of an RBAC object (authorizer cache key)
        self.admit_hook = None  # fn(rt, ns, new, old) for RBAC writes (ks_rbac escalation check)
        self.psa_hook = None    # fn(rt, ns, new, old, subresource) before any create/update (ks_psa)
        # Admission plugins (ks_psa and the like): fn(op, rt, ns, obj, old) with op
        # "CREATE" or "UPDATE", obj the object about to be stored (defaulted, dict),
        # old the stored one (UPDATE) or None; raise ApiError to refuse. They run
        # after kubesim's own validation, before the commit, on dry runs too.
        # The request's attributes are in self.local (set by the HTTP layer):
        # user (token NAME or None), manager (field manager), sub (subresource).
        self.admission = []
        self.local = threading.local()
        self.ctl = None         # ks_controllers.Controllers: strategies, deletion, binder
        self._init_state()

    # ------------------------------------------------------------ setup
    def _init_state(self):
        self.rbac_gen += 1
        self._schema_cache = {}  # (CRD name, version) -> (stored CRD bytes, schema)
        self.types = {}       # (group, version, plural) -> RType
        self.by_rkey = {}     # (group, plural) -> RType (storage version)
        self.by_gvk = {}      # (apiVersion, kind) -> RType
        self.stores = {}      # (group, plural) -> RStore
        self.hist = []
        self.hist_rvs = []
        self.hist_times = []
        self.watch_floor = self.rv
        self.compact_rv = self.rv
        self.cluster_ips = set()
        for rt in builtin_types():
            self._add_type(rt)
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.by_rkey[("", "namespaces")], None,
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def reset(self):
        with self.lock:
            self.rv += 1
            if self.ctl is not None:
                self.ctl.reset()
            self._init_state()
            self.watch_floor = self.rv
            self.compact_rv = self.rv
            self._wake_all()

    def compact(self):
        """Forget the event history: every RV and continue token issued so far becomes too old."""
        with self.lock:
            self.rv += 1
            self.hist = []
            self.hist_rvs = []
            self.hist_times = []
            self.watch_floor = self.rv
            self.compact_rv = self.rv
            self._wake_all()
            return self.rv

    def waker(self, rkeys):
        """A Condition on self.lock notified by every write of one of rkeys
        ((group, plural) pairs), and by reset and compact."""
        c = threading.Condition(self.lock)
        with self.lock:
            for rk in rkeys:
                self.wakers.setdefault(rk, []).append(c)
            self.all_wakers.append(c)
        return c

    def _wake_all(self):
        for c in self.all_wakers:
            c.notify_all()

    def _add_type(self, rt):
        self.types[(rt.group, rt.version, rt.plural)] = rt
        self.by_gvk[(rt.api_version, rt.kind)] = rt
        if rt.virtual or rt.alias:
            return
        cur = self.by_rkey.get(rt.rkey)
        if cur is None or rt.version == rt.versions[0]:
            self.by_rkey[rt.rkey] = rt
        self.stores.setdefault(rt.rkey, RStore())

    def _admit(self, op, rt, ns, obj, old):
        for fn in self.admission:
            fn(op, rt, ns, obj, old)

    def lookup(self, group, version, plural):
        return self.types.get((group, version, plural))

    # ------------------------------------------------------------ helpers
    def _store(self, rt):
        return self.stores[rt.rkey]

    def _key(self, rt, ns, name):
        return (ns if rt.namespaced else "", name)

    def _record(self, rv, rt, key, etype, data, labels, old_data=None, old_labels=None):
        if rt.group == "rbac.authorization.k8s.io":
            self.rbac_gen += 1
        self.hist.append((rv, rt.rkey, key[0] if rt.namespaced else None, key[1], etype, data, labels,
                          old_data, old_labels))
        self.hist_rvs.append(rv)
        now = time.time()
        self.hist_times.append(now)
        if len(self.hist) > 2 * self.hist_max:
            self._trim(len(self.hist) - self.hist_max)
        elif self.ttl and self.hist_times[0] < now - self.ttl:
            self._trim_old(now)
        for c in self.wakers.get(rt.rkey, ()):
            c.notify_all()

    def _trim(self, cut):
        self.watch_floor = self.hist_rvs[cut - 1]
        del self.hist[:cut]
        del self.hist_rvs[:cut]
        del self.hist_times[:cut]

    def _trim_old(self, now=None):
        """Forget the events older than the compaction interval: a watch from
        before them gets 410 (the real watch cache and etcd forget by time)."""
        if not self.ttl or not self.hist_times:
            return
        cut = bisect.bisect_left(self.hist_times, (now or time.time()) - self.ttl)
        if cut:
            self._trim(cut)

    def _put(self, rt, key, obj, etype, old_entry=None):
        """Commit obj (dict). Bumps RV, stores, records event. Returns stored bytes."""
        self.rv += 1
        rv = self.rv
        obj["metadata"]["resourceVersion"] = str(rv)
        obj = normalize(obj)
        data = encode(rt, obj)
        labels = obj["metadata"].get("labels") or None
        self._store(rt).put(key, (data, labels))
        if old_entry is not None:
            self._record(rv, rt, key, etype, data, labels, old_entry[0], old_entry[1])
        else:
            self._record(rv, rt, key, etype, data, labels)
        return obj, data

    def _del(self, rt, key, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        data = encode(rt, obj)
        self._store(rt).remove(key)
        self._record(self.rv, rt, key, "DELETED", data, obj["metadata"].get("labels") or None)
        if rt.kind == "CustomResourceDefinition":
            self._unregister_crd(obj)
        if rt.kind == "Namespace" and self.ctl is not None:
            self.ctl.forget_namespace(key[1])
        if rt.namespaced:
            self._maybe_finish_ns(key[0])
        if rt.kind == "Service":
            self.cluster_ips.discard((obj.get("spec") or {}).get("clusterIP"))
        return obj

    def _ns_check(self, rt, ns, for_create=True, name=None):
        if not rt.namespaced:
            return
        e = self.stores[("", "namespaces")].objs.get(("", ns))
        if e is None:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns, {"name": ns, "kind": "namespaces"})
        if for_create and b'"deletionTimestamp"' in e[0]:
            # NamespaceLifecycle admission: admission.NewForbidden names the object
            # (its name, else generateName, else "Unknown") and adds the cause
            name = name or "Unknown"
            d = {"name": name}
            if rt.group:
                d["group"] = rt.group
            d["kind"] = rt.plural
            d["causes"] = [{"reason": "NamespaceTerminating", "message": "namespace %s is being terminated" % ns,
                            "field": "metadata.namespace"}]
            raise ApiError(403, "Forbidden",
                           "%s \"%s\" is forbidden: unable to create new content in namespace %s because it is being terminated"
                           % (rt.qualified, name, ns), d)

    def _body_meta(self, rt, ns, body, url_name=None):
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml")
        av, kind = body.get("apiVersion"), body.get("kind")
        if av and av != rt.api_version and not (rt.group and av.split("/")[0] == rt.group and av.split("/")[-1] in rt.versions):
            raise bad_request("the API version in the data (%s) does not match the expected API version (%s)" % (av, rt.api_version))
        if kind and kind != rt.kind:
            raise bad_request("the kind in the data (%s) does not match the expected kind (%s)" % (kind, rt.kind))
        body["apiVersion"] = rt.api_version
        body["kind"] = rt.kind
        md = body.get("metadata")
        if md is None:
            md = body["metadata"] = {}
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            bns = md.get("namespace")
            if bns and ns and bns != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if url_name is not None and md.get("name") and md["name"] != url_name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (md["name"], url_name))
        self.local.req_managed = md.pop("managedFields", None)
        md.pop("selfLink", None)
        return md

    def _type_fixups(self, rt, obj, old=None):
        """Per-type defaulting/normalisation done by the real registry strategies."""
        k = rt.kind
        if rt.custom:
            self._custom_resource(rt, obj, old)
            return
        if k == "Secret":
            sd = obj.pop("stringData", None)
            if isinstance(sd, dict):
                data = obj.setdefault("data", {}) or {}
                for kk, vv in sd.items():
                    data[kk] = base64.b64encode(str(vv).encode()).decode()
                obj["data"] = data
            obj.setdefault("type", "Opaque")
        elif k == "Lease":
            spec = obj.get("spec")
            if isinstance(spec, dict):
                for f in ("acquireTime", "renewTime"):
                    if spec.get(f) is not None:
                        p = parse_ts(spec[f])
                        if p is None:
                            raise bad_request('Lease in version "v1" cannot be handled as a Lease: parsing time "%s" as '
                                              '"2006-01-02T15:04:05.000000Z07:00": cannot parse' % spec[f])
                        spec[f] = format_micro(*p)
        elif k == "Service":
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if old is not None:
                oip = (old.get("spec") or {}).get("clusterIP")
                if not spec.get("clusterIP") and oip:
                    spec["clusterIP"] = oip
                    spec.setdefault("clusterIPs", (old.get("spec") or {}).get("clusterIPs") or [oip])
                elif spec.get("clusterIP") != oip:
                    raise invalid(rt, obj["metadata"]["name"], "spec.clusterIP",
                                  'Invalid value: "%s": field is immutable' % spec.get("clusterIP"))
            elif spec["type"] != "ExternalName":
                ip = spec.get("clusterIP")
                if not ip:
                    while True:
                        ip = "10.96.%d.%d" % (random.randint(0, 255), random.randint(1, 254))
                        if ip not in self.cluster_ips:
                            break
                    spec["clusterIP"] = ip
                    spec["clusterIPs"] = [ip]
                elif ip != "None":
                    if ip in self.cluster_ips:
                        raise invalid(rt, obj["metadata"]["name"], "spec.clusterIPs",
                                      'Invalid value: []string{"%s"}: failed to allocate IP %s: provided IP is already allocated' % (ip, ip))
                    spec.setdefault("clusterIPs", [ip])
                if ip != "None":
                    self.cluster_ips.add(ip)
            spec.setdefault("sessionAffinity", "None")
            for p in spec.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")
                    if "port" in p:
                        p.setdefault("targetPort", p["port"])
        elif k == "CustomResourceDefinition":
            self._validate_crd(rt, obj)
        elif k == "Event" and rt.group == "":
            errs = ks_validate.event_errors(obj, obj["metadata"].get("namespace", ""))
            if errs:
                raise invalid_many(rt, obj["metadata"].get("name", ""), errs)
        elif k == "Namespace" and old is None:
            # namespace strategy PrepareForCreate: the "kubernetes" finalizer
            spec = obj.get("spec")
            if not isinstance(spec, dict):
                spec = obj["spec"] = {}
            fins = spec.get("finalizers")
            if not isinstance(fins, list):
                fins = []
            if "kubernetes" not in fins:
                fins.append("kubernetes")
            spec["finalizers"] = fins
        if self.ctl is not None:
            self.ctl.prepare(rt, obj, old)

    # ------------------------------------------------------------ managedFields
    def _track(self, rt, old, new, provided=None):
        """Record the write in new's metadata.managedFields (ks_managed) for the
        request's field manager; a server-side apply conflict is 409."""
        loc = self.local
        manager = getattr(loc, "manager", None)
        if manager is None:
            manager = ks_managed.manager_from_user_agent(getattr(loc, "user_agent", ""))
        applied = getattr(loc, "applied", None)
        schema = self._cr_schema(rt) if rt.custom else None
        try:
            ks_managed.track(rt, schema, old, new, provided, manager, "Apply" if applied is not None else "Update",
                             getattr(loc, "sub", None), applied, getattr(loc, "force", False))
        except ks_managed.Conflict as c:
            causes, by = [], {}
            for mgr, op, av, sub, path in c.conflicts:
                # printManager: Update managers name their apiVersion
                who = '"%s"' % mgr + (' with subresource "%s"' % sub if sub else "") + (
                    " using %s" % av if op == "Update" else "")
                causes.append({"reason": "FieldManagerConflict", "message": "conflict with " + who,
                               "field": ks_managed.path_string(path)})
                by.setdefault(who, []).append(ks_managed.path_string(path))
            if len(causes) == 1:
                msg = "Apply failed with 1 conflict: %s: %s" % (causes[0]["message"], causes[0]["field"])
            else:
                parts = []
                for who in sorted(by):
                    parts.append("conflicts with %s:" % who)
                    parts.extend("- " + p for p in by[who])
                msg = "Apply failed with %d conflicts: %s" % (len(causes), "\n".join(parts))
            raise ApiError(409, "Conflict", msg, {"causes": causes})

    # ------------------------------------------------------------ custom resources
    def _cr_schema(self, rt):
        """The openAPIV3Schema of rt's version in its CRD (None: none)."""
        e = self.stores[("apiextensions.k8s.io", "customresourcedefinitions")].objs.get(("", rt.crd_name))
        if e is None:
            return None
        hit = self._schema_cache.get((rt.crd_name, rt.version))
        if hit is not None and hit[0] is e[0]:
            return hit[1]
        crd = loads(e[0])
        schema = None
        for v in (crd.get("spec") or {}).get("versions") or []:
            if v.get("name") == rt.version:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
        self._schema_cache[(rt.crd_name, rt.version)] = (e[0], schema)
        return schema

    def _custom_resource(self, rt, obj, old):
        """Prune undeclared fields (a warning per field, or 400 with
        fieldValidation=Strict), apply defaults, validate (422)."""
        schema = self._cr_schema(rt)
        if schema is None:
            return
        unknown = []
        ks_validate.prune(schema, obj, "", unknown, root=True)
        mode = getattr(self.local, "field_validation", None) or "Warn"
        if unknown:
            if mode == "Strict":
                raise bad_request('%s in version "%s" cannot be handled as a %s: strict decoding error: %s'
                                  % (rt.kind, rt.version, rt.kind,
                                     ", ".join('unknown field "%s"' % u for u in unknown)))
            if mode == "Warn":
                w = getattr(self.local, "warnings", None)
                if w is not None:
                    w.extend('unknown field "%s"' % u for u in unknown)
        errs = ks_validate.cr_errors(schema, obj, old)
        if errs:
            raise invalid_many(rt, obj["metadata"].get("name", ""), errs)

    # ------------------------------------------------------------ CRDs
    def _validate_crd(self, rt, obj):
        name = obj["metadata"].get("name", "")
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group")
        if not group:
            raise invalid(rt, name, "spec.group", "Required value")
        if not names.get("plural"):
            raise invalid(rt, name, "spec.names.plural", "Required value")
        if not names.get("kind"):
            raise invalid(rt, name, "spec.names.kind", "Required value")
        if name != names["plural"] + "." + group:
            raise invalid(rt, name, "metadata.name",
                          'Invalid value: "%s": must be spec.names.plural+"."+spec.group' % name)
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            raise invalid(rt, name, "spec.scope", 'Unsupported value: "%s": supported values: "Cluster", "Namespaced"'
                          % spec.get("scope"), "FieldValueNotSupported")
        vers = spec.get("versions") or []
        if not vers:
            raise invalid(rt, name, "spec.versions", "Invalid value: null: must have exactly one version marked as storage version")
        if sum(1 for v in vers if v.get("storage")) != 1:
            raise invalid(rt, name, "spec.versions", "Invalid value: must have exactly one version marked as storage version")
        errs = ks_validate.crd_errors(spec)
        if errs:
            raise invalid_many(rt, name, errs)
        for b in self.types.values():
            if b.group == group and b.plural == names["plural"] and b.crd_name != name:
                raise invalid(rt, name, "spec.names.plural", 'Invalid value: "%s": already in use' % names["plural"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        ts = now_rfc3339()
        st = obj.get("status") or {}
        conds = {c.get("type"): c for c in st.get("conditions") or [] if isinstance(c, dict)}
        st["conditions"] = [
            conds.get("NamesAccepted") or {"type": "NamesAccepted", "status": "True", "lastTransitionTime": ts,
                                           "reason": "NoConflicts", "message": "no conflicts found"},
            conds.get("Established") or {"type": "Established", "status": "True", "lastTransitionTime": ts,
                                         "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ]
        st["acceptedNames"] = dict(names)
        stored = [v["name"] for v in vers if v.get("storage")]
        st["storedVersions"] = sorted(set((st.get("storedVersions") or []) + stored))
        obj["status"] = st

    def _register_crd(self, obj):
        self._unregister_crd(obj, keep_objects=True)
        spec = obj["spec"]
        names = spec["names"]
        vers = [v for v in spec.get("versions") or [] if v.get("served", True)]
        storage = next((v for v in spec["versions"] if v.get("storage")), vers[0] if vers else None)
        order = [v["name"] for v in sorted(vers, key=lambda v: version_key(v["name"]), reverse=True)]
        for v in vers:
            rt = RType(spec["group"], v["name"], names["plural"], names["kind"], spec.get("scope") == "Namespaced",
                       names.get("shortNames") or [], "s" if (v.get("subresources") or {}).get("status") is not None else "",
                       custom=True, singular=names.get("singular"), list_kind=names.get("listKind"),
                       categories=names.get("categories") or [], columns=v.get("additionalPrinterColumns"),
                       crd_name=obj["metadata"]["name"], versions=order, scale=_crd_scale(v))
            self.types[(rt.group, rt.version, rt.plural)] = rt
            self.by_gvk[(rt.api_version, rt.kind)] = rt
            if storage is not None and v["name"] == storage["name"]:
                self.by_rkey[rt.rkey] = rt
            elif rt.rkey not in self.by_rkey:
                self.by_rkey[rt.rkey] = rt
            self.stores.setdefault(rt.rkey, RStore())

    def _unregister_crd(self, obj, keep_objects=False):
        name = obj["metadata"]["name"]
        gone = [k for k, rt in self.types.items() if rt.crd_name == name]
        rkey = None
        for k in gone:
            rt = self.types.pop(k)
            rkey = rt.rkey
            self.by_gvk.pop((rt.api_version, rt.kind), None)
        if rkey is None:
            return
        srt = self.by_rkey.pop(rkey, None)
        if keep_objects:
            return
        st = self.stores.pop(rkey, None)
        if st and srt:
            self.stores[rkey] = st
            st.ensure_sorted()
            for key in list(st.keys):
                o = loads(st.objs[key][0])
                self.rv += 1
                o["metadata"]["resourceVersion"] = str(self.rv)
                st.remove(key)
                self._record(self.rv, srt, key, "DELETED", dumps(o), o["metadata"].get("labels") or None)
            del self.stores[rkey]

    # ------------------------------------------------------------ namespaces
    def _ns_objects(self, ns):
        for rkey, st in self.stores.items():
            rt = self.by_rkey.get(rkey)
            if rt is None or not rt.namespaced:
                continue
            lo, hi = st.ns_range(ns)
            for i in range(lo, hi):
                yield rt, st.keys[i]

    def _maybe_finish_ns(self, ns):
        if self.ctl is not None and not self.ctl.ns_may_finish(ns):
            return
        nst = self.stores[("", "namespaces")]
        e = nst.objs.get(("", ns))
        if e is None or b'"deletionTimestamp"' not in e[0]:
            return
        o = loads(e[0])
        if o["metadata"].get("finalizers"):
            return
        for _ in self._ns_objects(ns):
            return
        self._del(self.by_rkey[("", "namespaces")], ("", ns), o)

    def _delete_ns_contents(self, ns):
        for rt, key in list(self._ns_objects(ns)):
            e = self._store(rt).objs.get(key)
            if e is None:
                continue
            o = loads(e[0])
            md = o["metadata"]
            if md.get("finalizers"):
                if not md.get("deletionTimestamp"):
                    md["deletionTimestamp"] = now_rfc3339()
                    md["deletionGracePeriodSeconds"] = 0
                    self._put(rt, key, o, "MODIFIED", e)
            else:
                self.rv += 1
                md["resourceVersion"] = str(self.rv)
                self._store(rt).remove(key)
                self._record(self.rv, rt, key, "DELETED", dumps(o), md.get("labels") or None)

    # ------------------------------------------------------------ reads
    def get(self, rt, ns, name):
        with self.lock:
            e = self._store(rt).objs.get(self._key(rt, ns, name))
        if e is None:
            raise not_found(rt, name)
        return e[0]

    def list(self, rt, ns, lsel, fsel, limit=0, cont=None):
        """-> (list metadata dict, [bytes])"""
        with self.lock:
            st = self._store(rt)
            lo, hi = st.ns_range(ns if rt.namespaced else None)
            list_rv = self.rv
            pos = lo
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
                    trv = int(tok["rv"])
                    rel = tok["start"]
                    start = self._token_key(rt, ns, rel)
                    issued = float(tok.get("t", 0))
                except Exception:
                    raise bad_request("continue key is not valid: illegal base64 data")
                if trv != -1 and (trv < self.compact_rv or (self.ttl and time.time() - issued > self.ttl)):
                    # etcd compacted the snapshot: the storage's
                    # handleCompactedErrorForPaging answers with a token at
                    # resourceVersion -1 (continue at the latest, inconsistently)
                    newtok = self._token(-1, rel, 0)
                    raise ApiError(410, "Expired",
                                   "The provided continue parameter is too old to display a consistent list result. "
                                   "You can start a new list without the continue parameter, or use the continue token "
                                   "in this response to retrieve the remainder of the results. Continuing with the "
                                   "provided token results in an inconsistent list - objects that were created, modified, "
                                   "or deleted between the time the first chunk was returned and now may show up in the list.",
                                   meta={"continue": newtok})
                pos = max(lo, st.after(start))
                if trv != -1:
                    list_rv = trv
                else:
                    issued = time.time()
            else:
                issued = time.time()
            keys, objs = st.keys, st.objs
            filt = bool(lsel or fsel)
            items = []
            i = pos
            last = None
            while i < hi:
                k = keys[i]
                i += 1
                data, labels = objs[k]
                if filt:
                    if lsel and not label_match(lsel, labels):
                        continue
                    if fsel and not field_match(fsel, k[0] if rt.namespaced else None, k[1], lambda: loads(data)):
                        continue
                items.append(data)
                if limit and len(items) >= limit:
                    last = k
                    break
            meta = {"resourceVersion": str(list_rv)}
            if last is not None and i < hi:
                meta["continue"] = self._token(list_rv, self._token_rel(rt, ns, last), issued)
                if not filt:
                    meta["remainingItemCount"] = hi - i
        return meta, items

    @staticmethod
    def _token_rel(rt, ns, k):
        """A token's start key as the real one holds it: relative to the
        list's key prefix (storage.EncodeContinue trims keyPrefix), so
        "ns/name" for a list across namespaces, "name" for a namespace's."""
        return "%s/%s" % k if rt.namespaced and ns is None else k[1]

    @staticmethod
    def _token_key(rt, ns, rel):
        """The (ns, name) key a token's relative start means for this list
        (storage.DecodeContinue: keyPrefix + start): a token of another
        list's path lands where its bytes fall in this one, as in etcd."""
        if not isinstance(rel, str):
            raise ValueError("start")
        if not rt.namespaced:
            return ("", rel)
        full = rel if ns is None else ns + "/" + rel
        a, sep, b = full.partition("/")
        return (a, b) if sep else (full, "")

    @staticmethod
    def _token(rv, start, issued):
        """A continue token: opaque to clients. Besides what the real one holds
        (version, resourceVersion, start key) it carries when its snapshot was
        listed, for expiry: real clusters write all the time (leases), so etcd
        compaction catches up with a snapshot about one interval after it."""
        tok = {"v": "meta.k8s.io/v1", "rv": rv, "start": start}
        if rv != -1:
            tok["t"] = round(issued, 3)
        raw = json.dumps(tok, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    # ------------------------------------------------------------ create
    def create(self, rt, ns, body, dry_run=False):
        """-> (code, obj dict or its JSON bytes)"""
        with self.lock:
            md = self._body_meta(rt, ns, body)
            if rt.namespaced and not ns:
                raise bad_request("the server could not find the requested resource")
            self._ns_check(rt, ns, name=md.get("name") or md.get("generateName"))
            name = md.get("name")
            errs = []
            gn = md.get("generateName")
            if gn:
                errs += ks_validate.name_errors(rt, gn, "metadata.generateName", prefix=True)
            if not name:
                if not gn:
                    raise invalid(rt, "", "metadata.name", "Required value: name or generateName is required", "FieldValueRequired")
                for _ in range(20):
                    name = gn[:58] + "".join(random.choice(_GEN_CHARS) for _ in range(5))
                    if self._key(rt, ns, name) not in self._store(rt).objs:
                        break
                md["name"] = name
            errs += ks_validate.name_errors(rt, name)
            errs += ks_validate.meta_errors(md)
            if errs:
                raise invalid_many(rt, name, errs)
            key = self._key(rt, ns, name)
            if key in self._store(rt).objs:
                raise already_exists(rt, name)
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            md.pop("deletionTimestamp", None)
            md.pop("deletionGracePeriodSeconds", None)
            md.pop("resourceVersion", None)
            if rt.has_generation:
                md["generation"] = 1
            else:
                md.pop("generation", None)
            if rt.has_status and not rt.keep_status:
                body.pop("status", None)
                if rt.kind == "Namespace":
                    body["status"] = {"phase": "Active"}
                elif rt.kind in ("Pod", "PersistentVolumeClaim", "PersistentVolume"):
                    body["status"] = {"phase": "Pending"}
            self._type_fixups(rt, body)
            if self.admit_hook is not None and rt.group == "rbac.authorization.k8s.io":
                self.admit_hook(rt, ns, body, None)
            if self.psa_hook is not None:
                self.psa_hook(rt, ns, body, None, None)
            if self.admission:
                self._admit("CREATE", rt, ns, body, None)
            self._track(rt, None, body, getattr(self.local, "req_managed", None))
            if rt.kind == "CustomResourceDefinition" and not dry_run:
                self._register_crd(body)
            if dry_run:
                body["metadata"]["resourceVersion"] = str(self.rv)
                return 201, normalize(body)
            _, data = self._put(rt, key, body, "ADDED")
            return 201, data        # the stored bytes: the handler sends them as they are

    # ------------------------------------------------------------ update
    def _merge_update(self, rt, old, new, sub):
        """Combine the stored object and the incoming one per the status subresource rules."""
        if sub == "status":
            res = copy.deepcopy(old)
            if "status" in new:
                res["status"] = new["status"]
            else:
                res.pop("status", None)
            return res
        res = new
        md, omd = res["metadata"], old["metadata"]
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if f in omd:
                md[f] = omd[f]
            else:
                md.pop(f, None)
        if rt.has_status:
            if "status" in old:
                res["status"] = old["status"]
            else:
                res.pop("status", None)
        return res

    def _finish_update(self, rt, key, old_entry, old, res, dry_run):
        """Generation, no-op detection, finalizer-driven deletion, commit. -> (code, obj)"""
        md, omd = res["metadata"], old["metadata"]
        name = omd["name"]
        md["name"] = name
        errs = ks_validate.meta_errors(md)
        if errs:
            raise invalid_many(rt, name, errs)
        if self.admit_hook is not None and rt.group == "rbac.authorization.k8s.io":
            self.admit_hook(rt, key[0] if rt.namespaced else None, res, old)
        if self.admission:
            self._admit("UPDATE", rt, key[0] if rt.namespaced else None, res, old)
        if rt.namespaced:
            md["namespace"] = omd["namespace"]
        if rt.has_generation:
            strip = ("metadata", "status") if rt.has_status else ("metadata",)
            a = {k: v for k, v in old.items() if k not in strip}
            b = {k: v for k, v in res.items() if k not in strip}
            md["generation"] = omd.get("generation", 1) + (1 if a != b else 0)
        if rt.kind == "Namespace" and omd.get("deletionTimestamp"):
            res.setdefault("status", {})["phase"] = "Terminating"
        md["resourceVersion"] = omd.get("resourceVersion")
        if not md.get("labels"):
            md.pop("labels", None)
        if not md.get("annotations"):
            md.pop("annotations", None)
        if not md.get("finalizers"):
            md.pop("finalizers", None)
        md.pop("managedFields", None)
        self._track(rt, old, res, getattr(self.local, "req_managed", None))
        res = normalize(res)
        if res == normalize(old):
            return 200, res
        if dry_run:
            return 200, res
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            if rt.kind == "CustomResourceDefinition":
                pass
            obj = self._del(rt, key, res)
            return 200, obj
        if rt.kind == "CustomResourceDefinition":
            self._register_crd(res)
        obj, _ = self._put(rt, key, res, "MODIFIED", old_entry)
        return 200, obj

    def update(self, rt, ns, name, body, sub=None, dry_run=False):
        with self.lock:
            if sub == "scale":
                key = self._key(rt, ns, name)
                e = self._store(rt).objs.get(key)
                if e is None:
                    raise not_found(rt, name)
                old = loads(e[0])
                if not isinstance(body, dict):
                    raise bad_request("invalid Scale body")
                rv = (body.get("metadata") or {}).get("resourceVersion")
                if rv and rv != old["metadata"]["resourceVersion"]:
                    raise conflict(rt, name)
                return self._scale_write(rt, key, e, old, body, dry_run)
            md = self._body_meta(rt, ns, body, name)
            if not md.get("name"):
                md["name"] = name
            key = self._key(rt, ns, name)
            st = self._store(rt)
            e = st.objs.get(key)
            rv = md.get("resourceVersion")
            if e is None:
                if rt.create_on_update and sub is None:
                    return self.create(rt, ns, body, dry_run)
                raise not_found(rt, name)
            old = loads(e[0])
            if not rv:
                if rt.requires_rv:
                    # the generic registry builds this error with the resource as "kind"
                    # (GroupKind{Group, Kind: resource}): 'leases.coordination.k8s.io "l" is invalid: ...'
                    raise invalid(rt, name, "metadata.resourceVersion",
                                  "Invalid value: 0x0: must be specified for an update", by_resource=True)
            elif rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            uid = md.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                               % (old["metadata"]["uid"], uid))
            res = self._merge_update(rt, old, body, sub)
            self._type_fixups(rt, res, old)
            if self.psa_hook is not None:
                self.psa_hook(rt, ns, res, old, sub)
            return self._finish_update(rt, key, e, old, res, dry_run)

    def _scale_write(self, rt, key, e, old, scale, dry_run):
        n = (scale.get("spec") or {}).get("replicas")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise invalid(rt, old["metadata"]["name"], "spec.replicas", "Invalid value: %s: must be greater than or equal to 0" % json.dumps(n))
        res = copy.deepcopy(old)
        _dset(res, rt.scale[0], n)
        code, obj = self._finish_update(rt, key, e, old, res, dry_run)
        return code, scale_of(rt, obj)

    def get_scale(self, rt, ns, name):
        return scale_of(rt, loads(self.get(rt, ns, name)))

    # ------------------------------------------------------------ patch
    def patch(self, rt, ns, name, ptype, patch, sub=None, dry_run=False, view=None):
        """view: (to, back) converters when the patch is written against another
        representation of the stored object (events.k8s.io events)."""
        self.local.applied = copy.deepcopy(patch) if ptype == "apply" and isinstance(patch, dict) else None
        try:
            return self._patch(rt, ns, name, ptype, patch, sub, dry_run, view)
        finally:
            self.local.applied = None

    def _patch(self, rt, ns, name, ptype, patch, sub, dry_run, view):
        with self.lock:
            key = self._key(rt, ns, name)
            e = self._store(rt).objs.get(key)
            if e is None:
                if ptype == "apply":
                    if sub:
                        raise not_found(rt, name)
                    body = copy.deepcopy(patch)
                    if not isinstance(body, dict):
                        raise bad_request("invalid apply patch")
                    md = body.setdefault("metadata", {})
                    if md.get("name") and md["name"] != name:
                        raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (md["name"], name))
                    md["name"] = name
                    return self.create(rt, ns, body, dry_run)
                raise not_found(rt, name)
            old = loads(e[0])
            base = old
            if view is not None:
                base = view[0](old)
            if sub == "scale":
                cur = scale_of(rt, old)
                try:
                    if ptype == "json":
                        sc = ks_patch.json_patch(cur, patch)
                    elif ptype == "strategic":
                        sc = ks_patch.smp(cur, patch)
                    else:
                        sc = ks_patch.merge_patch(cur, patch) if ptype == "merge" else ks_patch.apply_merge(cur, patch, True)
                except ks_patch.PatchError as ex:
                    raise ApiError(422, "Invalid", str(ex))
                prv = (sc.get("metadata") or {}).get("resourceVersion")
                if prv and prv != old["metadata"]["resourceVersion"]:
                    raise conflict(rt, name)
                return self._scale_write(rt, key, e, old, sc, dry_run)
            try:
                if ptype == "merge":
                    if not isinstance(patch, dict):
                        raise bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
                    new = ks_patch.merge_patch(base, patch)
                elif ptype == "json":
                    new = ks_patch.json_patch(base, patch)
                elif ptype == "strategic":
                    if not isinstance(patch, dict):
                        raise bad_request("json: cannot unmarshal into Go value of type map[string]interface {}")
                    new = ks_patch.smp(base, patch)
                elif ptype == "apply":
                    if not isinstance(patch, dict):
                        raise bad_request("invalid apply patch")
                    p = copy.deepcopy(patch)
                    p.get("metadata", {}).pop("resourceVersion", None) if isinstance(p.get("metadata"), dict) else None
                    new = ks_patch.apply_merge(base, p, not rt.custom)
                else:
                    raise ApiError(415, "UnsupportedMediaType", "unsupported patch type")
            except ks_patch.PatchError as ex:
                raise ApiError(422, "Invalid", str(ex))
            except ks_patch.PatchFormatError as ex:
                raise bad_request(str(ex))
            if view is not None:
                new = view[1](new)
                if isinstance(new, dict):
                    new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise bad_request("patched object is not a valid object")
            md = new["metadata"]
            prv = md.get("resourceVersion")
            if prv and prv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                               % (old["metadata"]["uid"], md["uid"]))
            if md.get("name", name) != name:
                raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (md.get("name"), name))
            if rt.namespaced and md.get("namespace", ns) != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            if new.get("apiVersion") != old.get("apiVersion") or new.get("kind") != old.get("kind"):
                raise bad_request("patch must not change apiVersion or kind")
            self.local.req_managed = md.pop("managedFields", None)
            res = self._merge_update(rt, old, new, sub)
            self._type_fixups(rt, res, old)
            if self.psa_hook is not None:
                self.psa_hook(rt, ns, res, old, sub)
            return self._finish_update(rt, key, e, old, res, dry_run)

    # ------------------------------------------------------------ delete
    def delete(self, rt, ns, name, opts, dry_run=False):
        """-> (code, dict)"""
        with self.lock:
            key = self._key(rt, ns, name)
            e = self._store(rt).objs.get(key)
            if e is None:
                raise not_found(rt, name)
            obj = loads(e[0])
            md = obj["metadata"]
            pre = (opts or {}).get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != md.get("uid"):
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                               % (pre["uid"], md.get("uid")))
            if pre.get("resourceVersion") and pre["resourceVersion"] != md.get("resourceVersion"):
                raise conflict(rt, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s"
                               % (pre["resourceVersion"], md.get("resourceVersion")))
            pp = (opts or {}).get("propagationPolicy")
            if pp is not None and pp not in ("Orphan", "Background", "Foreground"):
                raise invalid(rt, name, "propagationPolicy", 'Unsupported value: "%s": supported values: "Foreground", "Background", "Orphan", "nil"' % pp,
                              "FieldValueNotSupported")
            if dry_run:
                return 200, obj
            if self.ctl is not None:
                r = self.ctl.on_delete(rt, key, e, obj, opts)
                if r is not None:
                    return r
            if rt.kind == "Namespace":
                if md.get("deletionTimestamp"):
                    return 200, obj
                self._delete_ns_contents(name)
                pending = md.get("finalizers") or any(True for _ in self._ns_objects(name))
                if pending:
                    md["deletionTimestamp"] = now_rfc3339()
                    md["deletionGracePeriodSeconds"] = 0
                    obj.setdefault("status", {})["phase"] = "Terminating"
                    obj, _ = self._put(rt, key, obj, "MODIFIED", e)
                    return 200, obj
                obj = self._del(rt, key, obj)
                return 200, obj
            if md.get("finalizers"):
                if md.get("deletionTimestamp"):
                    return 200, obj
                md["deletionTimestamp"] = now_rfc3339()
                md["deletionGracePeriodSeconds"] = 0
                if rt.has_generation:
                    md["generation"] = md.get("generation", 1) + 1
                obj, _ = self._put(rt, key, obj, "MODIFIED", e)
                return 200, obj
            obj = self._del(rt, key, obj)
            if rt.custom or rt.kind == "Namespace":
                return 200, obj
            d = {"name": name}
            if rt.group:
                d["group"] = rt.group
            d["kind"] = rt.plural
            d["uid"] = md.get("uid")
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d}

    def delete_collection(self, rt, ns, lsel, fsel, opts, dry_run=False):
        with self.lock:
            meta, items = self.list(rt, ns, lsel, fsel)
            out = []
            for data in items:
                o = loads(data)
                try:
                    _, r = self.delete(rt, o["metadata"].get("namespace"), o["metadata"]["name"],
                                       {"propagationPolicy": (opts or {}).get("propagationPolicy")}, dry_run)
                except ApiError:
                    continue
                out.append(r if r.get("kind") != "Status" else o)
            return 200, {"apiVersion": rt.api_version, "kind": rt.list_kind,
                         "metadata": {"resourceVersion": str(self.rv)}, "items": out}

    # ------------------------------------------------------------ bulk
    def bulk_create(self, rt, ns, template, names):
        """Fast create for benchmarks: same template, many names. Returns count.
        The objects carry the managedFields a `kubectl create` of the template
        gets (computed once), unless the template brings its own."""
        template = copy.deepcopy(template)
        tmd = template.setdefault("metadata", {})
        if not tmd.get("managedFields"):
            probe = copy.deepcopy(template)
            probe["apiVersion"], probe["kind"] = rt.api_version, rt.kind
            ks_managed.track(rt, self._cr_schema(rt) if rt.custom else None, None, probe, None, "kubectl-create",
                             "Update", None)
            if probe["metadata"].get("managedFields"):
                tmd["managedFields"] = probe["metadata"]["managedFields"]
        tmpl = dumps(template)
        n = 0
        with self.lock:
            self._ns_check(rt, ns)
            st = self._store(rt)
            ts = now_rfc3339()
            for name in names:
                key = self._key(rt, ns, name)
                if key in st.objs:
                    continue
                o = loads(tmpl)
                o["apiVersion"] = rt.api_version
                o["kind"] = rt.kind
                md = o.setdefault("metadata", {})
                md["name"] = name
                if rt.namespaced:
                    md["namespace"] = ns
                md["uid"] = str(uuid.uuid4())
                md["creationTimestamp"] = ts
                if rt.has_generation:
                    md["generation"] = 1
                self._put(rt, key, o, "ADDED")
                n += 1
        return n

    def bulk_put(self, objs):
        """Fast create for benchmarks of varied objects: each stored as given
        (no admission, validation, defaulting or managedFields tracking: the
        caller brings what a real server would have recorded), uid and
        creationTimestamp set; names that exist are skipped. Returns count."""
        n = 0
        ts = now_rfc3339()
        with self.lock:
            for o in objs:
                rt = self.by_gvk.get((o.get("apiVersion"), o.get("kind")))
                if rt is None:
                    raise ValueError("unknown apiVersion/kind %s/%s" % (o.get("apiVersion"), o.get("kind")))
                md = o.setdefault("metadata", {})
                ns = (md.get("namespace") or "default") if rt.namespaced else None
                if ns:
                    md["namespace"] = ns
                self._ns_check(rt, ns)
                key = self._key(rt, ns, md.get("name"))
                if key in self._store(rt).objs:
                    continue
                md["uid"] = str(uuid.uuid4())
                md.setdefault("creationTimestamp", ts)
                if rt.has_generation:
                    md.setdefault("generation", 1)
                self._put(rt, key, o, "ADDED")
                n += 1
        return n

    # ------------------------------------------------------------ watch
    def watch_start(self, rt, ns, lsel, fsel, rv_param, send_initial=False):
        w = Watcher(rt, ns if rt.namespaced else None, lsel, fsel)
        with self.lock:
            if rv_param in (None, "", "0") or send_initial:
                _, items = self.list(rt, w.ns, lsel, fsel)
                w.initial = items
                w.rv = self.rv
            else:
                try:
                    n = int(rv_param)
                except ValueError:
                    raise bad_request('invalid resource version: strconv.ParseUint: parsing "%s": invalid syntax' % rv_param)
                self._trim_old()
                if n < self.watch_floor:
                    w.expired = "too old resource version: %d (%d)" % (n, self.watch_floor)
                w.rv = n
            self.watchers += 1
        return w

    def watch_end(self, w):
        with self.lock:
            self.watchers -= 1

    def watch_wait(self, w, timeout):
        """-> list of (type, bytes) for w; sets w.expired when it fell behind the history."""
        with self.lock:
            if w.rv < self.watch_floor:
                w.expired = "too old resource version: %d (%d)" % (w.rv, self.watch_floor)
                return []
            i = bisect.bisect_right(self.hist_rvs, w.rv)
            if i >= len(self.hist):
                cond = self.watch_conds.get(w.rt.rkey)
                if cond is None:
                    cond = self.watch_conds[w.rt.rkey] = self.waker([w.rt.rkey])
                if not cond.wait(timeout):
                    # no write of w's resource since: what others wrote is
                    # not w's to scan (nor to fall behind on)
                    w.rv = self.rv
                    return []
                if w.rv < self.watch_floor:
                    w.expired = "too old resource version: %d (%d)" % (w.rv, self.watch_floor)
                    return []
                i = bisect.bisect_right(self.hist_rvs, w.rv)
            evs = self.hist[i:i + 1000]
        out = []
        for ev in evs:
            c = w.convert(ev)
            if c is not None:
                out.append(c)
            w.rv = ev[0]
        return out

    def current_rv(self):
        with self.lock:
            return self.rv

    def stats(self):
        with self.lock:
            return {"resourceVersion": str(self.rv), "watchers": self.watchers,
                    "historyEvents": len(self.hist), "watchFloor": self.watch_floor,
                    "objects": {("%s/%s" % k if k[0] else k[1]): len(s.objs) for k, s in self.stores.items() if s.objs}}
