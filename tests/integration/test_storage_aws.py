"""Interoperability of cairn's S3 backend with the real aws CLI, on s3rver.

What cairn writes (small objects, a 50 MB multipart upload, odd keys) is
read back byte-identical with `aws s3 cp`; what aws writes (including its
own multipart uploads) is read by cairn; listings agree, across pages.
"""
import base64
import json
import os
import subprocess

from cairntest import case, main
from faultproxy import FaultProxy
from s3rver import S3rver, storage_tool_path

MiB = 1 << 20

ODD_KEYS = [
    "with space/a b c.txt",
    "plus+equals=/a+b=c",
    "unicod\u00e9/\u65e5\u672c\u8a9e/\u00fc\u00f1\u00ee.json",
    "deep/" + "/".join("level%02d" % i for i in range(24)) + "/leaf.gz",
    "punct/(1)!*'~,;@$&.txt",
]


def rand_file(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


@case
def cairn_writes_aws_reads(t):
    s3 = S3rver(t)
    small = rand_file(t.path("small"), 1000)
    s3.storage_tool("put", "small/one", small)
    s3.aws("s3", "cp", "s3://cairn/small/one", t.path("small.aws"))
    t.check(read(t.path("small.aws")) == read(small), "small object differs when read by aws")
    big = rand_file(t.path("big"), 50 * MiB)
    out = s3.storage_tool("upload", "big/fifty", big, 8 * MiB).stdout.decode()
    t.check(out.count("part ") == 7 and "completed" in out, "7 parts of 8 MiB: %s" % out)
    s3.aws("s3", "cp", "s3://cairn/big/fifty", t.path("big.aws"))
    t.check(read(t.path("big.aws")) == read(big), "50 MB multipart object differs when read by aws")
    head = json.loads(s3.aws("s3api", "head-object", "--bucket", "cairn", "--key",
                             "big/fifty").stdout)
    t.eq(head["ContentLength"], 50 * MiB, "size aws sees")
    # store_put's own multipart (unknown length)
    s3.storage_tool("put-stream", "big/stream", big)
    s3.aws("s3", "cp", "s3://cairn/big/stream", t.path("stream.aws"))
    t.check(read(t.path("stream.aws")) == read(big), "streamed put differs when read by aws")


@case
def aws_writes_cairn_reads(t):
    s3 = S3rver(t)
    small = rand_file(t.path("small"), 777)
    s3.aws("s3", "cp", small, "s3://cairn/from-aws/small")
    s3.storage_tool("get", "from-aws/small", t.path("small.cairn"))
    t.check(read(t.path("small.cairn")) == read(small), "aws's small object differs in cairn")
    big = rand_file(t.path("big"), 20 * MiB + 3)  # aws uploads this in 8 MiB parts
    s3.aws("s3", "cp", big, "s3://cairn/from-aws/big")
    s3.storage_tool("get", "from-aws/big", t.path("big.cairn"))
    t.check(read(t.path("big.cairn")) == read(big), "aws's multipart object differs in cairn")
    size = int(s3.storage_tool("head", "from-aws/big").stdout.split()[0])
    t.eq(size, 20 * MiB + 3, "size cairn sees")
    # a range of aws's object
    r = s3.storage_tool("get", "from-aws/big", "-", 8 * MiB - 5, 10).stdout
    t.check(r == read(big)[8 * MiB - 5: 8 * MiB + 5], "ranged read across aws's part boundary")


@case
def odd_keys_round_trip(t):
    s3 = S3rver(t)
    data = {k: os.urandom(100 + i) for i, k in enumerate(ODD_KEYS)}
    # cairn -> aws: cairn puts, aws copies the whole prefix down
    for key, body in data.items():
        with open(t.path("src"), "wb") as f:
            f.write(body)
        s3.storage_tool("put", "c/" + key, t.path("src"))
    down = t.mkdir("down")
    s3.aws("s3", "cp", "--recursive", "--quiet", "s3://cairn/c/", down)
    for key, body in data.items():
        t.check(read(os.path.join(down, key)) == body, "aws reads cairn's %r" % key)
    listed = json.loads(s3.aws("s3api", "list-objects-v2", "--bucket", "cairn",
                               "--prefix", "c/").stdout)
    t.eq(sorted(o["Key"] for o in listed["Contents"]), sorted("c/" + k for k in ODD_KEYS),
         "keys aws lists for cairn's objects")
    # aws -> cairn: aws copies a tree up, cairn lists and reads it
    s3.aws("s3", "cp", "--recursive", "--quiet", down, "s3://cairn/a/")
    out = s3.storage_tool("list", "a/").stdout.decode()
    t.eq(sorted(line[2:].rsplit(" ", 2)[0] for line in out.splitlines()),
         sorted("a/" + k for k in ODD_KEYS), "keys cairn lists for aws's objects")
    for i, (key, body) in enumerate(data.items()):
        s3.storage_tool("get", "a/" + key, t.path("y%d" % i))
        t.check(read(t.path("y%d" % i)) == body, "cairn reads aws's %r" % key)


@case
def listing_pages(t):
    """More keys than one ListObjectsV2 page (1000): continuation tokens."""
    s3 = S3rver(t)
    src = t.mkdir("many")
    for i in range(1050):
        with open(os.path.join(src, "k%04d" % i), "w") as f:
            f.write(str(i))
    s3.aws("s3", "cp", "--recursive", "--quiet", src, "s3://cairn/many/", timeout=600)
    out = s3.storage_tool("list", "many/").stdout.decode().splitlines()
    t.eq(len(out), 1050, "keys listed across pages")
    t.eq(sorted(line.split()[1] for line in out), ["many/k%04d" % i for i in range(1050)],
         "every key once")
    out = s3.storage_tool("list", "", "/").stdout.decode().splitlines()
    t.eq(out, ["P many/"], "one common prefix for the whole tree")
    # DeleteObjects in batches of 1000
    t.eq(s3.storage_tool("delete-prefix", "many/").stdout.decode().strip(), "1050",
         "deleted by prefix")
    t.eq(s3.aws("s3", "ls", "--recursive", "s3://cairn/many/", check=False).stdout, "",
         "aws sees nothing left")


@case
def tls_custom_ca(t):
    """https endpoint with a self-signed certificate: trusted through a CA
    file, through a BSL's objectStorage.caCert, refused otherwise."""
    s3 = S3rver(t, tls=True)
    data = rand_file(t.path("data"), 3000)
    s3.storage_tool("put", "tls/obj", data, extra=("--ca-file", s3.ca_file))
    s3.aws("s3", "cp", "s3://cairn/tls/obj", t.path("aws"))
    t.check(read(t.path("aws")) == read(data), "aws reads over TLS")
    r = s3.storage_tool("get", "tls/obj", t.path("x"), check=False)
    err = r.stderr.decode()
    t.check(r.returncode == 1 and "cannot reach" in err and "certificate" in err.lower()
            and len(err.strip().splitlines()) == 1, "untrusted certificate: %r" % err)
    s3.storage_tool("get", "tls/obj", t.path("insecure"), extra=("--insecure",))
    t.check(read(t.path("insecure")) == read(data), "insecureSkipTLSVerify")
    with open(s3.ca_file, "rb") as f:
        ca_b64 = base64.b64encode(f.read()).decode()
    bsl = {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
           "metadata": {"name": "tls"},
           "spec": {"provider": "s3", "objectStorage": {"bucket": "cairn", "caCert": ca_b64},
                    "config": {"endpoint": s3.endpoint, "region": "us-east-1"}}}
    with open(t.path("bsl.json"), "w") as f:
        json.dump(bsl, f)
    r = subprocess.run([storage_tool_path(), "--bsl", t.path("bsl.json"), "--creds-file",
                        s3.creds_file, "get", "tls/obj", t.path("bsl.back")],
                       capture_output=True, text=True, env=s3.full_env())
    t.check(r.returncode == 0, "BSL caCert: %s" % r.stderr)
    t.check(read(t.path("bsl.back")) == read(data), "bytes through a caCert location")


@case
def virtual_hosted_addressing(t):
    """Without forcePathStyle cairn addresses <bucket>.<host>/<key>."""
    s3 = S3rver(t, vhost=True)
    proxy = FaultProxy(t, s3.port, rate=0)  # only to see the requests
    ep = "http://s3.localhost:%d" % proxy.port
    big = rand_file(t.path("big"), 6 * MiB + 5)
    s3.storage_tool("put", "vh/small key", t.path("big"), endpoint=ep)
    s3.storage_tool("upload", "vh/mp", big, 5 * MiB, endpoint=ep)
    out = s3.storage_tool("list", "vh/", endpoint=ep).stdout.decode()
    t.eq(sorted(line[2:].rsplit(" ", 2)[0] for line in out.splitlines()),
         ["vh/mp", "vh/small key"], "vhost listing")
    s3.storage_tool("get", "vh/mp", t.path("back"), endpoint=ep)
    t.check(read(t.path("back")) == read(big), "vhost multipart read back")
    hosts = {entry[1] for entry in proxy.log}
    t.eq(hosts, {"cairn.s3.localhost:%d" % proxy.port}, "Host headers sent")
    t.check(all(not entry[2].startswith("/cairn") for entry in proxy.log),
            "no path-style request: %s" % proxy.log[:3])
    # and the path-style view of the same bucket agrees
    s3.aws("s3", "cp", "s3://cairn/vh/mp", t.path("aws"))
    t.check(read(t.path("aws")) == read(big), "aws reads the vhost upload")


def signed(req):
    """The header names the request's SigV4 signature covers."""
    auth = req["headers"].get("authorization", "")
    part = [p for p in auth.split(", ") if p.startswith("SignedHeaders=")]
    return set(part[0][len("SignedHeaders="):].split(";")) if part else set()


def kind(req):
    q = req["query"]
    if req["method"] == "POST" and ("uploads" in q.split("&") or "uploads=" in q.split("&")):
        return "create"
    if req["method"] == "POST" and "uploadId=" in q:
        return "complete"
    if req["method"] == "PUT" and "partNumber=" in q:
        return "part"
    return {"PUT": "put", "GET": "get", "HEAD": "head"}.get(req["method"], req["method"])


@case
def sse_headers_on_every_write(t):
    """Storage-side encryption (issue 22): SSE-S3 and SSE-KMS headers on
    every request that creates an object (PutObject, CreateMultipartUpload),
    SSE-C headers on every request that carries or reads content (also
    UploadPart, GetObject, HeadObject), each one signed, as S3 requires;
    the data round-trips. Checked on the requests the proxy saw."""
    s3 = S3rver(t)
    proxy = FaultProxy(t, s3.port, rate=0)
    big = rand_file(t.path("big"), 6 * MiB + 5)
    small = rand_file(t.path("small"), 1000)
    ssec = os.urandom(32)
    with open(t.path("ssec"), "wb") as f:
        f.write(ssec)
    kms = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    modes = {
        "sse-s3": (["--sse", "AES256"],
                   {"x-amz-server-side-encryption": "AES256"}, ("put", "create")),
        "sse-kms": (["--sse", "aws:kms", "--kms-key-id", kms],
                    {"x-amz-server-side-encryption": "aws:kms",
                     "x-amz-server-side-encryption-aws-kms-key-id": kms}, ("put", "create")),
        "sse-c": (["--sse-c-key-file", t.path("ssec")],
                  {"x-amz-server-side-encryption-customer-algorithm": "AES256",
                   "x-amz-server-side-encryption-customer-key": base64.b64encode(ssec).decode(),
                   "x-amz-server-side-encryption-customer-key-md5":
                       base64.b64encode(__import__("hashlib").md5(ssec).digest()).decode()},
                  ("put", "create", "part", "get", "head")),
    }
    for mode, (flags, want, carriers) in modes.items():
        del proxy.requests[:]
        tool = lambda *a: s3.storage_tool(*a, endpoint=proxy.endpoint, extra=flags)  # noqa: E731
        tool("put", mode + "/small", small)
        tool("upload", mode + "/big", big, 5 * MiB)
        tool("get", mode + "/big", t.path("back"))
        t.check(read(t.path("back")) == read(big), "%s: data differs" % mode)
        tool("head", mode + "/small")
        seen = set()
        for req in proxy.requests:
            k = kind(req)
            has = {h: req["headers"].get(h) for h in want}
            if k in carriers:
                seen.add(k)
                t.eq(has, want, "%s: headers of %s %s" % (mode, k, req["path"]))
                missing = set(want) - signed(req)
                t.check(not missing, "%s: %s does not sign %s" % (mode, k, missing))
            else:
                t.check(not any(has.values()), "%s: %s carries SSE headers" % (mode, k))
        t.eq(seen, set(carriers), "%s: requests seen" % mode)
    r = s3.storage_tool("put", "x", small, endpoint=proxy.endpoint,
                        extra=["--sse", "aws:kms", "--sse-c-key-file", t.path("ssec")], check=False)
    t.check(r.returncode != 0 and b"cannot be used together" in r.stderr, r.stderr)


main()
