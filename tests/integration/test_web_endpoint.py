"""The web endpoint over HTTP: /status.json against its documented schema,
/metrics through a Prometheus text-format parser, /readyz, and the safety
rules (methods, caps, idle connections, token, bind address).

Against tests/helpers/web_demo, the web module with a fake server behind
it (test_web_server.py does the same against `cairn server --listen`).
SIGUSR1 makes the demo record a successful, a failed and a
validation-failed backup as the engine does.
"""
import json
import os
import re
import signal
import socket
import time

from cairntest import case, main, wait_for
from webcheck import DEMO, SCHEMA, get, parse_prometheus, scrape, start_demo, validate, value

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
    t.eq(doc.get("version"), 2, "document version")
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
    bad = dict(doc, version=1)
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
        # from 50 addresses: one address may hold at most 32 (issue 19)
        for i in range(500):
            s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                         source_address=("127.0.1.%d" % (1 + i // 10), 0))
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
def connections_kept_alive_between_polls(t):
    import http.client
    demo, port = start_demo(t)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for path in ("/status.json", "/status.json", "/metrics", "/healthz"):
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        t.eq(r.status, 200, "GET %s" % path)
        t.check((r.getheader("Connection") or "").lower() != "close", "%s closed the connection" % path)
    local = c.sock.getsockname()
    c.request("GET", "/healthz")
    c.getresponse().read()
    t.eq(c.sock.getsockname(), local, "same connection")
    # A request with a body is answered without reading it, and closed.
    c.request("POST", "/status.json", body=b"x" * 1000)
    r = c.getresponse()
    r.read()
    t.eq((r.status, (r.getheader("Connection") or "").lower()), (405, "close"), "POST")
    c.close()


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


@case
def metrics_rendered_once_per_interval(t):
    """/metrics is rendered at most once a second and shared: requests
    within that second get the very same bytes (cairn_web_requests_total
    would count each of them otherwise), a later one a fresh render."""
    demo, port = start_demo(t)
    get(port, "/healthz")
    first = get(port, "/metrics")[2]
    bodies = {get(port, "/metrics")[2] for _ in range(20)}
    # the 20 may straddle the end of the first render's second, not more
    t.check(len(bodies | {first}) <= 2, "%d different /metrics bodies within about a second" %
            len(bodies | {first}))
    time.sleep(1.2)
    later = parse_prometheus(get(port, "/metrics")[2].decode())
    total = sum(v for n, _, v in later["cairn_web_requests_total"]["samples"])
    t.check(total >= 22, "a render after the interval counts the requests before it: %s" % total)


main()
