"""metadata.managedFields as the real server keeps them, modelled on
k8s.io/apimachinery pkg/util/managedfields/internal (the apiserver's field
manager) and sigs.k8s.io/structured-merge-diff (field sets, FieldsV1):

- every create, update and patch runs the field manager: the manager is the
  fieldManager query parameter, else the User-Agent up to its first "/"
  (prefixFromUserAgent, at most 128 printable characters); the operation is
  Update, or Apply for server-side apply;
- an Update manager is keyed by (manager, operation, apiVersion, subresource),
  an Apply manager without the apiVersion (BuildManagerIdentifier);
- the fields an operation added or changed become its own and leave every
  other manager; removed fields leave everyone (Updater.update); a manager
  that took no field gets no new entry and keeps its time
  (managedFieldsUpdater); managers left with nothing disappear;
- stripped from every set: apiVersion, kind and the system ObjectMeta fields
  (stripMeta); reset fields: status through the main endpoint of a type with
  a status subresource, everything but status through /status;
- a write that omits managedFields (or sends []) keeps the stored ones, one
  that sends entries replaces them (then the write is tracked on top), one
  that sends [{}] removes them all; a subresource write always starts from
  the stored ones;
- at most 10 Update entries: the oldest are merged into "ancient-changes"
  (capManagers); entries sorted by operation, time, manager, apiVersion,
  subresource (sortEncodedManagedFields);
- server-side apply: another manager's field that the applied configuration
  sets to a different value is a conflict (409 unless force=true).

Approximated (see README): kubesim has no OpenAPI schemas of the built-in
types, so which nodes are maps (granular, ".") and which lists are keyed by
which fields comes from a table of the common built-in fields; custom
resources follow their CRD schema (properties: struct, additionalProperties:
map, x-kubernetes-list-type map/set); other lists are atomic."""

import functools
import json
import time

MAX_UPDATE_MANAGERS = 10
STRIP_META = {"name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
              "managedFields", "resourceVersion"}
# Built-in fields that are Go maps (granular: the node itself is a member)
MAP_FIELDS = {"labels", "annotations", "data", "binaryData", "stringData", "nodeSelector", "matchLabels",
              "limits", "requests", "capacity", "allocatable", "hard", "used", "parameters", "volumeAttributes",
              "overhead", "allocatedResources"}
# Built-in associative lists: field -> key fields (listMapKeys / patchMergeKey)
LIST_KEYS = {"containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
             "volumes": ("name",), "env": ("name",), "volumeMounts": ("mountPath",), "volumeDevices": ("devicePath",),
             "imagePullSecrets": ("name",), "hostAliases": ("ip",), "conditions": ("type",),
             "ownerReferences": ("uid",), "resourceClaims": ("name",), "containerStatuses": ("name",),
             "initContainerStatuses": ("name",), "podIPs": ("ip",), "hostIPs": ("ip",),
             "readinessGates": ("conditionType",), "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
             "secrets": ("name",)}
SET_FIELDS = {"finalizers"}
# Lists and maps are members of the set themselves ("." in FieldsV1) except
# where the Go field has no omitempty (PodSpec.containers is the common one).
NOT_MEMBER = {"containers"}


@functools.lru_cache(maxsize=256)
def manager_from_user_agent(ua):
    """prefixFromUserAgent (cached: a client sends the same one each time)."""
    out = ""
    for ch in (ua or "").split("/")[0]:
        if not ch.isprintable():
            continue
        if len(out.encode()) + len(ch.encode()) > 128:
            break
        out += ch
    return out


# ------------------------------------------------------------------ field sets
class Walker:
    """Turns an object into its field set: {path tuple: leaf value or MEMBER}."""
    MEMBER = object()

    def __init__(self, rt, schema=None):
        self.rt = rt
        self.schema = schema
        self._top = None

    def fieldset(self, obj, sub=None, has_status=False):
        out = {}
        for k, v in obj.items():
            if k in ("apiVersion", "kind"):
                continue
            if has_status:
                if sub == "status" and k != "status":
                    continue
                if sub is None and k == "status":
                    continue
            if sub not in (None, "status") and k != "spec":
                continue        # scale & co.: what the subresource writes
            p = ("f:" + k,)
            if k == "metadata" and isinstance(v, dict):
                md = {mk: mv for mk, mv in v.items() if mk not in STRIP_META}
                self._dict(md, p, out, self._sub(self.schema, k), struct=True)
                continue
            self._value(k, v, p, out, self._sub(self.schema, k), "")
        return out

    @staticmethod
    def _sub(schema, key):
        if not isinstance(schema, dict):
            return None
        props = schema.get("properties")
        if isinstance(props, dict) and key in props:
            return props[key]
        ap = schema.get("additionalProperties")
        return ap if isinstance(ap, dict) else None

    def _is_map(self, name, schema, in_spec):
        """in_spec: the node is a direct field of the object's spec."""
        if self.rt.custom:
            if not isinstance(schema, dict):
                return True          # deduced (preserved unknown fields): maps are granular
            if isinstance(schema.get("properties"), dict) and schema["properties"]:
                return False
            return True
        if name in MAP_FIELDS:
            return True
        return name == "selector" and in_spec and self.rt.kind in ("Service", "ReplicationController")

    def _value(self, name, v, path, out, schema, parent):
        if isinstance(v, dict):
            if not v:
                out[path] = {}
                return
            if self._is_map(name, schema, path[:-1] == ("f:spec",)):
                out[path] = Walker.MEMBER
                self._dict(v, path, out, schema, struct=False)
            else:
                self._dict(v, path, out, schema, struct=True)
        elif isinstance(v, list):
            keys, is_set = self._list_kind(name, schema, v)
            if keys:
                if name not in NOT_MEMBER or self.rt.custom:
                    out[path] = Walker.MEMBER if v else []
                item_schema = schema.get("items") if isinstance(schema, dict) else None
                for e in v:
                    kv = {k: e[k] for k in keys if k in e}
                    ep = path + ("k:" + json.dumps(kv, separators=(",", ":"), sort_keys=True),)
                    out[ep] = Walker.MEMBER
                    self._dict(e, ep, out, item_schema, struct=True)
            elif is_set:
                out[path] = Walker.MEMBER if v else []
                for e in v:
                    out[path + ("v:" + json.dumps(e, separators=(",", ":")),)] = e
            else:
                out[path] = v          # atomic list: one leaf
        else:
            out[path] = v

    def _dict(self, d, path, out, schema, struct):
        for k, v in d.items():
            sub = self._sub(schema, k) if isinstance(schema, dict) else None
            self._value(k, v, path + ("f:" + k,), out, sub, path)

    # ---- the FieldsV1 tree of a whole object in one walk (creates)
    def tree(self, obj, sub=None, has_status=False):
        """to_fields_v1(fieldset(obj)) without the path sets: the create path."""
        self._top = obj.get("spec")
        out = {}
        for k in sorted(obj):
            if k in ("apiVersion", "kind"):
                continue
            if has_status and ((sub == "status") != (k == "status")):
                continue
            if sub not in (None, "status") and k != "spec":
                continue
            v = obj[k]
            if k == "metadata" and isinstance(v, dict):
                md = {mk: mv for mk, mv in v.items() if mk not in STRIP_META}
                t = self._tdict(md, self._sub(self.schema, k), False)
                if t:
                    out["f:metadata"] = t
                continue
            out["f:" + k] = self._tval(k, v, self._sub(self.schema, k), False)
        return out

    def _tdict(self, d, schema, is_spec):
        t = {}
        sch = isinstance(schema, dict)
        for k in sorted(d):
            t["f:" + k] = self._tval(k, d[k], self._sub(schema, k) if sch else None, is_spec)
        return t

    def _tval(self, name, v, schema, in_spec):
        if isinstance(v, dict):
            if not v:
                return {}
            if self._is_map(name, schema, in_spec):
                t = {".": {}}
                t.update(self._tdict(v, schema, False))
                return t
            return self._tdict(v, schema, v is self._top)    # the object's spec: its fields are "in spec"
        if isinstance(v, list):
            keys, is_set = self._list_kind(name, schema, v)
            if keys:
                t = {".": {}} if v and (name not in NOT_MEMBER or self.rt.custom) else {}
                item_schema = schema.get("items") if isinstance(schema, dict) else None
                elems = []
                for e in v:
                    kv = {k: e[k] for k in keys if k in e}
                    ek = "k:" + json.dumps(kv, separators=(",", ":"), sort_keys=True)
                    et = {".": {}}
                    et.update(self._tdict(e, item_schema, False))
                    elems.append((ek, et))
                for k, et in sorted(elems, key=lambda x: x[0]):
                    t[k] = et
                return t
            if is_set:
                t = {".": {}} if v else {}
                for k in sorted("v:" + json.dumps(e, separators=(",", ":")) for e in v):
                    t[k] = {}
                return t
        return {}

    def _list_kind(self, name, schema, v):
        if self.rt.custom and isinstance(schema, dict):
            lt = schema.get("x-kubernetes-list-type")
            if lt == "map" and schema.get("x-kubernetes-list-map-keys"):
                if all(isinstance(e, dict) for e in v):
                    return tuple(schema["x-kubernetes-list-map-keys"]), False
            return None, lt == "set"
        if self.rt.custom:
            return None, False
        if name in SET_FIELDS:
            return None, True
        keys = LIST_KEYS.get(name)
        if name == "ports" and v and all(isinstance(e, dict) for e in v):
            keys = ("containerPort", "protocol") if "containerPort" in v[0] else ("port", "protocol")
        if keys and all(isinstance(e, dict) for e in v):
            return keys, False
        return None, False


def to_fields_v1(paths):
    """A set of paths -> the FieldsV1 JSON tree, keys in order ("." marks a
    node that is itself a member; it comes first, as the Go serializer writes
    it). One pass over the sorted paths: a prefix sorts before its extensions."""
    root = {}
    members = set()
    for p in sorted(paths):
        node = root
        for pe in p[:-1]:
            nxt = node.get(pe)
            if nxt is None:
                nxt = node[pe] = {}
            elif not nxt and id(nxt) in members:
                nxt["."] = {}
            node = nxt
        if not node and id(node) in members:
            node["."] = {}
        leaf = node.get(p[-1])
        if leaf is None:
            leaf = node[p[-1]] = {}
        members.add(id(leaf))
    return root


def from_fields_v1(tree, prefix=()):
    out = set()
    if not isinstance(tree, dict):
        return out
    for pe, child in tree.items():
        if pe == ".":
            out.add(prefix)
            continue
        p = prefix + (pe,)
        if isinstance(child, dict) and child:
            sub = from_fields_v1(child, p)
            if not any(x for x in child if x != "."):
                out.add(p)
            out |= sub
        else:
            out.add(p)
    return out


def path_string(p):
    """A path as conflict messages print it: .spec.containers[name="x"].image."""
    s = ""
    for pe in p:
        kind, _, rest = pe.partition(":")
        if kind == "f":
            s += "." + rest
        elif kind == "k":
            kv = json.loads(rest)
            s += "[" + ",".join("%s=%s" % (k, json.dumps(kv[k])) for k in sorted(kv)) + "]"
        elif kind == "v":
            s += "[=" + rest + "]"
        else:
            s += "[" + rest + "]"
    return s


# ------------------------------------------------------------------ the manager
def _ident(e):
    return (e.get("manager", ""), e.get("operation", ""),
            "" if e.get("operation") == "Apply" else e.get("apiVersion", ""), e.get("subresource", ""))


_now_cache = [0, ""]


def _now():
    t = int(time.time())
    if _now_cache[0] != t:
        _now_cache[0], _now_cache[1] = t, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    return _now_cache[1]


def decode(entries):
    """managedFields list -> {ident: [entry without fieldsV1, set, entry]} or None when invalid."""
    if not isinstance(entries, list):
        return None
    out = {}
    for e in entries:
        if not isinstance(e, dict) or e.get("operation") not in ("Apply", "Update"):
            return None
        if e.get("fieldsType", "FieldsV1") != "FieldsV1":
            return None
        meta = {k: v for k, v in e.items() if k != "fieldsV1"}
        out[_ident(e)] = [meta, from_fields_v1(e.get("fieldsV1") or {}), e]
    return out


def _take(rec, paths):
    """Remove paths from a manager's set; its stored entry is stale if any went."""
    n = len(rec[1])
    rec[1] -= paths
    if len(rec[1]) != n:
        rec[2] = None


def encode(managed):
    entries = []
    for meta, fields, entry in managed.values():
        if not fields:
            continue
        if entry is not None:
            entries.append(entry)
            continue
        e = {}
        for k in ("manager", "operation", "apiVersion", "time"):
            if meta.get(k) is not None:
                e[k] = meta[k]
        e["fieldsType"] = "FieldsV1"
        e["fieldsV1"] = to_fields_v1(fields)
        if meta.get("subresource"):
            e["subresource"] = meta["subresource"]
        entries.append(e)
    entries.sort(key=lambda e: (e.get("operation", ""), e.get("time", ""), e.get("manager", ""),
                                e.get("apiVersion", ""), e.get("subresource", "")))
    return entries


def _cap(managed):
    """capManagers: at most 10 Update entries; the oldest (by time, then name)
    merge into an "ancient-changes" entry per apiVersion."""
    updates = sorted((k for k, r in managed.items() if r[0].get("operation") == "Update"),
                     key=lambda k: (managed[k][0].get("time") or "", k[0]))
    count = len(updates)
    for k in updates:
        if count <= MAX_UPDATE_MANAGERS:
            break
        if k[0] == "ancient-changes":
            continue
        meta, fields, _ = managed.pop(k)
        bk = ("ancient-changes", "Update", meta.get("apiVersion", ""), "")
        if bk in managed:
            managed[bk][1] |= fields
            managed[bk][0]["time"] = meta.get("time")
            managed[bk][2] = None
            count -= 1
        else:
            managed[bk] = [{"manager": "ancient-changes", "operation": "Update", "apiVersion": meta.get("apiVersion"),
                            "time": meta.get("time")}, set(fields), None]


class Conflict(Exception):
    def __init__(self, conflicts):
        super().__init__("conflict")
        self.conflicts = conflicts      # [(manager, operation, apiVersion, subresource, path)]


def track(rt, schema, old, new, provided, manager, operation, sub, applied=None, force=False):
    """Set new["metadata"]["managedFields"] for a write of new over old (None:
    create). provided: the managedFields the request carried (None/[]: keep the
    stored ones). applied: the apply configuration (Apply only). Raises
    Conflict for an apply that takes another manager's field unless force."""
    md = new["metadata"]
    if provided == [{}] and sub is None and operation != "Apply":
        md.pop("managedFields", None)
        return
    w = Walker(rt, schema)
    has_status = rt.has_status
    av = rt.api_version
    if old is None and not provided and operation == "Update":
        # a plain create: the creator owns every field
        tree = w.tree(new, sub, has_status)
        if tree:
            e = {"manager": manager, "operation": "Update", "apiVersion": av, "time": _now(),
                 "fieldsType": "FieldsV1", "fieldsV1": tree}
            if sub:
                e["subresource"] = sub
            md["managedFields"] = [e]
        else:
            md.pop("managedFields", None)
        return
    stored = (old or {}).get("metadata", {}).get("managedFields") or []
    new_fs = w.fieldset(new, sub, has_status)
    old_fs = w.fieldset(old, sub, has_status) if old else {}
    added = {p for p in new_fs if p not in old_fs}
    removed = {p for p in old_fs if p not in new_fs}
    modified = {p for p in new_fs if p in old_fs and new_fs[p] is not Walker.MEMBER and new_fs[p] != old_fs[p]}
    taken = added | modified
    use_provided = bool(provided) and sub is None
    if not taken and not removed and operation == "Update" and not use_provided:
        # nothing changed hands (a no-op, or changes only to reset fields)
        if stored:
            md["managedFields"] = stored
        else:
            md.pop("managedFields", None)
        return
    managed = decode(provided) if use_provided else None
    if managed is None:
        managed = decode(stored) or {}
    me = (manager, operation, "" if operation == "Apply" else av, sub or "")
    if operation == "Apply":
        mine = set(w.fieldset(applied, sub, has_status)) if isinstance(applied, dict) else set()
        conflicts = []
        for k, (meta, fields, _) in managed.items():
            if k == me:
                continue
            for p in sorted(fields & (mine & (modified | added))):
                conflicts.append((meta.get("manager"), meta.get("operation"), meta.get("apiVersion"),
                                  meta.get("subresource"), p))
        if conflicts and not force:
            raise Conflict(conflicts)
        for k, rec in list(managed.items()):
            if k != me:
                _take(rec, (mine & taken) | removed)
        managed[me] = [{"manager": manager, "operation": "Apply", "apiVersion": av, "time": _now()}, mine, None]
    else:
        for rec in managed.values():
            _take(rec, taken | removed)
        if taken:
            prev = managed[me][1] if me in managed else set()
            meta = {"manager": manager, "operation": "Update", "apiVersion": av, "time": _now()}
            if sub:
                meta["subresource"] = sub
            managed[me] = [meta, (prev - removed) | taken, None]
    for k in [k for k, r in managed.items() if not r[1]]:
        del managed[k]
    _cap(managed)
    entries = encode(managed)
    if entries:
        md["managedFields"] = entries
    else:
        md.pop("managedFields", None)
