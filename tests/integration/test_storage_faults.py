"""S3 faults: 503 SlowDown, 500 and connection resets slow cairn down but
lose nothing; errors that will not go away end in one clear message.

A fault-injecting proxy (tests/lib/faultproxy.py) sits between the C client
(tests/helpers/storage_tool) and s3rver.
"""
import os
import time

from cairntest import case, main
from faultproxy import FaultProxy
from s3rver import S3rver

MiB = 1 << 20
RETRY = ("--attempts", "12", "--backoff-ms", "10")


def rand_file(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


@case
def faults_lose_nothing(t):
    """15% of requests fail in every way the proxy knows: 503 SlowDown, 500,
    resets before the request reaches the server and after it did the work,
    and an error inside a 200 reply. Nothing is lost."""
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0.15, seed=20261202,
                       kinds=("slowdown", "500", "reset", "reset_reply", "error200"))
    ep = proxy.endpoint

    def tool(*args):
        return s3.storage_tool(*args, endpoint=ep, extra=RETRY)

    start = time.monotonic()
    files = []
    for i in range(30):
        f = rand_file(t.path("small%d" % i), 1000 + 997 * i)
        tool("put", "small/%d" % i, f)
        files.append(("small/%d" % i, f))
    big = rand_file(t.path("big"), 26 * MiB + 11)
    tool("upload", "big/multipart", big, 5 * MiB)
    files.append(("big/multipart", big))
    tool("put-stream", "big/stream", big)
    files.append(("big/stream", big))
    tool("put", "big/single", big)
    files.append(("big/single", big))
    listed = tool("list", "").stdout.decode().splitlines()
    t.eq(len(listed), len(files), "objects listed through faults")
    for key, src in files:
        out = t.path("back")
        tool("get", key, out)
        t.check(read(out) == read(src), "%s differs after faults" % key)
        # and straight from the server, bypassing the proxy
        s3.storage_tool("get", key, out)
        t.check(read(out) == read(src), "%s as stored differs" % key)
    print("faults injected: %s in %.1fs" % (proxy.counts, time.monotonic() - start))
    t.check(proxy.faults() >= 5, "too few faults injected to mean anything: %s" % proxy.counts)
    # (error200 can only hit the two completes: complete_is_safe_to_retry has it)
    for kind in ("slowdown", "500", "reset", "reset_reply"):
        t.check(proxy.counts[kind] > 0, "no %s fault was injected: %s" % (kind, proxy.counts))


@case
def resend_on_a_dead_kept_alive_connection(t):
    """Issue 19: a reused connection that turns out dead once the body went
    out makes libcurl resend the request by itself, which needs the body
    rewound. Without a seek callback that ended in CURLE_SEND_FAIL_REWIND,
    was not retried and was reported as "cannot reach". With one attempt
    allowed, curl's own resend must do it."""
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    one = ("--attempts", "1")
    # small bodies: sent whole before the reset, so curl sees it reading
    puts = proxy.rule("reset", method="PUT", reused=True, times=4)
    r = s3.storage_tool("parallel", "par", 1, 6, 3000, endpoint=proxy.endpoint, extra=one,
                        check=False)
    t.eq(r.returncode, 0, "puts on a dying connection: %s" % r.stderr.decode()[-500:])
    t.eq(puts.fired, 4, "resets injected")
    data = rand_file(t.path("data"), 3 * MiB + 17)
    done = proxy.rule("reset", method="POST", query="uploadId=", reused=True, times=1)
    r = s3.storage_tool("upload", "mp/rewind", data, MiB, endpoint=proxy.endpoint, extra=one,
                        check=False)
    t.eq(r.returncode, 0, "complete on a dying connection: %s" % r.stderr.decode()[-500:])
    t.eq(done.fired, 1, "reset of the complete")
    s3.storage_tool("get", "mp/rewind", t.path("back"))
    t.check(read(t.path("back")) == read(data), "object differs")
    completes = [q for q in proxy.requests if q["method"] == "POST" and "uploadId=" in q["query"]]
    t.eq(len(completes), 2, "the complete was sent twice (once by curl's resend)")


@case
def complete_is_safe_to_retry(t):
    """Issue 19: CompleteMultipartUpload went through but its reply was lost
    (or S3 put an error inside a 200 reply): the retry meets NoSuchUpload,
    which must be recognised as done when the object is the parts' join."""
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    data = rand_file(t.path("data"), 11 * MiB + 3)
    lost = proxy.rule("reset_reply", method="POST", query="uploadId=", times=1)
    s3.storage_tool("upload", "mp/lost", data, 5 * MiB, endpoint=proxy.endpoint, extra=RETRY)
    t.eq(lost.fired, 1, "the complete's reply was cut")
    s3.storage_tool("get", "mp/lost", t.path("back"))
    t.check(read(t.path("back")) == read(data), "object differs after a lost complete reply")
    proxy.clear_rules()
    e200 = proxy.rule("error200", method="POST", query="uploadId=", times=2)
    s3.storage_tool("upload", "mp/e200", data, 5 * MiB, endpoint=proxy.endpoint, extra=RETRY)
    t.eq(e200.fired, 2, "errors inside 200 replies")
    s3.storage_tool("get", "mp/e200", t.path("back"))
    t.check(read(t.path("back")) == read(data), "object differs after errors in 200 replies")
    # an upload that is really gone (aborted) is not mistaken for done
    up = s3.storage_tool("mpu-create", "mp/gone").stdout.decode().strip()
    s3.storage_tool("mpu-put", "mp/gone", up, 1, data, 0, 1000)
    s3.storage_tool("mpu-abort", "mp/gone", up)
    r = s3.storage_tool("mpu-complete", "mp/gone", up, check=False)
    t.eq(r.returncode, 3, "complete of an aborted upload: %s" % r.stderr.decode())
    t.check("NoSuchUpload" in r.stderr.decode(), r.stderr.decode())


@case
def downloads_resume_after_resets(t):
    """Half the GETs are cut mid-reply: cairn resumes each with a Range
    request from the first byte it has not delivered, so every byte
    arrives exactly once."""
    s3 = S3rver(t)
    big = rand_file(t.path("big"), 20 * MiB + 7)
    s3.storage_tool("put", "dl/big", big)
    proxy = FaultProxy(t, s3.port, rate=0.5, seed=5, kinds=("reset",), methods=("GET",))
    for i in range(4):
        s3.storage_tool("get", "dl/big", t.path("back"), endpoint=proxy.endpoint, extra=RETRY)
        t.check(read(t.path("back")) == read(big), "download %d differs" % i)
        r = s3.storage_tool("get", "dl/big", "-", 5 * MiB + 3, 3 * MiB, endpoint=proxy.endpoint,
                            extra=RETRY)
        t.check(r.stdout == read(big)[5 * MiB + 3: 8 * MiB + 3], "ranged download %d differs" % i)
    resumed = [e[3] for e in proxy.log if e[0] == "GET" and e[3] and
               not e[3].startswith("bytes=%d-" % (5 * MiB + 3))]
    t.check(proxy.counts["reset"] > 0 and resumed,
            "no download was cut and resumed: %s %s" % (proxy.counts, proxy.log[:6]))


@case
def persistent_errors_are_clear(t):
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    data = rand_file(t.path("data"), 100)

    def fails(*args, attempts="3"):
        r = s3.storage_tool(*args, endpoint=proxy.endpoint, check=False,
                            extra=("--attempts", attempts, "--backoff-ms", "5"))
        err = r.stderr.decode()
        t.check(r.returncode != 0, "%s succeeded" % (args,))
        t.eq(len(err.strip().splitlines()), 1, "one error line: %r" % err)
        return err

    proxy.canned = (403, "SignatureDoesNotMatch", "The request signature we calculated "
                    "does not match the signature you provided.")
    e = fails("put", "dir/key", data)
    t.check("s3://cairn/dir/key" in e and "SignatureDoesNotMatch" in e and
            "check the secret key" in e, "signature refused: %r" % e)
    t.eq(proxy.counts["canned"], 1, "a refused signature is not retried")
    proxy.canned = (403, "AccessDenied", "Access Denied")
    e = fails("get", "dir/key", data)
    t.check("AccessDenied" in e and "s3://cairn/dir/key" in e, "access denied: %r" % e)
    proxy.canned = (404, "NoSuchBucket", "The specified bucket does not exist")
    e = fails("list", "")
    t.check("bucket \"cairn\" does not exist" in e, "no such bucket: %r" % e)
    proxy.canned = (503, "SlowDown", "Please reduce your request rate.")
    proxy.counts["canned"] = 0
    e = fails("put", "k", data, attempts="4")
    t.check("after 4 attempts" in e and "SlowDown" in e and "s3://cairn/k" in e,
            "endless SlowDown: %r" % e)
    t.eq(proxy.counts["canned"], 4, "attempts made")
    proxy.canned = (200, "InternalError", "complete failed late")
    e = fails("upload", "mp", data, 5 * MiB)
    t.check("InternalError" in e or "UploadId" in e, "error inside a 200 reply: %r" % e)
    # a connection that breaks every time: said as it is, not "cannot reach"
    proxy.canned = None
    proxy.rule("reset", method="PUT", times=None)
    e = fails("put", "k", data)
    t.check("after 3 attempts" in e and "broke" in e and "cannot reach" not in e,
            "broken connections: %r" % e)


main()
