"""bench_incremental: deduplicated hostpath copies for thin uplinks (issue 25).

A volume of CAIRN_BENCH_INCR_MB (default 1024) MB of real files (no sparse
file): half incompressible blobs, half text-like logs with varying fields
(about 3:1 under gzip), in files of 16 KiB to 2 MiB over a few dozen
directories. Each round:

  1. a first copy of the volume (the mover, fresh store) and `tar czf` of
     the same tree;
  2. 1% of the files changed in place (4 KiB of new bytes each, mtime set
     back: only ctime tells), then a second copy built on the first and
     `tar czf` again.

Printed per copy: bytes uploaded (index + chunk packs) and seconds, beside
tar czf's output size and seconds; the second copy's upload as a percentage
of the volume's bytes (the acceptance bound is under 3%). Medians of
CAIRN_BENCH_REPS rounds (default 3; the machine may be shared, so the
ratios are of the same round). The first round also restores both copies
and compares them with the trees they were taken of (byte-identical, modes,
times, links: tests/helpers/volume_tree.py compare; a difference is
printed as FAILED), each beside `tar xzf` of that round's tar czf output.
Figures only, never pass/fail.
"""
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

SRC = os.environ["CAIRN_SRCDIR"]
BUILD = os.environ["CAIRN_BUILDDIR"]
TMP = os.environ.get("CAIRN_TMP", "/tmp")
MB = float(os.environ.get("CAIRN_BENCH_INCR_MB", "1024"))
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "3")))
MOVER = os.path.join(BUILD, "tests", "helpers", "volume_mover")
TREE = os.path.join(SRC, "tests", "helpers", "volume_tree.py")
PV = "pv-bench"


def make_tree(root):
    rnd = random.Random(42)
    left = int(MB * (1 << 20))
    words = [b"GET", b"PUT", b"POST", b"/api/v1/items", b"/healthz", b"200", b"404",
             b"user=alice", b"user=bob", b"latency_ms=", b"bytes=", b"cache=hit", b"cache=miss"]
    i = 0
    while left > 0:
        size = min(left, rnd.choice([16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20]))
        d = os.path.join(root, "d%02d" % (i % 40))
        os.makedirs(d, exist_ok=True)
        if i % 2:
            data = os.urandom(size)
        else:
            lines, n = [], 0
            while n < size:
                ln = b"2026-12-%02dT%02d:%02d:%02dZ %s %s %d %s%d\n" % (
                    rnd.randrange(1, 29), rnd.randrange(24), rnd.randrange(60), rnd.randrange(60),
                    rnd.choice(words), rnd.choice(words), rnd.randrange(10 ** 6), rnd.choice(words),
                    rnd.randrange(10 ** 5))
                lines.append(ln)
                n += len(ln)
            data = b"".join(lines)[:size]
        with open(os.path.join(d, "f%05d.%s" % (i, "bin" if i % 2 else "log")), "wb") as f:
            f.write(data)
        left -= size
        i += 1
    return i


def timed(argv):
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("%s failed: %s%s" % (" ".join(argv[:2]), r.stdout, r.stderr))
    return dt, r.stdout


def field(out, name):
    toks = out.split()
    return int(toks[toks.index(name) + 1])


def copy(store, backup, src, parent=None):
    argv = [MOVER, "backup", store, "backups/%s/volumes/%s.index.tar.gz" % (backup, PV), src,
            "--chunks", "plugins/cairn-hostpath/%s/" % PV, "--backup", backup]
    if parent:
        argv += ["--parent", parent, "backups/%s/volumes/%s.index.tar.gz" % (parent, PV)]
    dt, out = timed(argv)
    return dt, field(out, "uploaded"), out.strip()


def restore_check(store, backup, want, label, tgz):
    dst = os.path.join(TMP, "restored-" + backup)
    shutil.rmtree(dst, ignore_errors=True)
    dt, _ = timed([MOVER, "restore", store, "backups/%s/volumes/%s.index.tar.gz" % (backup, PV), dst,
                   "--chunks", "plugins/cairn-hostpath/%s/" % PV])
    r = subprocess.run([sys.executable, TREE, "compare", want, dst], capture_output=True, text=True)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    dx, _ = timed(["tar", "xzf", tgz, "-C", dst])
    shutil.rmtree(dst, ignore_errors=True)
    os.unlink(tgz)
    print("restore of the %s copy: %6.2f s (tar xzf of its tar czf %6.2f s, ratio %.2f), %s" % (
        label, dt, dx, dt / dx,
        "byte-identical" if r.returncode == 0 else "FAILED: " + (r.stdout + r.stderr)[:500]))


def tar_czf(src, keep_as=None):
    out = keep_as or os.path.join(TMP, "tar.tar.gz")
    dt, _ = timed(["tar", "czf", out, "-C", src, "."])
    size = os.path.getsize(out)
    if keep_as is None:
        os.unlink(out)
    return dt, size


def main():
    if not os.path.exists(MOVER):
        print("volume_mover not built (make check builds it)")
        return
    src = os.path.join(TMP, "vol")
    nfiles = make_tree(src)
    subprocess.run(["sync"])
    nbytes = int(subprocess.run([sys.executable, TREE, "bytes", src], capture_output=True,
                                text=True).stdout)
    subprocess.run(["tar", "cf", "/dev/null", "-C", src, "."])  # warm the page cache
    print("volume: %d files, %.0f MiB, no sparse file; %d round(s)" % (nfiles, nbytes / 2 ** 20, REPS))
    rows = []
    for rep in range(REPS):
        store = os.path.join(TMP, "store-%d" % rep)
        t1, u1, out1 = copy(store, "first", src)
        tgz1, tgz2 = (os.path.join(TMP, "first.tar.gz"), os.path.join(TMP, "second.tar.gz")) \
            if rep == 0 else (None, None)
        tt1, ts1 = tar_czf(src, tgz1)
        keep = None
        if rep == 0:
            keep = os.path.join(TMP, "vol-first")
            subprocess.run(["cp", "-a", src, keep], check=True)
        ch = subprocess.run([sys.executable, TREE, "change", src, "--percent", "1", "--seed",
                             str(100 + rep)], capture_output=True, text=True, check=True).stdout.split()
        t2, u2, out2 = copy(store, "second", src, parent="first")
        tt2, ts2 = tar_czf(src, tgz2)
        rows.append((t1, u1, tt1, ts1, t2, u2, tt2, ts2))
        print("round %d: %s files changed (%s bytes)" % (rep + 1, ch[0], ch[1]))
        print("  first copy : %7.2f s uploaded %8.1f MiB  | tar czf %7.2f s %8.1f MiB" % (
            t1, u1 / 2 ** 20, tt1, ts1 / 2 ** 20))
        print("  second copy: %7.2f s uploaded %8.1f MiB  | tar czf %7.2f s %8.1f MiB" % (
            t2, u2 / 2 ** 20, tt2, ts2 / 2 ** 20))
        print("  (%s)" % out2)
        if rep == 0:
            restore_check(store, "first", keep, "first", tgz1)
            restore_check(store, "second", src, "second", tgz2)
            shutil.rmtree(keep, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)
    med = [statistics.median(r[k] for r in rows) for k in range(8)]
    t1, u1, tt1, ts1, t2, u2, tt2, ts2 = med
    print("medians of %d: first copy %.2f s / %.1f MiB uploaded; second copy %.2f s / %.2f MiB "
          "uploaded; tar czf %.2f s / %.1f MiB" % (REPS, t1, u1 / 2 ** 20, t2, u2 / 2 ** 20, tt1,
                                                   ts1 / 2 ** 20))
    print("second copy uploads %.2f%% of the volume's bytes (%.2f%% of tar czf's output)" % (
        100.0 * u2 / nbytes, 100.0 * u2 / ts2))
    print("ratio first copy / tar czf: time %.2f, bytes %.2f" % (t1 / tt1, u1 / ts1))
    print("ratio second copy / tar czf: time %.2f, bytes %.3f" % (t2 / tt2, u2 / ts2))


main()
