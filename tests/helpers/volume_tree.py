#!/usr/bin/env python3
"""volume_tree.py: make and compare directory trees for the volume tests.

  volume_tree.py make DIR [--mb N] [--seed S]
      A tree of about N MB (default 4) of incompressible and compressible
      files, with what a volume mover must keep: sparse files, relative and
      absolute symlinks (one pointing outside, one dangling), a symlink to a
      directory, unusual names (spaces, newline, UTF-8, backslash, leading
      dash, 200-byte name, deep nesting), empty files and directories,
      modes 0600/0750/0711/04755 and fixed times with nanoseconds.
  volume_tree.py compare A B
      Exit 0 when B has exactly A's entries with the same type, mode,
      size, bytes, symlink target and mtime (to the microsecond; directory
      times included). Differences are printed, one per line.
  volume_tree.py evil FILE
      A .tar.gz whose entries try to escape (../, absolute, write through a
      symlink) for the restore safety tests.
  volume_tree.py bytes DIR
      Print the logical size of the regular files (what totalBytes is).
  volume_tree.py change DIR [--percent P] [--seed S]
      Change P percent (default 1, at least one) of the non-empty regular
      files: 4 KiB of new random bytes at a random offset (the whole file
      when smaller), the file's mtime then set back to what it was, as a
      careless tool would (only its ctime tells). Prints the number of
      files and bytes changed.
"""
import io
import os
import random
import stat
import sys
import tarfile

NS = 1_000_000_000


def write_file(path, data, mode=0o644, t=None):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    if t is not None:
        os.utime(path, ns=(t, t), follow_symlinks=False)


def make(root, mb=4, seed=1):
    rnd = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    t0 = 1_700_000_000 * NS + 123_456_789
    budget = int(mb * 1024 * 1024)
    # Bulk: a few directories of files, half random, half compressible.
    i = 0
    while budget > 0:
        d = os.path.join(root, "data", "d%02d" % (i % 7))
        os.makedirs(d, exist_ok=True)
        size = min(budget, rnd.choice([1000, 40_000, 300_000, 2_000_000]))
        if i % 2:
            data = rnd.randbytes(size)
        else:
            data = (b"cairn volume line %d\n" % i) * (size // 20 + 1)
            data = data[:size]
        write_file(os.path.join(d, "f%04d.bin" % i), data, 0o644, t0 + i)
        budget -= size
        i += 1
    # Sparse: 64 MiB logical, 3 small data islands.
    sp = os.path.join(root, "sparse.img")
    with open(sp, "wb") as f:
        f.truncate(64 << 20)
        for off in (0, 20 << 20, (64 << 20) - 4096):
            f.seek(off)
            f.write(rnd.randbytes(4096))
    os.utime(sp, ns=(t0, t0))
    # A sparse file that is all hole.
    hole = os.path.join(root, "hole-only")
    with open(hole, "wb") as f:
        f.truncate(8 << 20)
    # Odd names.
    odd = os.path.join(root, "odd names")
    os.makedirs(odd, exist_ok=True)
    for name in ["with space", "new\nline", "üñíçødé-名前", "back\\slash",
                 "-leading-dash", "x" * 200, "quote\"s", "tab\there", "*star?"]:
        write_file(os.path.join(odd, name), name.encode() * 3, 0o640, t0 + 5)
    deep = os.path.join(root, *["lvl%d" % k for k in range(30)])
    os.makedirs(deep, exist_ok=True)
    write_file(os.path.join(deep, "bottom"), b"deep\n", 0o600, t0 + 7)
    # Modes and empties.
    write_file(os.path.join(root, "secret"), b"s3cr3t\n", 0o600, t0 + 1)
    write_file(os.path.join(root, "setuid-tool"), b"#!/bin/sh\n", 0o4755, t0 + 2)
    write_file(os.path.join(root, "empty"), b"", 0o644, t0 + 3)
    os.makedirs(os.path.join(root, "empty-dir"), exist_ok=True)
    os.makedirs(os.path.join(root, "private"), exist_ok=True)
    write_file(os.path.join(root, "private", "inner"), b"inner\n", 0o644, t0)
    os.chmod(os.path.join(root, "private"), 0o750)
    os.makedirs(os.path.join(root, "exec-only"), exist_ok=True)
    os.chmod(os.path.join(root, "exec-only"), 0o711)
    # Symlinks: relative, absolute outside, dangling, to a directory.
    os.symlink("secret", os.path.join(root, "link-rel"))
    os.symlink("/etc/passwd", os.path.join(root, "link-abs-outside"))
    os.symlink("does/not/exist", os.path.join(root, "link-dangling"))
    os.symlink("data", os.path.join(root, "link-dir"))
    os.symlink("../..", os.path.join(root, "odd names", "link-up"))
    for p in ("link-rel", "link-abs-outside", "link-dangling", "link-dir"):
        os.utime(os.path.join(root, p), ns=(t0, t0), follow_symlinks=False)
    # Directory times last (children changed them).
    for dirpath, dirnames, _ in os.walk(root, topdown=False):
        os.utime(dirpath, ns=(t0 + 9, t0 + 9))


def entries(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = p
    out["."] = root
    return out


def describe(p):
    st = os.lstat(p)
    d = {"type": stat.S_IFMT(st.st_mode), "mode": stat.S_IMODE(st.st_mode),
         "mtime_us": st.st_mtime_ns // 1000}
    if stat.S_ISLNK(st.st_mode):
        d["target"] = os.readlink(p)
        d.pop("mode")
    elif stat.S_ISREG(st.st_mode):
        d["size"] = st.st_size
    return d


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def compare(a, b):
    ea, eb = entries(a), entries(b)
    diffs = []
    for k in sorted(set(ea) | set(eb)):
        if k not in eb:
            diffs.append("missing in copy: %r" % k)
            continue
        if k not in ea:
            diffs.append("extra in copy: %r" % k)
            continue
        da, db = describe(ea[k]), describe(eb[k])
        if da != db:
            diffs.append("%r: %s != %s" % (k, da, db))
        elif da["type"] == stat.S_IFREG and not same_bytes(ea[k], eb[k]):
            diffs.append("%r: contents differ" % k)
    for d in diffs[:50]:
        print(d)
    return 0 if not diffs else 1


def evil(path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        def add(name, data=b"x", typ=tarfile.REGTYPE, link=""):
            ti = tarfile.TarInfo(name)
            ti.type = typ
            ti.linkname = link
            ti.size = len(data) if typ == tarfile.REGTYPE else 0
            tf.addfile(ti, io.BytesIO(data) if typ == tarfile.REGTYPE else None)
        add("ok-file", b"fine\n")
        add("escape", typ=tarfile.SYMTYPE, link="../outside-dir")
        add("escape/pwned", b"through a symlink\n")
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def evil_names(path, name):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo(name)
        ti.size = 5
        tf.addfile(ti, io.BytesIO(b"pwned"))
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def logical_bytes(root):
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for n in filenames:
            st = os.lstat(os.path.join(dirpath, n))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def change(root, percent=1.0, seed=7):
    rnd = random.Random(seed)
    files = []
    for dirpath, dirs, filenames in os.walk(root):
        dirs.sort()
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_size > 0:
                files.append(p)
    want = max(1, int(len(files) * percent / 100.0))
    nbytes = 0
    for p in rnd.sample(files, want):
        st = os.lstat(p)
        n = min(4096, st.st_size)
        off = rnd.randrange(0, st.st_size - n + 1)
        mode = stat.S_IMODE(st.st_mode)
        os.chmod(p, mode | 0o200)
        with open(p, "r+b") as f:
            f.seek(off)
            f.write(rnd.randbytes(n))
        os.chmod(p, mode)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        nbytes += n
    print(want, nbytes)


def options(rest, defaults):
    """--name value pairs over defaults (numbers)."""
    out = dict(defaults)
    while len(rest) >= 2:
        if rest[0] in out:
            out[rest[0]] = float(rest[1])
        rest = rest[2:]
    return out


def main(argv):
    if len(argv) >= 2 and argv[0] == "make":
        o = options(argv[2:], {"--mb": 4.0, "--seed": 1})
        make(argv[1], o["--mb"], int(o["--seed"]))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "evil":
        evil(argv[1])
        return 0
    if len(argv) == 3 and argv[0] == "evil-name":
        evil_names(argv[1], argv[2])
        return 0
    if len(argv) >= 2 and argv[0] == "change":
        o = options(argv[2:], {"--percent": 1.0, "--seed": 7})
        change(argv[1], o["--percent"], int(o["--seed"]))
        return 0
    if len(argv) == 2 and argv[0] == "bytes":
        print(logical_bytes(argv[1]))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
