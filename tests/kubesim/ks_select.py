"""Label and field selectors, as kube-apiserver parses them (apimachinery/pkg/labels, pkg/fields)."""

import re

_KEY_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VAL_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class SelectorError(Exception):
    pass


def _split_top(s):
    """Split on commas that are not inside parentheses."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _check_key(k, raw):
    if not k or len(k) > 317 or not _KEY_RE.match(k):
        raise SelectorError("unable to parse requirement: found '%s', expected: identifier" % raw)


def _check_val(v, raw):
    if len(v) > 63 or not _VAL_RE.match(v):
        raise SelectorError("unable to parse requirement: invalid label value: \"%s\"" % v)


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(s):
    """Returns a list of requirements (key, op, values) or None for 'everything'."""
    if s is None:
        return None
    s = s.strip()
    if not s:
        return None
    reqs = []
    for part in _split_top(s):
        raw = part
        part = part.strip()
        if not part:
            raise SelectorError("unable to parse requirement: found '', expected: identifier")
        m = _SET_RE.match(part)
        if m:
            key, op, vals = m.group(1), m.group(2), m.group(3)
            _check_key(key, raw)
            values = [v.strip() for v in vals.split(",")] if vals.strip() else []
            for v in values:
                _check_val(v, raw)
            reqs.append((key, op, frozenset(values)))
            continue
        if part.startswith("!"):
            key = part[1:].strip()
            _check_key(key, raw)
            reqs.append((key, "!", None))
            continue
        for op in ("!=", "==", "=", ">", "<"):
            i = part.find(op)
            if i > 0:
                key, val = part[:i].strip(), part[i + len(op):].strip()
                _check_key(key, raw)
                if op in (">", "<"):
                    try:
                        val = int(val)
                    except ValueError:
                        raise SelectorError("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer")
                else:
                    _check_val(val, raw)
                reqs.append((key, "=" if op == "==" else op, val))
                break
        else:
            if " " in part or "(" in part:
                raise SelectorError("unable to parse requirement: found '%s', expected: in, notin, =, ==, !=, gt, lt" % part)
            _check_key(part, raw)
            reqs.append((part, "exists", None))
    return reqs


def label_match(reqs, labels):
    if not reqs:
        return True
    labels = labels or {}
    for key, op, val in reqs:
        present = key in labels
        if op == "=":
            if not present or labels[key] != val:
                return False
        elif op == "!=":
            if present and labels[key] == val:
                return False
        elif op == "in":
            if not present or labels[key] not in val:
                return False
        elif op == "notin":
            if present and labels[key] in val:
                return False
        elif op == "exists":
            if not present:
                return False
        elif op == "!":
            if present:
                return False
        elif op in (">", "<"):
            if not present:
                return False
            try:
                n = int(labels[key])
            except ValueError:
                return False
            if op == ">" and not n > val:
                return False
            if op == "<" and not n < val:
                return False
    return True


def parse_field_selector(s, supported):
    """Returns list of (field, op, value); op in '=', '!='. Raises SelectorError (400) for unknown fields."""
    if s is None:
        return None
    s = s.strip()
    if not s:
        return None
    out = []
    for part in s.split(","):
        part = part.strip()
        for op in ("!=", "==", "="):
            i = part.find(op)
            if i > 0:
                f, v = part[:i].strip(), part[i + len(op):].strip()
                out.append((f, "!=" if op == "!=" else "=", v))
                break
        else:
            raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (s, part))
    for f, _, _ in out:
        if f not in ("metadata.name", "metadata.namespace") and f not in supported:
            raise SelectorError('field label not supported: %s' % f)
    return out


def get_path(obj, dotted):
    cur = obj
    for p in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def field_match(reqs, ns, name, getobj):
    """getobj() lazily parses the object when a field beyond name/namespace is needed."""
    if not reqs:
        return True
    obj = None
    for f, op, v in reqs:
        if f == "metadata.name":
            cur = name
        elif f == "metadata.namespace":
            cur = ns
        else:
            if obj is None:
                obj = getobj()
            cur = get_path(obj, f)
            if cur is None:
                cur = ""
            elif isinstance(cur, bool):
                cur = "true" if cur else "false"
            else:
                cur = str(cur)
        if (cur == v) != (op == "="):
            return False
    return True
