"""The web endpoint over HTTP: /status.json against its documented schema,
/metrics through a Prometheus text-format parser, /readyz, and the safety
rules (methods, caps, idle connections, token, bind address).

Against tests/helpers/web_demo, the web module with a fake server behind
it (the engine's `cairn server --listen` is exercised by the engine's own
tests once it calls web_start). SIGUSR1 makes the demo record a successful,
a failed and a validation-failed backup as the engine does.
"""
import json
import math
import os
import re
import signal
import socket
import time
import urllib.error
import urllib.request

from cairntest import BUILDDIR, SRCDIR, CheckFailed, case, main, wait_for

DEMO = os.path.join(BUILDDIR, "tests/helpers/web_demo")
SCHEMA = os.path.join(SRCDIR, "docs/status.schema.json")


def start_demo(t, *extra, listen="127.0.0.1:0"):
    port_file = t.path("port.%d" % len(t.procs))
    p = t.spawn([DEMO, "--listen", listen, "--port-file", port_file, "--tick-ms", "100",
                 "--status-interval-ms", "100"] + list(extra), name="web_demo")
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


# ---- cases ----

@case
def status_json_matches_documented_schema(t):
    demo, port = start_demo(t)
    with open(SCHEMA) as f:
        schema = json.load(f)
    status, hdrs, body = get(port, "/status.json")
    t.eq(status, 200, "/status.json status")
    t.eq(hdrs.get("Content-Type"), "application/json", "content type")
    doc = json.loads(body)
    t.eq(doc.get("version"), 1, "document version")
    errs = validate(doc, schema, schema)
    t.check(not errs, "schema violations: %s" % errs[:5])
    # After results of every kind were recorded, still valid.
    demo.signal(signal.SIGUSR1)
    doc = wait_for(lambda: (lambda d: d if len(d["recent"]) >= 5 else None)(
        json.loads(get(port, "/status.json")[2])), 10, "recorded results")
    errs = validate(doc, schema, schema)
    t.check(not errs, "schema violations after results: %s" % errs[:5])
    t.eq(sorted({r["phase"] for r in doc["recent"]}),
         ["Completed", "Failed", "FailedValidation", "PartiallyFailed"], "result phases")
    # The validator does reject what the schema forbids.
    bad = dict(doc, version=2)
    bad["server"] = dict(doc["server"], lease={"name": "x", "state": "bogus"})
    t.check(len(validate(bad, schema, schema)) >= 2, "validator accepted a bad document")
    # HEAD: the headers, no body.
    status, hdrs, body = get(port, "/status.json", method="HEAD")
    t.eq((status, body), (200, b""), "HEAD /status.json")


@case
def metrics_count_backup_outcomes(t):
    demo, port = start_demo(t)
    fams = scrape(port)
    # Complete from the start: every cairn family declared with HELP and TYPE.
    for name in ("cairn_backup_attempt_total", "cairn_backup_success_total",
                 "cairn_backup_partial_failure_total", "cairn_backup_failure_total",
                 "cairn_backup_validation_failure_total", "cairn_backup_duration_seconds",
                 "cairn_backup_tarball_size_bytes", "cairn_backup_last_successful_timestamp",
                 "cairn_backup_items_total", "cairn_restore_attempt_total",
                 "cairn_restore_success_total", "cairn_restore_failed_total",
                 "cairn_restore_partial_failure_total", "cairn_restore_validation_failed_total",
                 "cairn_backup_in_progress", "cairn_restore_in_progress", "cairn_claims_total",
                 "cairn_takeovers_total", "cairn_lease_renew_failures_total",
                 "cairn_volume_snapshot_attempt_total"):
        t.check(name in fams and fams[name]["type"] and fams[name]["help"],
                "%s not declared with HELP and TYPE" % name)
    t.eq(fams["cairn_backup_duration_seconds"]["type"], "histogram", "duration type")
    t.eq(value(fams, "cairn_backup_attempt_total", {"schedule": ""}), 0, "attempts at start")
    t.eq(value(fams, "cairn_backup_attempt_total", {"schedule": "nightly"}), None, "nightly at start")
    t.eq(value(fams, "cairn_lease_renew_failures_total"), 0, "renew failures at start")
    t.eq(value(fams, "cairn_backup_in_progress", {"phase": "InProgress"}), 1, "in progress")

    nightly = {"schedule": "nightly"}
    for round_ in (1, 2):
        demo.signal(signal.SIGUSR1)
        wait_for(lambda: value(scrape(port), "cairn_backup_validation_failure_total", nightly) == round_,
                 10, "round %d recorded" % round_)
        fams = scrape(port)
        t.eq(value(fams, "cairn_backup_attempt_total", nightly), 2 * round_, "attempts")
        t.eq(value(fams, "cairn_backup_success_total", nightly), round_, "successes")
        t.eq(value(fams, "cairn_backup_failure_total", nightly), round_, "failures")
        t.eq(value(fams, "cairn_backup_validation_failure_total", nightly), round_, "validation failures")
        t.eq(value(fams, "cairn_backup_partial_failure_total", nightly), None, "partial failures")
        t.eq(value(fams, "cairn_backup_duration_seconds_count", nightly), 2 * round_, "durations")
        t.eq(value(fams, "cairn_backup_duration_seconds_sum", nightly), 49.5 * round_, "duration sum")
        t.eq(value(fams, "cairn_backup_duration_seconds_bucket", dict(nightly, le="10")), round_,
             "durations <= 10s")
        t.eq(value(fams, "cairn_backup_last_status", nightly), 0, "last status after a failure")
        last = value(fams, "cairn_backup_last_successful_timestamp", nightly)
        t.check(last and abs(last - time.time()) < 120, "last successful timestamp %r" % last)
    # Bytes keep counting while the backup runs.
    b1 = value(scrape(port), "cairn_backup_bytes_total")
    wait_for(lambda: value(scrape(port), "cairn_backup_bytes_total") > b1, 5, "bytes counter to grow")
    t.check(value(fams, "cairn_web_requests_total", {"code": "200"}) >= 1, "web requests counted")


@case
def readyz_follows_readiness(t):
    flag = t.path("not-ready")
    demo, port = start_demo(t, "--not-ready-file", flag)
    t.eq(get(port, "/readyz")[0], 200, "/readyz when ready")
    with open(flag, "w") as f:
        f.write("API server unreachable: connection refused <x>\n")
    status, hdrs, body = get(port, "/readyz")
    t.eq(status, 503, "/readyz when not ready")
    t.eq(body.decode(), "not ready: API server unreachable: connection refused <x>\n", "reason")
    t.check(hdrs.get("Content-Type", "").startswith("text/plain"), "reason is plain text")
    t.eq(get(port, "/healthz")[0], 200, "/healthz while not ready")
    os.unlink(flag)
    t.eq(get(port, "/readyz")[0], 200, "/readyz ready again")
    sick = t.path("unhealthy")
    demo2, port2 = start_demo(t, "--unhealthy-file", sick)
    t.eq(get(port2, "/healthz")[0], 200, "/healthz alive")
    open(sick, "w").close()
    t.eq(get(port2, "/healthz")[0], 503, "/healthz when a loop is stuck")


@case
def healthz_answers_with_500_idle_connections(t):
    demo, port = start_demo(t)
    idle = []
    try:
        for _ in range(500):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.append(s)
        # A request on the last one makes sure the server accepted them all.
        time.sleep(0.2)
        start = time.monotonic()
        status, _, body = get(port, "/healthz", timeout=1.0)
        took = time.monotonic() - start
        t.eq((status, body), (200, b"ok\n"), "/healthz with 500 idle connections")
        t.check(took < 1.0, "/healthz took %.2fs" % took)
        s = idle[-1]
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(5)
        t.check(s.recv(100).startswith(b"HTTP/1.1 200"), "an idle connection was dropped")
    finally:
        for s in idle:
            s.close()


@case
def idle_connections_time_out(t):
    demo, port = start_demo(t, "--idle-timeout", "1")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
    start = time.monotonic()
    data = s.recv(100)
    t.eq(data, b"", "server closed the slow connection")
    t.check(time.monotonic() - start < 8, "closed only after %.1fs" % (time.monotonic() - start))
    s.close()


@case
def methods_and_request_caps(t):
    demo, port = start_demo(t)
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        status, hdrs, _ = get(port, "/status", method=method, body=b"x" if method != "OPTIONS" else None)
        t.eq(status, 405, "%s /status" % method)
        t.eq(hdrs.get("Allow"), "GET, HEAD", "Allow header")
    # A 1 MB header is refused (431), or the connection is cut while sending.
    try:
        status, _, _ = get(port, "/healthz", headers={"X-Big": "a" * (1 << 20)})
    except (ConnectionError, OSError):
        status = "reset"
    t.check(status in (431, "reset"), "1 MB header answered %r" % status)
    status, _, _ = get(port, "/" + "a" * 5000)
    t.check(status in (414, 431), "5000-byte URL answered %d" % status)
    t.eq(get(port, "/healthz")[0], 200, "still serving")
    status, hdrs, body = get(port, "/status")
    t.eq(status, 200, "/status")
    csp = hdrs.get("Content-Security-Policy", "")
    t.check("script-src 'sha256-" in csp and "default-src 'none'" in csp, "page CSP %r" % csp)
    t.check("unsafe-inline" not in csp, "page CSP allows any inline code")
    t.eq(hdrs.get("X-Content-Type-Options"), "nosniff", "nosniff")
    t.check(not re.search(r"\.(inner|outer)HTML\s*=|insertAdjacentHTML|document\.write",
                          body.decode()), "the page parses strings as HTML")
    status, hdrs, _ = get(port, "/metrics")
    t.eq(hdrs.get("Content-Security-Policy"), "default-src 'none'; frame-ancestors 'none'", "metrics CSP")


@case
def token_required_except_probes(t):
    token_file = t.path("token")
    with open(token_file, "w") as f:
        f.write("tok-" + "x" * 40 + "\n")
    demo, port = start_demo(t, "--token-file", token_file)
    good = {"Authorization": "Bearer tok-" + "x" * 40}
    for path in ("/status", "/status.json", "/metrics", "/nope"):
        status, hdrs, _ = get(port, path)
        t.eq(status, 401, "%s without token" % path)
        t.check(hdrs.get("WWW-Authenticate", "").startswith("Bearer"), "WWW-Authenticate on %s" % path)
        t.eq(get(port, path, headers={"Authorization": "Bearer wrong"})[0], 401, "%s bad token" % path)
    for path in ("/status", "/status.json", "/metrics"):
        t.eq(get(port, path, headers=good)[0], 200, "%s with token" % path)
    t.eq(get(port, "/healthz")[0], 200, "/healthz without token")
    t.eq(get(port, "/readyz")[0], 200, "/readyz without token")


@case
def binds_only_the_given_address(t):
    demo, port = start_demo(t, listen="127.0.0.1:0")
    t.eq(get(port, "/healthz")[0], 200, "on 127.0.0.1")
    try:
        socket.create_connection(("127.0.0.2", port), timeout=2).close()
        reached = True
    except OSError:
        reached = False
    t.check(not reached, "reachable on 127.0.0.2: bound to more than the given address")
    # A second server on the same port fails with a clear error.
    p = t.spawn([DEMO, "--listen", "127.0.0.1:%d" % port], name="web_demo_dup")
    rc = p.wait(10)
    t.check(rc != 0 and "Address already in use" in p.output(), "duplicate bind: %r" % p.output())


main()
