#!/usr/bin/env python3
"""Benchmark (not a test): S3 upload and download throughput, cairn vs aws.

usage: bench_storage.py [--size MB] [--runs N]

On one s3rver (random loopback port), in the same run, for a SIZE MB
(default 200) random object:
  cairn put       one streamed PutObject from a file (UNSIGNED-PAYLOAD)
  cairn multipart the resumable flow: 8 MiB parts from the file, complete
  cairn get       one GetObject streamed to a file
  aws s3 cp       upload and download of the same bytes (its defaults:
                  8 MiB multipart chunks, 10 threads)
Prints MB/s per operation (best of N runs, default 2) and cairn/aws as a
ratio. s3rver itself (Node.js writing to disk) is usually the ceiling, so
the ratio is the figure that matters. Every download is checked against
the source (a benchmark that moves wrong bytes measures nothing).
"""
import argparse
import filecmp
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cairntest import Case  # noqa: E402
from s3rver import S3rver  # noqa: E402

MiB = 1 << 20


def timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    t = Case("bench_storage")
    try:
        s3 = S3rver(t)
        src = t.path("object")
        with open(src, "wb") as f:
            for _ in range(args.size):
                f.write(os.urandom(MiB))
        size_mb = args.size * MiB / 1e6
        best = {}

        def record(name, secs):
            best[name] = min(best.get(name, secs), secs)

        for run in range(args.runs):
            record("cairn put", timed(lambda: s3.storage_tool("put", "bench/cairn", src)))
            record("cairn multipart", timed(lambda: s3.storage_tool(
                "upload", "bench/cairn-mp", src, 8 * MiB)))
            out = t.path("cairn.back")
            record("cairn get", timed(lambda: s3.storage_tool("get", "bench/cairn", out)))
            if not filecmp.cmp(src, out, shallow=False):
                raise SystemExit("cairn download differs from the source")
            os.unlink(out)
            record("aws upload", timed(lambda: s3.aws("s3", "cp", "--quiet", src,
                                                     "s3://cairn/bench/aws")))
            out = t.path("aws.back")
            record("aws download", timed(lambda: s3.aws("s3", "cp", "--quiet",
                                                       "s3://cairn/bench/aws", out)))
            if not filecmp.cmp(src, out, shallow=False):
                raise SystemExit("aws download differs from the source")
            os.unlink(out)
        print("object: %d MiB on s3rver %s, best of %d runs" % (args.size, s3.endpoint, args.runs))
        for name in ("cairn put", "cairn multipart", "cairn get", "aws upload", "aws download"):
            print("  %-16s %7.1f MB/s  (%.2f s)" % (name, size_mb / best[name], best[name]))
        up = best["aws upload"] / best["cairn put"]
        upmp = best["aws upload"] / best["cairn multipart"]
        down = best["aws download"] / best["cairn get"]
        print("ratio cairn/aws upload (single put):  %.2f" % up)
        print("ratio cairn/aws upload (multipart):   %.2f" % upmp)
        print("ratio cairn/aws download:             %.2f" % down)
    finally:
        t.finish()


main()
