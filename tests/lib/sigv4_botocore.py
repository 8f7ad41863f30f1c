"""sigv4_botocore.py: expected SigV4 signatures, computed by botocore.

Used by tests/unit/test_sigv4.c at test time. Reads a JSON list of requests
on stdin, signs each with botocore's S3SigV4Auth at the given fixed time,
and prints a JSON list of {"authorization": ..., "canonical": ...}.

Request fields: method, host, bucket (path-style, or "" for virtual-hosted),
key (raw; encoded here as botocore's REST serializer encodes {Key+}), params ([[name, value], ...], raw), headers ({name: value}),
body (hashed by botocore) or unsigned (true: UNSIGNED-PAYLOAD), region, time ("YYYYMMDDTHHMMSSZ"), access_key, secret_key,
token (optional).

botocore comes with awscli: the python3 on PATH may have it, or Debian's
awscli bundles it under /usr/lib/python3/dist-packages/awscli.
"""
import datetime
import json
import sys
from unittest import mock

try:
    import botocore.auth
except ImportError:
    sys.path.insert(0, "/usr/lib/python3/dist-packages/awscli")
    try:
        import botocore.auth
    except ImportError:
        sys.stderr.write("sigv4_botocore.py: botocore is not installed (Debian package awscli)\n")
        sys.exit(2)
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode


def sign(rq):
    creds = Credentials(rq["access_key"], rq["secret_key"], rq.get("token"))
    auth = botocore.auth.S3SigV4Auth(creds, "s3", rq["region"])
    headers = {k: v for k, v in rq["headers"].items() if k.lower() != "host"}
    path = ("/" + rq["bucket"]) if rq["bucket"] else ""
    if rq["key"]:
        path += "/" + percent_encode(rq["key"], safe="/~")
    elif not rq["bucket"]:
        path = "/"
    req = AWSRequest(method=rq["method"], url="http://%s%s" % (rq["host"], path),
                     headers=headers, params=dict(rq["params"]),
                     data=rq.get("body", "").encode())
    if rq.get("unsigned"):
        # what botocore sends for streamed bodies over TLS
        auth.payload = lambda request: botocore.auth.UNSIGNED_PAYLOAD
    when = datetime.datetime.strptime(rq["time"], "%Y%m%dT%H%M%SZ")
    canonical = {}
    orig = auth.canonical_request

    def capture(request):
        canonical["text"] = orig(request)
        return canonical["text"]
    auth.canonical_request = capture
    if hasattr(botocore.auth, "get_current_datetime"):
        with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
            auth.add_auth(req)
    else:
        with mock.patch.object(botocore.auth, "datetime") as dt:
            dt.datetime.utcnow.return_value = when
            auth.add_auth(req)
    return {"authorization": req.headers["Authorization"], "canonical": canonical["text"]}


def main():
    reqs = json.load(sys.stdin)
    json.dump([sign(r) for r in reqs], sys.stdout)
    sys.stdout.write("\n")


main()
