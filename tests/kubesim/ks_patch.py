"""Patch flavours: RFC 7386 merge patch, RFC 6902 JSON patch, strategic merge patch
(built-in merge keys), and a server-side-apply approximation."""

import copy


class PatchError(Exception):
    """Raised for a patch that cannot be applied (the server answers 422)."""


class PatchFormatError(Exception):
    """Raised for a malformed patch document (the server answers 400)."""


# ---------------------------------------------------------------- merge patch
def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    else:
        target = dict(target)
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


# ----------------------------------------------------------------- JSON patch
def _unesc(tok):
    return tok.replace("~1", "/").replace("~0", "~")


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("invalid JSON pointer %r" % path)
    return [_unesc(t) for t in path[1:].split("/")]


def _index(container, tok, path, allow_end=False):
    if tok == "-" and allow_end:
        return len(container)
    if not tok.isdigit() or (tok != "0" and tok.startswith("0")):
        raise PatchError("invalid array index %r in %s" % (tok, path))
    i = int(tok)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError("index out of range: %s" % path)
    return i


def _walk(doc, toks, path):
    cur = doc
    for t in toks:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError("doc is missing path: \"%s\": missing value" % path)
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, path)]
        else:
            raise PatchError("doc is missing path: \"%s\": missing value" % path)
    return cur


def _get(doc, path):
    toks = _pointer(path)
    return _walk(doc, toks, path)


def _remove(doc, path):
    toks = _pointer(path)
    if not toks:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, toks[:-1], path)
    last = toks[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError("unable to remove nonexistent key: %s: missing value" % last)
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path))
    raise PatchError("doc is missing path: \"%s\": missing value" % path)


def _add(doc, path, value, replace=False):
    toks = _pointer(path)
    if not toks:
        return value
    parent = _walk(doc, toks[:-1], path)
    last = toks[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError("replace operation does not apply: doc is missing key: %s: missing value" % path)
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, path)] = value
        else:
            parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError("doc is missing path: \"%s\": missing value" % path)
    return doc


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise PatchFormatError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchFormatError("invalid JSON patch operation")
        kind = op["op"]
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError("operation missing path")
        if kind == "add":
            if "value" not in op:
                raise PatchError("add operation missing value")
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if "value" not in op:
                raise PatchError("replace operation missing value")
            if path == "":
                doc = copy.deepcopy(op["value"])
            else:
                _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif kind == "move":
            v = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, v)
        elif kind == "copy":
            v = copy.deepcopy(_get(doc, op.get("from", "")))
            doc = _add(doc, path, v)
        elif kind == "test":
            try:
                cur = _get(doc, path)
            except PatchError:
                raise PatchError("testing value %s failed: missing value" % path)
            if cur != op.get("value"):
                raise PatchError("testing value %s failed: test failed" % path)
        else:
            raise PatchError("Unexpected kind: %s" % kind)
    return doc


# ----------------------------------------------------- strategic merge patch
# Merge keys of built-in list fields (from the Go struct tags).  Field names are
# global here; "ports" depends on context (container ports vs service ports).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "volumeMounts": "mountPath",
    "volumeDevices": "devicePath", "imagePullSecrets": "name", "hostAliases": "ip",
    "conditions": "type", "ownerReferences": "uid", "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey", "secrets": "name",
    "containerStatuses": "name", "initContainerStatuses": "name",
    "podIPs": "ip", "hostIPs": "ip", "readinessGates": "conditionType",
}
PRIMITIVE_MERGE = {"finalizers"}


def _merge_key(field, ctx):
    if field == "ports":
        # container ports merge by containerPort, service ports by port
        return "containerPort" if ctx in ("containers", "initContainers", "ephemeralContainers") else "port"
    return MERGE_KEYS.get(field)


def smp(target, patch, ctx=None):
    """Apply a strategic merge patch (dict) to target (dict). Returns a new dict."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive == "delete":
        return None
    out = dict(target)
    retain = patch.get("$retainKeys")
    orders = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k[len("$setElementOrder/"):]] = v
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k[len("$deleteFromPrimitiveList/"):]
            if isinstance(out.get(f), list) and isinstance(v, list):
                out[f] = [x for x in out[f] if x not in v]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
            continue
        if isinstance(v, dict):
            r = smp(out.get(k), v, k)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
        elif isinstance(v, list):
            mk = _merge_key(k, ctx)
            if mk and isinstance(out.get(k), list):
                out[k] = _merge_list(out[k], v, mk, k)
            elif k in PRIMITIVE_MERGE and isinstance(out.get(k), list):
                cur = list(out[k])
                for x in v:
                    if x not in cur:
                        cur.append(x)
                out[k] = cur
            else:
                out[k] = [_strip(x) for x in v if not (isinstance(x, dict) and x.get("$patch") == "delete")]
        else:
            out[k] = v
    for f, order in orders.items():
        if isinstance(out.get(f), list) and isinstance(order, list):
            out[f] = _apply_order(out[f], order, _merge_key(f, ctx))
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if not k.startswith("$")}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _merge_list(cur, patch, mk, field):
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [_strip(x) for x in patch if not (isinstance(x, dict) and x.get("$patch"))]
    out = list(cur)
    for item in patch:
        if not isinstance(item, dict) or mk not in item:
            out.append(_strip(item))
            continue
        idx = next((i for i, e in enumerate(out) if isinstance(e, dict) and e.get(mk) == item[mk]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(_strip(item))
        else:
            out[idx] = smp(out[idx], item, field)
    return out


def _apply_order(items, order, mk):
    if mk is None:
        pos = {repr(v): i for i, v in enumerate(order)}
        key = lambda x: repr(x)
    else:
        pos = {repr(v.get(mk)) if isinstance(v, dict) else repr(v): i for i, v in enumerate(order)}
        key = lambda x: repr(x.get(mk)) if isinstance(x, dict) else repr(x)
    ordered = [x for x in items if key(x) in pos]
    ordered.sort(key=lambda x: pos[key(x)])
    rest = [x for x in items if key(x) not in pos]
    return ordered + rest


# --------------------------------------------------- server-side apply approx
def apply_merge(target, applied, builtin, ctx=None):
    """Server-side apply approximation: maps deep-merge, lists with a known merge key
    merge by key (built-ins), other lists are replaced. Nothing is removed."""
    if not isinstance(applied, dict) or not isinstance(target, dict):
        return copy.deepcopy(applied)
    out = dict(target)
    for k, v in applied.items():
        if isinstance(v, dict):
            out[k] = apply_merge(out.get(k), v, builtin, k)
        elif isinstance(v, list) and builtin and isinstance(out.get(k), list) and _merge_key(k, ctx):
            mk = _merge_key(k, ctx)
            cur = list(out[k])
            for item in v:
                idx = None
                if isinstance(item, dict) and mk in item:
                    idx = next((i for i, e in enumerate(cur) if isinstance(e, dict) and e.get(mk) == item[mk]), None)
                if idx is None:
                    cur.append(copy.deepcopy(item))
                else:
                    cur[idx] = apply_merge(cur[idx], item, builtin, k)
            out[k] = cur
        else:
            out[k] = copy.deepcopy(v)
    return out
