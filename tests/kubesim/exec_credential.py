#!/usr/bin/env python3
"""A kubeconfig exec credential plugin for kubesim (client.authentication.k8s.io/v1),
as aws-iam-authenticator, gke-gcloud-auth-plugin or kubelogin are for real
clusters: asks kubesim for a token valid --ttl seconds and prints an
ExecCredential with its expirationTimestamp. --count-file FILE appends a line
per run (tests count how often a client re-runs the plugin).

usage: exec_credential.py --server URL --name USER [--ttl SECONDS] [--count-file FILE]"""

import argparse
import json
import ssl
import sys
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--ttl", type=float, default=3600)
    ap.add_argument("--count-file")
    o = ap.parse_args()
    if o.count_file:
        with open(o.count_file, "a") as f:
            f.write("run\n")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE      # loopback only, /_sim/ is kubesim's test API
    req = urllib.request.Request(o.server + "/_sim/tokens", method="POST",
                                 data=json.dumps({"name": o.name, "ttl": o.ttl}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        tok = json.loads(r.read())
    json.dump({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {},
               "status": {"token": tok["token"], "expirationTimestamp": tok["expirationTimestamp"]}}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
