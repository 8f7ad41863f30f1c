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


def manager_from_user_agent(ua):
    """prefixFromUserAgent."""
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

    def _is_map(self, name, schema, parent_path):
        if self.rt.custom:
            if not isinstance(schema, dict):
                return True          # deduced (preserved unknown fields): maps are granular
            if isinstance(schema.get("properties"), dict) and schema["properties"]:
                return False
            return True
        if name in MAP_FIELDS:
            return True
        return (name == "selector" and parent_path == ("f:spec",) and self.rt.kind in ("Service", "ReplicationController"))

    def _value(self, name, v, path, out, schema, parent):
        if isinstance(v, dict):
            if not v:
                out[path] = {}
                return
            if self._is_map(name, schema, path[:-1]):
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
    """A set of paths -> the FieldsV1 JSON tree ("." marks a node that is itself a member)."""
    root = {}
    for p in sorted(paths, key=len):
        node = root
        for i, pe in enumerate(p):
            child = node.get(pe)
            if child is None:
                child = node[pe] = {}
            if i == len(p) - 1:
                pass
            node = child
    members = set(paths)

    def mark(node, prefix):
        for pe, child in node.items():
            if pe == ".":
                continue
            p = prefix + (pe,)
            if child:
                mark(child, p)
                if p in members:
                    child["."] = {}
        # sort keys as the Go serializer writes them ("." first, then by element)
    mark(root, ())
    return _sorted(root)


def _sorted(node):
    out = {}
    if "." in node:
        out["."] = {}
    for k in sorted(x for x in node if x != "."):
        out[k] = _sorted(node[k])
    return out


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


def decode(entries):
    """managedFields list -> {ident: [entry without fieldsV1, set]} or None when invalid."""
    if not isinstance(entries, list):
        return None
    out = {}
    for e in entries:
        if not isinstance(e, dict) or e.get("operation") not in ("Apply", "Update"):
            return None
        if e.get("fieldsType", "FieldsV1") != "FieldsV1":
            return None
        meta = {k: v for k, v in e.items() if k != "fieldsV1"}
        out[_ident(e)] = [meta, from_fields_v1(e.get("fieldsV1") or {})]
    return out


def encode(managed):
    entries = []
    for meta, fields in managed.values():
        if not fields:
            continue
        e = {}
        for k in ("manager", "operation", "apiVersion", "time", "fieldsType"):
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
    updates = sorted((k for k, (m, _) in managed.items() if m.get("operation") == "Update"),
                     key=lambda k: (managed[k][0].get("time") or "", k[0]))
    count = len(updates)
    for k in updates:
        if count <= MAX_UPDATE_MANAGERS:
            break
        if k[0] == "ancient-changes":
            continue
        meta, fields = managed.pop(k)
        bk = ("ancient-changes", "Update", meta.get("apiVersion", ""), "")
        if bk in managed:
            managed[bk][1] |= fields
            managed[bk][0]["time"] = meta.get("time")
            count -= 1
        else:
            managed[bk] = [{"manager": "ancient-changes", "operation": "Update", "apiVersion": meta.get("apiVersion"),
                            "time": meta.get("time")}, set(fields)]


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
    managed = None
    if provided and sub is None:
        managed = decode(provided)
    if managed is None:
        managed = decode((old or {}).get("metadata", {}).get("managedFields") or []) or {}
    w = Walker(rt, schema)
    has_status = rt.has_status
    new_fs = w.fieldset(new, sub, has_status)
    old_fs = w.fieldset(old, sub, has_status) if old else {}
    added = {p for p in new_fs if p not in old_fs}
    removed = {p for p in old_fs if p not in new_fs}
    modified = {p for p in new_fs if p in old_fs and new_fs[p] is not Walker.MEMBER and new_fs[p] != old_fs[p]}
    taken = added | modified
    av = rt.api_version
    me = (manager, operation, "" if operation == "Apply" else av, sub or "")
    if operation == "Apply":
        mine = set(w.fieldset(applied, sub, has_status)) if isinstance(applied, dict) else set()
        conflicts = []
        for k, (meta, fields) in managed.items():
            if k == me:
                continue
            for p in sorted(fields & (mine & (modified | added))):
                conflicts.append((meta.get("manager"), meta.get("operation"), meta.get("apiVersion"),
                                  meta.get("subresource"), p))
        if conflicts and not force:
            raise Conflict(conflicts)
        for k, (meta, fields) in list(managed.items()):
            if k != me:
                fields -= (mine & taken) | removed
        managed[me] = [{"manager": manager, "operation": "Apply", "apiVersion": av,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, mine]
    else:
        for k, (meta, fields) in list(managed.items()):
            fields -= taken | removed
        if taken:
            prev = managed.get(me, [None, set()])[1]
            meta = {"manager": manager, "operation": "Update", "apiVersion": av,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            if sub:
                meta["subresource"] = sub
            managed[me] = [meta, (prev - removed) | taken]
    for k in [k for k, (_, f) in managed.items() if not f]:
        del managed[k]
    _cap(managed)
    entries = encode(managed)
    if entries:
        md["managedFields"] = entries
    else:
        md.pop("managedFields", None)
