"""s3rver.py: an S3 server for cairn's tests (s3rver from npm) and the aws CLI.

    from s3rver import S3rver
    s3 = S3rver(t)                  # started on a random loopback port
    s3.endpoint                     # "http://127.0.0.1:PORT"
    s3.create_bucket("other")       # more buckets ("cairn" exists already)
    S3rver(t, tls=True)             # https with a self-signed cert (s3.ca_file)
    S3rver(t, vhost=True)           # also serves <bucket>.s3.localhost
    s3.env                          # AWS_* variables (S3RVER / S3RVER)
    s3.creds_file                   # the same as an AWS credentials file
    s3.aws("s3", "cp", src, "s3://cairn/key")   # the real aws CLI against it
    s3.storage_tool("put", key, path)           # tests/helpers/storage_tool

s3rver is installed by `npm ci` at the repository root (package-lock.json
pins it). When it is missing the case FAILS with a clear message: CI
installs it, so a skip would hide a broken set-up. s3rver checks SigV4
signatures for the S3RVER/S3RVER credentials; tests/lib/s3rver_ext.js adds
ListParts and AbortMultipartUpload, which s3rver 3.7.1 lacks.
"""
import os
import shutil
import subprocess

from cairntest import BUILDDIR, SRCDIR, CheckFailed, wait_for

ACCESS_KEY = "S3RVER"
SECRET_KEY = "S3RVER"


def aws_cli():
    """The aws CLI to use: Debian's /usr/bin/aws first, else the one on PATH."""
    if os.access("/usr/bin/aws", os.X_OK):
        return "/usr/bin/aws"
    found = shutil.which("aws")
    if not found:
        raise CheckFailed("the aws CLI is not installed (Debian package awscli)")
    return found


def storage_tool_path():
    p = os.path.join(BUILDDIR, "tests", "helpers", "storage_tool")
    if not os.access(p, os.X_OK):
        raise CheckFailed("%s is not built (make tests/helpers/storage_tool)" % p)
    return p


class S3rver:
    def __init__(self, t, buckets=("cairn",), name="s3rver", tls=False, vhost=False):
        self.t = t
        binary = os.path.join(SRCDIR, "node_modules", ".bin", "s3rver")
        if not os.path.exists(binary):
            raise CheckFailed("s3rver is not installed: run `npm ci` in %s "
                              "(package-lock.json pins it)" % SRCDIR)
        node = shutil.which("node") or shutil.which("nodejs")
        if not node:
            raise CheckFailed("node is not installed (Debian package nodejs)")
        self.dir = t.mkdir(name)
        ready = os.path.join(self.dir, "ready")
        # s3rver makes continuation tokens with DES, which OpenSSL 3 only has
        # in its legacy provider: without it every truncated listing is a 500.
        legacy = subprocess.run([node, "--openssl-legacy-provider", "-e", "0"],
                                capture_output=True).returncode == 0
        argv = [node] + (["--openssl-legacy-provider"] if legacy else []) + [
                os.path.join(SRCDIR, "tests", "lib", "s3rver_ext.js"), SRCDIR,
                os.path.join(self.dir, "data"), ready] + list(buckets)
        env = None
        self.ca_file = None
        if tls:
            # a throw-away CA-less self-signed certificate for 127.0.0.1
            key, cert = os.path.join(self.dir, "key.pem"), os.path.join(self.dir, "cert.pem")
            r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                "-keyout", key, "-out", cert, "-days", "2", "-subj",
                                "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise CheckFailed("openssl could not make a certificate: %s" % r.stderr)
            env = {"S3RVER_KEY": key, "S3RVER_CERT": cert}
            self.ca_file = cert
        if vhost:
            env = dict(env or {}, S3RVER_SERVICE_ENDPOINT="localhost")
        self.proc = t.spawn(argv, name=name, env=env)
        wait_for(lambda: os.path.exists(ready) or not self.proc.alive(), 30,
                 "s3rver ready file")
        if not self.proc.alive():
            raise CheckFailed("s3rver exited: %s" % self.proc.output()[-2000:])
        with open(ready) as f:
            self.port = int(f.read().strip())
        self.endpoint = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)
        self.bucket = buckets[0] if buckets else None
        self.creds_file = os.path.join(self.dir, "credentials")
        with open(self.creds_file, "w") as f:
            f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    % (ACCESS_KEY, SECRET_KEY))
        self.env = {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_SHARED_CREDENTIALS_FILE": self.creds_file,
            "AWS_CONFIG_FILE": os.path.join(self.dir, "aws-config"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_PAGER": "",
        }
        with open(self.env["AWS_CONFIG_FILE"], "w") as f:
            f.write("[default]\nregion = us-east-1\n")

    def full_env(self, extra=None):
        env = dict(os.environ)
        for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            env.pop(k, None)
        env.update(self.env)
        if extra:
            env.update(extra)
        return env

    def aws(self, *args, check=True, timeout=300, endpoint=None):
        """Run the aws CLI against this server; returns CompletedProcess."""
        argv = [aws_cli(), "--endpoint-url", endpoint or self.endpoint] + [str(a) for a in args]
        if self.ca_file:
            argv[1:1] = ["--ca-bundle", self.ca_file]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           env=self.full_env())
        if check and r.returncode != 0:
            raise CheckFailed("aws %s failed (%d): %s" % (" ".join(map(str, args)),
                                                        r.returncode, r.stderr.strip()[-1500:]))
        return r

    def create_bucket(self, name):
        self.aws("s3api", "create-bucket", "--bucket", name)

    def tool_args(self, bucket=None, endpoint=None):
        """storage_tool options that open this server's bucket."""
        return ["--s3", bucket or self.bucket, "--endpoint", endpoint or self.endpoint,
                "--creds-file", self.creds_file]

    def storage_tool(self, *args, bucket=None, endpoint=None, check=True, timeout=300,
                     extra=()):
        argv = [storage_tool_path()] + list(extra) + self.tool_args(bucket, endpoint) + \
            [str(a) for a in args]
        r = subprocess.run(argv, capture_output=True, timeout=timeout, env=self.full_env())
        if check and r.returncode != 0:
            raise CheckFailed("storage_tool %s failed (%d): %s" % (
                " ".join(map(str, args)), r.returncode, r.stderr.decode(errors="replace")[-1500:]))
        return r
