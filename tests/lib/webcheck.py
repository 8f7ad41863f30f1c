"""webcheck: helpers shared by the web endpoint's tests (tests/integration/test_web_*.py).

- start_demo(): tests/helpers/web_demo on a loopback port, (proc, port);
- get(): one HTTP request, (status, headers, body);
- validate(): the JSON Schema subset of docs/status-json.md;
- parse_prometheus(), value(), scrape(): a strict parser of the Prometheus
  text format 0.0.4 and sample look-up;
- BACKUP_JS, save_artifact(): for the Chromium tests.
Standard library only.
"""
import math
import os
import re
import shutil
import urllib.error
import urllib.request

from cairntest import BUILDDIR, SRCDIR, CheckFailed, wait_for

DEMO = os.path.join(BUILDDIR, "tests/helpers/web_demo")
SCHEMA = os.path.join(SRCDIR, "docs/status.schema.json")
ARTIFACTS = os.path.join(SRCDIR, "tests/artifacts")


def start_demo(t, *extra, listen="127.0.0.1:0", status_interval_ms=100):
    port_file = t.path("port.%d" % len(t.procs))
    p = t.spawn([DEMO, "--listen", listen, "--port-file", port_file, "--tick-ms", "100",
                 "--status-interval-ms", str(status_interval_ms)] + list(extra), name="web_demo")
    wait_for(lambda: os.path.exists(port_file) or not p.alive(), 10, "web_demo port file")
    t.check(p.alive(), "web_demo exited: %s" % p.output()[-1500:])
    with open(port_file) as f:
        port = int(f.read())
    return p, port


def get(port, path, method="GET", headers=None, body=None, host="127.0.0.1", timeout=10):
    """(status, headers, body bytes) of one request."""
    req = urllib.request.Request("http://%s:%d%s" % (host, port, path), method=method,
                                 headers=headers or {}, data=body)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


# ---- a small JSON Schema validator: the subset docs/status-json.md lists ----

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or (
        isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
KNOWN = {"$schema", "$id", "title", "description", "type", "properties", "required",
         "additionalProperties", "items", "enum", "minimum", "maximum", "minLength",
         "pattern", "$ref", "$defs"}


def validate(value, schema, root, path="$"):
    """Return a list of 'path: problem' strings (empty when valid)."""
    unknown = set(schema) - KNOWN
    if unknown:
        return ["%s: schema uses unsupported keywords %s" % (path, sorted(unknown))]
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            return ["%s: unsupported $ref %s" % (path, ref)]
        return validate(value, root["$defs"][ref[len("#/$defs/"):]], root, path)
    errs = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[ty](value) for ty in types):
            return ["%s: %r is not of type %s" % (path, value, "/".join(types))]
    if "enum" in schema and value not in schema["enum"]:
        errs.append("%s: %r not one of %r" % (path, value, schema["enum"]))
    if TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append("%s: %r < minimum %r" % (path, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errs.append("%s: %r > maximum %r" % (path, value, schema["maximum"]))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append("%s: shorter than %d" % (path, schema["minLength"]))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                errs.append("%s: missing required %r" % (path, k))
        for k, v in value.items():
            if k in props:
                errs += validate(v, props[k], root, "%s.%s" % (path, k))
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    errs.append("%s: unexpected property %r" % (path, k))
                elif isinstance(extra, dict):
                    errs += validate(v, extra, root, "%s.%s" % (path, k))
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errs += validate(v, schema["items"], root, "%s[%d]" % (path, i))
    return errs


# ---- a Prometheus text format 0.0.4 parser ----

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r"^(%s)(\{(.*)\})? (\S+)( -?\d+)?$" % NAME)
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def unescape(s):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}.get(m.group(1), "\\" + m.group(1)), s)


def parse_prometheus(text):
    """{family: {"type", "help", "samples": [(name, {labels}, value)]}}; raises on bad input."""
    fams = {}
    for n, line in enumerate(text.split("\n"), 1):
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not re.fullmatch(NAME, name):
                    raise ValueError("line %d: bad metric name %r" % (n, name))
                fam = fams.setdefault(name, {"type": None, "help": None, "samples": []})
                key = parts[1].lower()
                if fam[key] is not None:
                    raise ValueError("line %d: second %s for %s" % (n, parts[1], name))
                if fam["samples"]:
                    raise ValueError("line %d: %s after samples of %s" % (n, parts[1], name))
                fam[key] = parts[3] if len(parts) > 3 else ""
                if key == "type" and fam[key] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                    raise ValueError("line %d: bad type %r" % (n, fam[key]))
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError("line %d: not a sample: %r" % (n, line))
        name, labels_s, value_s = m.group(1), m.group(3), m.group(4)
        labels = {}
        if labels_s:
            pos = 0
            while pos < len(labels_s):
                lm = LABEL.match(labels_s, pos)
                if not lm:
                    raise ValueError("line %d: bad labels %r" % (n, labels_s))
                if lm.group(1) in labels:
                    raise ValueError("line %d: label %s twice" % (n, lm.group(1)))
                labels[lm.group(1)] = unescape(lm.group(2))
                pos = lm.end()
        value = float(value_s.replace("Inf", "inf"))  # +Inf, -Inf, NaN
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and fams.get(base, {}).get("type") == "histogram":
                family = base
        if family not in fams or fams[family]["type"] is None:
            raise ValueError("line %d: sample of %s without TYPE" % (n, name))
        fams[family]["samples"].append((name, labels, value))
    for fname, fam in fams.items():
        if fam["type"] == "histogram":
            check_histogram(fname, fam)
    return fams


def check_histogram(fname, fam):
    series = {}
    for name, labels, value in fam["samples"]:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name == fname + "_bucket":
            s["buckets"].append((float(labels["le"].replace("Inf", "inf")), value))
        elif name == fname + "_sum":
            s["sum"] = value
        elif name == fname + "_count":
            s["count"] = value
    for key, s in series.items():
        les = [le for le, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if les != sorted(les) or not les or les[-1] != math.inf:
            raise ValueError("%s%s: buckets not increasing up to +Inf" % (fname, key))
        if counts != sorted(counts):
            raise ValueError("%s%s: bucket counts not cumulative" % (fname, key))
        if s["count"] != counts[-1] or s["sum"] is None:
            raise ValueError("%s%s: _count %s != +Inf bucket %s" % (fname, key, s["count"], counts[-1]))


def value(fams, name, labels=None):
    """The value of one sample; None when absent."""
    fam = name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in fams:
            fam = name[:-len(suffix)]
    for n, lab, v in fams.get(fam, {}).get("samples", []):
        if n == name and lab == (labels or {}):
            return v
    return None


def scrape(port):
    status, hdrs, body = get(port, "/metrics")
    if status != 200:
        raise CheckFailed("/metrics answered %d" % status)
    if not hdrs.get("Content-Type", "").startswith("text/plain; version=0.0.4"):
        raise CheckFailed("/metrics content type %r" % hdrs.get("Content-Type"))
    return parse_prometheus(body.decode("utf-8"))


def save_artifact(t, page, name):
    """Screenshot into the case's directory and a copy in tests/artifacts/."""
    path = page.screenshot(t.path(name))
    try:
        os.makedirs(ARTIFACTS, exist_ok=True)
        shutil.copy(path, os.path.join(ARTIFACTS, name))
    except OSError as e:  # a read-only source tree is not a failure
        print("could not copy %s to %s: %s" % (name, ARTIFACTS, e))
    t.check(os.path.getsize(path) > 10000, "screenshot %s looks empty" % name)
    return path


# What the page shows for the first running backup (None when none).
BACKUP_JS = """(function () {
  var c = document.querySelector('.op[data-kind="backup"]');
  if (!c) return null;
  var bar = c.querySelector('[role="progressbar"]');
  return {
    name: c.getAttribute('data-name'),
    text: c.textContent,
    holder: (c.querySelector('.holder') || {}).textContent,
    attempt: (c.querySelector('.attempt') || {}).textContent,
    now: bar ? Number(bar.getAttribute('aria-valuenow')) : null,
    max: bar ? Number(bar.getAttribute('aria-valuemax')) : null,
    width: c.querySelector('.fill').style.width,
    items: (c.querySelector('.items b') || {}).textContent,
    updates: window.cairnUpdates || 0
  };
})()"""
