"""Validation as kube-apiserver does it, with its messages.

- ObjectMeta (k8s.io/apimachinery pkg/api/validation/objectmeta.go,
  pkg/apis/meta/v1/validation, pkg/util/validation/validation.go): names
  (DNS-1123 subdomain, DNS-1123 label for namespaces, DNS-1035 label for
  services, path segments for RBAC), label keys (qualified names) and values
  (<= 63, the real regex), annotation keys and their total size (256 KiB),
  finalizers, ownerReferences.
- CRDs (apiextensions-apiserver pkg/apis/apiextensions/validation and
  pkg/apiserver/schema/validation.go): a v1 CRD needs a structural schema for
  every version.
- Custom resources (pkg/apiserver/schema/pruning, defaulting, and
  kube-openapi's validator through validation.go
  kubeOpenAPIResultToFieldErrors): undeclared fields pruned unless
  x-kubernetes-preserve-unknown-fields (a warning, or 400 with
  fieldValidation=Strict), defaults applied, then type, enum, format,
  minimum/maximum, length, pattern, items, required and nullable checked.

Errors are (cause reason, field path, body) triples for ks_core.invalid_many;
the body is what field.Error.ErrorBody() prints."""

import base64
import json
import re
import uuid

from ks_types import parse_ts

# ------------------------------------------------------------------ formats
QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QNAME_RE = re.compile("^" + QNAME_FMT + "$")
QNAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
LABEL_VALUE_FMT = "(" + QNAME_FMT + ")?"
LABEL_VALUE_RE = re.compile("^" + LABEL_VALUE_FMT + "$")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character")
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_RE = re.compile("^" + DNS1123_LABEL_FMT + "$")
DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                     "start and end with an alphanumeric character")
DNS1123_SUB_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1123_SUB_RE = re.compile("^" + DNS1123_SUB_FMT + "$")
DNS1123_SUB_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character")
DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1035_RE = re.compile("^" + DNS1035_FMT + "$")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
               "character, and end with an alphanumeric character")
ANNOTATIONS_MAX = 256 * 1024


def regex_error(msg, fmt, *examples):
    """validation.RegexError."""
    if not examples:
        return msg + " (regex used for validation is '" + fmt + "')"
    msg += " (e.g. "
    for i, e in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += "'" + e + "', "
    return msg + "regex used for validation is '" + fmt + "')"


def max_len(n):
    return "must be no more than %d characters" % n


def go_quote(s):
    """%q of a Go string (close enough: JSON escaping without \\u for ASCII controls)."""
    return json.dumps(s, ensure_ascii=False)


def go_value(v):
    """How field.Error.ErrorBody prints a decoded JSON value."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e21 else repr(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, list):
        return "[]interface {}{" + ", ".join(_go_iface(x) for x in v) + "}"
    if isinstance(v, dict):
        return "map[string]interface {}{" + ", ".join("%s:%s" % (go_quote(k), _go_iface(v[k])) for k in sorted(v)) + "}"
    return str(v)


def _go_iface(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return "%d" % v
    if isinstance(v, float):
        return go_value(v)
    if isinstance(v, str):
        return go_quote(v)
    if v is None:
        return "interface {}(nil)"
    return go_value(v)


def is_dns1123_subdomain(v):
    errs = []
    if len(v) > 253:
        errs.append(max_len(253))
    if not DNS1123_SUB_RE.match(v):
        errs.append(regex_error(DNS1123_SUB_MSG, DNS1123_SUB_FMT, "example.com"))
    return errs


def is_qualified_name(v):
    """validation.IsQualifiedName."""
    errs = []
    parts = v.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + regex_error(QNAME_MSG, QNAME_FMT, "MyName", "my.name", "123-abc") +
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len(63))
    if not QNAME_RE.match(name):
        errs.append("name part " + regex_error(QNAME_MSG, QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(v):
    errs = []
    if len(v) > 63:
        errs.append(max_len(63))
    if not LABEL_VALUE_RE.match(v):
        errs.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _inv(field, value, msg, reason="FieldValueInvalid"):
    return (reason, field, "Invalid value: %s: %s" % (go_value(value), msg))


# ------------------------------------------------------------------ names
def name_kind(rt):
    """Which name rule a resource uses (its ValidateXName function)."""
    if rt.group == "rbac.authorization.k8s.io":
        return "path"
    if rt.group == "" and rt.kind == "Namespace":
        return "label"
    if rt.group == "" and rt.kind == "Service":
        return "dns1035"
    return "subdomain"


def name_errors(rt, name, field="metadata.name", prefix=False):
    """Errors of a metadata.name (or of a generateName prefix: a trailing dash is
    allowed, as maskTrailingDash does)."""
    v = name
    if prefix and len(v) > 1 and v.endswith("-"):
        v = v[:-1] + "a"
    kind = name_kind(rt)
    msgs = []
    if kind == "path":
        if v in (".", ".."):
            msgs = ["may not be '%s'" % v]
        else:
            msgs = ["may not contain '%s'" % c for c in ("/", "%") if c in v]
    elif kind == "label":
        if len(v) > 63:
            msgs.append(max_len(63))
        if not DNS1123_LABEL_RE.match(v):
            msgs.append(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    elif kind == "dns1035":
        if len(v) > 63:
            msgs.append(max_len(63))
        if not DNS1035_RE.match(v):
            msgs.append(regex_error(DNS1035_MSG, DNS1035_FMT, "my-name", "abc-123"))
    else:
        msgs = is_dns1123_subdomain(v)
    return [_inv(field, name, m) for m in msgs]


# ------------------------------------------------------------------ ObjectMeta
# What nearly every valid key and label value looks like: one regex match
# instead of the checks that name what is wrong
_QKEY_FAST = re.compile("^(?:" + DNS1123_SUB_FMT + "/)?(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LVAL_FAST = re.compile("^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _fast_ok(k, v=None):
    return (isinstance(k, str) and len(k) <= 317 and _QKEY_FAST.match(k) is not None
            and (v is None or (isinstance(v, str) and _LVAL_FAST.match(v) is not None)))


def meta_errors(md):
    """Labels, annotations, finalizers, ownerReferences of an ObjectMeta."""
    errs = []
    labels = md.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            if _fast_ok(k, v) and ("/" not in k or len(k.split("/")[0]) <= 253):
                continue
            for m in is_qualified_name(str(k)):
                errs.append(_inv("metadata.labels", k, m))
            if isinstance(v, str):
                for m in is_label_value(v):
                    errs.append(_inv("metadata.labels", v, m))
    anns = md.get("annotations")
    if isinstance(anns, dict):
        total = 0
        for k, v in anns.items():
            if not (_fast_ok(k) and ("/" not in k or len(k.split("/")[0]) <= 253)):
                for m in is_qualified_name(str(k).lower()):
                    errs.append(_inv("metadata.annotations", k, m))
            total += len(str(k).encode()) + len(str(v if v is not None else "").encode())
        if total > ANNOTATIONS_MAX:
            errs.append(("FieldValueTooLong", "metadata.annotations",
                         "Too long: may not be more than %d bytes" % ANNOTATIONS_MAX))
    refs = md.get("ownerReferences")
    if isinstance(refs, list):
        controllers = 0
        for r in refs:
            if not isinstance(r, dict):
                continue
            av = r.get("apiVersion") or ""
            if not av.split("/")[-1]:
                errs.append(_inv("metadata.ownerReferences.apiVersion", av, "version must not be empty"))
            for f in ("kind", "name", "uid"):
                if not r.get(f):
                    errs.append(_inv("metadata.ownerReferences.%s" % f, r.get(f) or "", "must not be empty"))
            if r.get("controller") is True:
                controllers += 1
        if controllers > 1:
            errs.append(("FieldValueInvalid", "metadata.ownerReferences",
                         "Invalid value: %s: Only one reference can have Controller set to true. Found \"true\" in "
                         "references for %s" % ("[]v1.OwnerReference{...}", ", ".join(
                             "%s/%s" % (r.get("kind"), r.get("name")) for r in refs
                             if isinstance(r, dict) and r.get("controller") is True))))
    fins = md.get("finalizers")
    if isinstance(fins, list):
        for f in fins:
            for m in is_qualified_name(str(f)):
                errs.append(_inv("metadata.finalizers", f, m))
    return errs


def event_errors(obj, ns):
    """legacyValidateEvent: an event's namespace and its object's agree."""
    ref = obj.get("involvedObject") or {}
    ons = ref.get("namespace") or ""
    if not obj.get("eventTime"):
        if not ons:
            if ns not in ("", "default"):
                return [_inv("involvedObject.namespace", ons, "does not match event.namespace")]
        elif ns != ons:
            return [_inv("involvedObject.namespace", ons, "does not match event.namespace")]
    elif not ons and ns not in ("default", "kube-system"):
        return [_inv("involvedObject.namespace", ons, "does not match event.namespace")]
    return []


# ------------------------------------------------------------------ CRD structural schemas
_NESTED_FORBIDDEN = [("type", "must be empty to be structural"), ("additionalProperties", "must be undefined to be structural"),
                     ("default", "must be undefined to be structural"), ("title", "must be empty to be structural"),
                     ("description", "must be empty to be structural"), ("nullable", "must be false to be structural"),
                     ("externalDocs", "must be undefined to be structural"),
                     ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
                     ("x-kubernetes-embedded-resource", "must be false to be structural"),
                     ("x-kubernetes-int-or-string", "must be false to be structural"),
                     ("x-kubernetes-list-map-keys", "must be empty to be structural"),
                     ("x-kubernetes-list-type", "must be undefined to be structural"),
                     ("x-kubernetes-map-type", "must be undefined to be structural"),
                     ("x-kubernetes-validations", "must be empty to be structural")]


def _nested_errs(v, path, errs):
    """validateNestedValueValidation: inside anyOf/allOf/oneOf/not only value validations."""
    if not isinstance(v, dict):
        return
    for k, msg in _NESTED_FORBIDDEN:
        val = v.get(k)
        if val in (None, False, "", [], {}):
            continue
        errs.append(("FieldValueForbidden", path + "." + k, "Forbidden: " + msg))
    if isinstance(v.get("properties"), dict):
        if "metadata" in v["properties"]:
            errs.append(("FieldValueForbidden", path + ".properties[metadata]", "Forbidden: must not be specified in a nested context"))
        for k, sub in v["properties"].items():
            _nested_errs(sub, "%s.properties[%s]" % (path, k), errs)
    if isinstance(v.get("items"), dict):
        _nested_errs(v["items"], path + ".items", errs)
    for j in ("anyOf", "allOf", "oneOf"):
        for i, sub in enumerate(v.get(j) or []):
            _nested_errs(sub, "%s.%s[%d]" % (path, j, i), errs)
    if isinstance(v.get("not"), dict):
        _nested_errs(v["not"], path + ".not", errs)


def _int_or_string_pattern(s):
    any_of = s.get("anyOf")
    pat = [{"type": "integer"}, {"type": "string"}]
    if any_of == pat:
        return "anyOf"
    all_of = s.get("allOf")
    if all_of and isinstance(all_of[0], dict) and all_of[0].get("anyOf") == pat:
        return "allOf"
    return None


def _structural(s, level, path, errs):
    if not isinstance(s, dict):
        errs.append(("FieldValueInvalid", path, "Invalid value: %s: must be an object" % go_value(s)))
        return
    typ = s.get("type") or ""
    if typ == "array" and s.get("items") is None:
        errs.append(("FieldValueRequired", path + ".items", "Required value: must be specified"))
    if isinstance(s.get("items"), dict):
        _structural(s["items"], "item", path + ".items", errs)
    props = s.get("properties")
    if isinstance(props, dict):
        for k, v in props.items():
            _structural(v, "field", "%s.properties[%s]" % (path, k), errs)
    ap = s.get("additionalProperties")
    if ap is not None and ap is not True:
        if level == "root":
            errs.append(("FieldValueForbidden", path + ".additionalProperties", "Forbidden: must not be used at the root"))
        if isinstance(ap, dict):
            _structural(ap, "field", path + ".additionalProperties", errs)
    if isinstance(props, dict) and props and ap not in (None, True):
        errs.append(("FieldValueForbidden", path + ".additionalProperties",
                     "Forbidden: additionalProperties and properties are mutual exclusive"))
    ios = s.get("x-kubernetes-int-or-string")
    pres = s.get("x-kubernetes-preserve-unknown-fields")
    emb = s.get("x-kubernetes-embedded-resource")
    if ios and pres:
        errs.append(("FieldValueInvalid", path + ".x-kubernetes-preserve-unknown-fields",
                     "Invalid value: true: must be false if x-kubernetes-int-or-string is true"))
    pattern = _int_or_string_pattern(s)
    for i, sub in enumerate(s.get("anyOf") or []):
        if pattern != "anyOf":
            _nested_errs(sub, "%s.anyOf[%d]" % (path, i), errs)
    for i, sub in enumerate(s.get("allOf") or []):
        if not (pattern == "allOf" and i == 0):
            _nested_errs(sub, "%s.allOf[%d]" % (path, i), errs)
    for i, sub in enumerate(s.get("oneOf") or []):
        _nested_errs(sub, "%s.oneOf[%d]" % (path, i), errs)
    if isinstance(s.get("not"), dict):
        _nested_errs(s["not"], path + ".not", errs)
    if isinstance(s.get("pattern"), str):
        try:
            re.compile(s["pattern"])
        except re.error as e:
            errs.append(("FieldValueInvalid", path + ".pattern", "Invalid value: %s: must be a valid regular expression, "
                         "but isn't: %s" % (go_quote(s["pattern"]), e)))
    if emb and typ != "object":
        if not typ:
            errs.append(("FieldValueRequired", path + ".type", "Required value: must be object if x-kubernetes-embedded-resource is true"))
        else:
            errs.append(("FieldValueInvalid", path + ".type", "Invalid value: %s: must be object if "
                         "x-kubernetes-embedded-resource is true" % go_quote(typ)))
    elif not typ and not ios and not pres:
        what = {"root": "must not be empty at the root", "item": "must not be empty for specified array items",
                "field": "must not be empty for specified object fields"}[level]
        errs.append(("FieldValueRequired", path + ".type", "Required value: " + what))
    if level == "root" and typ and typ != "object":
        errs.append(("FieldValueInvalid", path + ".type", "Invalid value: %s: must be object at the root" % go_quote(typ)))
    check_meta = level == "root" or emb
    if isinstance(props, dict):
        for f in ("kind", "apiVersion"):
            if f in props and check_meta and (props[f] or {}).get("type") != "string":
                errs.append(("FieldValueInvalid", "%s.properties[%s].type" % (path, f),
                             "Invalid value: %s: must be string" % go_quote((props[f] or {}).get("type") or "")))
        md = props.get("metadata")
        if md is not None:
            mpath = path + ".properties[metadata]"
            if check_meta and (md or {}).get("type") != "object":
                errs.append(("FieldValueInvalid", mpath + ".type",
                             "Invalid value: %s: must be object" % go_quote((md or {}).get("type") or "")))
            if level == "root" and isinstance(md, dict):
                extra = {k: v for k, v in md.items() if k not in ("type", "description")}
                mprops = extra.pop("properties", None) or {}
                if set(mprops) - {"name", "generateName"} or extra:
                    errs.append(("FieldValueForbidden", mpath, "Forbidden: must not specify anything other than name "
                                 "and generateName, but metadata is implicitly specified"))


def crd_errors(spec):
    """Structural-schema errors of a v1 CRD's versions, sorted as ValidateStructural sorts them."""
    errs = []
    for i, v in enumerate(spec.get("versions") or []):
        if not isinstance(v, dict):
            continue
        path = "spec.versions[%d].schema.openAPIV3Schema" % i
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            errs.append(("FieldValueRequired", path, "Required value: schemas are required"))
            continue
        ve = []
        _structural(schema, "root", path, ve)
        ve.sort(key=lambda e: "%s: %s" % (e[1], e[2]))
        errs.extend(ve)
    return errs


# ------------------------------------------------------------------ custom resources
META_KEYS = {"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
             "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
             "ownerReferences", "finalizers", "managedFields"}


def _json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def prune(schema, obj, path, unknown, root=False):
    """Drop the fields the schema does not declare (pruning/algorithm.go),
    recording their paths; apply defaults (defaulting/algorithm.go)."""
    if not isinstance(schema, dict):
        return
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-int-or-string"):
            return
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        ap = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        keep = set()
        if root or schema.get("x-kubernetes-embedded-resource"):
            keep = {"apiVersion", "kind", "metadata"}
        for k in list(obj):
            sub = path + "." + k if path else k
            if k in keep:
                # apiVersion, kind and metadata of a (root or embedded) object are
                # never pruned by the schema; metadata is coerced to ObjectMeta
                if k == "metadata" and isinstance(obj[k], dict):
                    for mk in list(obj[k]):
                        if mk not in META_KEYS:
                            unknown.append(sub + "." + mk)
                            del obj[k][mk]
                continue
            if k in props:
                prune(props[k], obj[k], sub, unknown)
            elif isinstance(ap, dict):
                prune(ap, obj[k], sub, unknown)
            elif ap is True or preserve:
                continue
            else:
                unknown.append(sub)
                del obj[k]
        for k, sub in props.items():
            if k not in obj and isinstance(sub, dict) and "default" in sub:
                obj[k] = json.loads(json.dumps(sub["default"]))
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, x in enumerate(obj):
                prune(items, x, "%s[%d]" % (path, i), unknown)


_FORMATS = {
    "date-time": lambda v: parse_ts(v) is not None,
    "datetime": lambda v: parse_ts(v) is not None,
    "date": lambda v: re.match(r"^\d{4}-\d\d-\d\d$", v) is not None,
    "byte": lambda v: _is_base64(v),
    "uuid": lambda v: _is_uuid(v),
    "ipv4": lambda v: re.match(r"^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$", v) is not None,
    "hostname": lambda v: len(v) <= 255 and re.match(r"^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?"
                                                     r"(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$", v) is not None,
}


def _is_base64(v):
    try:
        base64.b64decode(v, validate=True)
        return True
    except (ValueError, TypeError):
        return False


def _is_uuid(v):
    try:
        uuid.UUID(v)
        return re.match(r"^[0-9a-fA-F]{8}-", v) is not None
    except ValueError:
        return False


def _num(v):
    return go_value(float(v)) if isinstance(v, float) else str(v)


def validate(schema, v, path, errs):
    """kube-openapi's SchemaValidator on a (pruned) value, as field errors."""
    if not isinstance(schema, dict):
        return
    name = path or "."
    typ = schema.get("type")
    ios = schema.get("x-kubernetes-int-or-string")
    if v is None:
        if (typ or ios) and not schema.get("nullable"):
            t = "integer,string" if ios else typ
            errs.append(("FieldValueTypeInvalid", path, 'Invalid value: "null": %s in body must be of type %s: "null"'
                         % (name, t)))
        return
    jt = _json_type(v)
    if ios:
        if jt not in ("integer", "string") and not (jt == "number" and float(v).is_integer()):
            errs.append(("FieldValueTypeInvalid", path, "Invalid value: %s: %s in body must be of type integer,string: %s"
                         % (go_quote(jt), name, go_quote(jt))))
            return
    elif typ:
        ok = (jt == typ or (typ == "number" and jt == "integer")
              or (typ == "integer" and jt == "number" and float(v).is_integer()))
        if not ok:
            errs.append(("FieldValueTypeInvalid", path, "Invalid value: %s: %s in body must be of type %s: %s"
                         % (go_quote(jt), name, typ, go_quote(jt))))
            return
    enum = schema.get("enum")
    if isinstance(enum, list) and v not in enum:
        vals = ", ".join(json.dumps(e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))) for e in enum)
        errs.append(("FieldValueNotSupported", path, "Unsupported value: %s: supported values: %s" % (go_value(v), vals)))
    if isinstance(v, str):
        fmt = schema.get("format")
        if fmt in _FORMATS and not _FORMATS[fmt](v):
            errs.append(("FieldValueTypeInvalid", path, "Invalid value: %s: %s in body must be of type %s: %s"
                         % (go_quote(v), name, fmt, go_quote(v))))
        if isinstance(schema.get("maxLength"), int) and len(v) > schema["maxLength"]:
            errs.append(("FieldValueTooLong", path, "Too long: may not be more than %d bytes" % schema["maxLength"]))
        if isinstance(schema.get("minLength"), int) and len(v) < schema["minLength"]:
            errs.append(_inv(path, v, "%s in body should be at least %d chars long" % (name, schema["minLength"])))
        if isinstance(schema.get("pattern"), str):
            try:
                if not re.search(schema["pattern"], v):
                    errs.append(_inv(path, v, "%s in body should match '%s'" % (name, schema["pattern"])))
            except re.error:
                pass
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        mn, mx = schema.get("minimum"), schema.get("maximum")
        if isinstance(mn, (int, float)):
            if schema.get("exclusiveMinimum") and not v > mn:
                errs.append(_inv(path, v, "%s in body should be greater than %s" % (name, _num(mn))))
            elif not schema.get("exclusiveMinimum") and v < mn:
                errs.append(_inv(path, v, "%s in body should be greater than or equal to %s" % (name, _num(mn))))
        if isinstance(mx, (int, float)):
            if schema.get("exclusiveMaximum") and not v < mx:
                errs.append(_inv(path, v, "%s in body should be less than %s" % (name, _num(mx))))
            elif not schema.get("exclusiveMaximum") and v > mx:
                errs.append(_inv(path, v, "%s in body should be less than or equal to %s" % (name, _num(mx))))
        mo = schema.get("multipleOf")
        if isinstance(mo, (int, float)) and mo and (v / mo) != int(v / mo):
            errs.append(_inv(path, v, "%s in body should be a multiple of %s" % (name, _num(mo))))
    if isinstance(v, list):
        if isinstance(schema.get("maxItems"), int) and len(v) > schema["maxItems"]:
            errs.append(("FieldValueTooMany", path, "Too many: %d: must have at most %d items" % (len(v), schema["maxItems"])))
        if isinstance(schema.get("minItems"), int) and len(v) < schema["minItems"]:
            errs.append(_inv(path, v, "%s in body should have at least %d items" % (name, schema["minItems"])))
        if schema.get("uniqueItems"):
            seen = []
            for x in v:
                if x in seen:
                    errs.append(_inv(path, v, "%s in body shouldn't contain duplicates" % name))
                    break
                seen.append(x)
        items = schema.get("items")
        if isinstance(items, dict):
            for i, x in enumerate(v):
                validate(items, x, "%s[%d]" % (path, i), errs)
    if isinstance(v, dict) and not ios:
        for r in schema.get("required") or []:
            if r not in v:
                errs.append(("FieldValueRequired", (path + "." if path else "") + r, "Required value"))
        if isinstance(schema.get("maxProperties"), int) and len(v) > schema["maxProperties"]:
            errs.append(("FieldValueTooMany", path, "Too many: %d: must have at most %d items" % (len(v), schema["maxProperties"])))
        if isinstance(schema.get("minProperties"), int) and len(v) < schema["minProperties"]:
            errs.append(_inv(path, v, "%s in body should have at least %d properties" % (name, schema["minProperties"])))
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        ap = schema.get("additionalProperties")
        for k, x in v.items():
            sub = (path + "." if path else "") + k
            if k in props:
                validate(props[k], x, sub, errs)
            elif isinstance(ap, dict):
                validate(ap, x, sub, errs)


def _get_path(obj, path):
    """The value at a dotted/indexed error path, or a sentinel when absent."""
    cur = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            i = int(part[1:-1])
            if not isinstance(cur, list) or i >= len(cur):
                return _MISSING
            cur = cur[i]
        else:
            if not isinstance(cur, dict) or part not in cur:
                return _MISSING
            cur = cur[part]
    return cur


_MISSING = object()


def cr_errors(schema, obj, old=None):
    """Validate a custom resource (metadata excluded: it is ObjectMeta). On
    update an error at a path whose value did not change is dropped, as CRD
    validation ratcheting does."""
    errs = []
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    sch = dict(schema)
    if isinstance(sch.get("properties"), dict):
        sch["properties"] = {k: v for k, v in sch["properties"].items() if k not in ("apiVersion", "kind", "metadata")}
    sch["required"] = [r for r in sch.get("required") or [] if r not in ("apiVersion", "kind", "metadata")]
    validate(sch, body, "", errs)
    if old is not None and errs:
        kept = []
        for e in errs:
            a, b = _get_path(obj, e[1]), _get_path(old, e[1])
            if a is not _MISSING and a == b:
                continue
            kept.append(e)
        errs = kept
    return errs
