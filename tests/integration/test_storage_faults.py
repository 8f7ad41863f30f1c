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
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0.10, seed=20261202)
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
    for kind in ("slowdown", "500", "reset"):
        t.check(proxy.counts[kind] > 0, "no %s fault was injected: %s" % (kind, proxy.counts))


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


main()
