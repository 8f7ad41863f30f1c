#!/usr/bin/env python3
"""tests/run.sh itself: expected failures (XFAIL) do not fail the suite, an
unexpected pass (XPASS) does, and the last line stays `N passed, N failed`
at its start. Runs the real runner on a throw-away tree of tiny tests, in
Python (cairntest's @case(xfail=...)) and C (unit.h's XRUN)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main, SRCDIR  # noqa: E402

PY_TEST = '''
from cairntest import case, main
@case
def plain_pass(t):
    pass
@case(xfail="#99: the known bug")
def known_bug(t):
    t.eq(1, 2, "the bug")
%s
main()
'''

XPASS_CASE = '''
@case(xfail="#98: a bug that got fixed")
def fixed_bug(t):
    pass
'''

C_TEST = r'''
#include "unit.h"
static void test_ok(void) { CHECK(1 == 1); }
static void test_known(void) { CHECK(1 == 2); }
static void test_fixed(void) { CHECK(1 == 1); }
int main(void) {
	RUN(test_ok);
	XRUN(test_known, "#97: the known C bug");
	%s
	return unit_done();
}
'''


def tree(t, name, py_extra="", c_extra=""):
    """A source/build tree holding one Python and (when cc exists) one C test."""
    root = t.mkdir(name)
    os.makedirs(os.path.join(root, "tests", "integration"))
    os.makedirs(os.path.join(root, "tests", "unit"))
    os.symlink(os.path.join(SRCDIR, "tests", "lib"), os.path.join(root, "tests", "lib"))
    with open(os.path.join(root, "tests", "integration", "test_fake.py"), "w") as f:
        f.write(PY_TEST % py_extra)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        src = os.path.join(root, "test_cfake.c")
        with open(src, "w") as f:
            f.write(C_TEST % c_extra)
        subprocess.run([cc, "-std=c11", "-I", os.path.join(SRCDIR, "tests", "unit"), "-o",
                        os.path.join(root, "tests", "unit", "test_cfake"), src], check=True)
    return root, bool(cc)


def run(t, root):
    env = dict(os.environ, CAIRN_SRCDIR=root, CAIRN_BUILDDIR=root, TMPDIR=t.dir)
    env.pop("CAIRN_TMP", None)
    return subprocess.run(["sh", os.path.join(SRCDIR, "tests", "run.sh")], capture_output=True, text=True,
                          env=env, timeout=120)


@case
def xfail_is_not_a_failure(t):
    root, with_c = tree(t, "ok")
    r = run(t, root)
    lines = r.stdout.splitlines()
    t.eq(r.returncode, 0, "runner exit code (output: %s)" % r.stdout[-1500:])
    t.check("XFAIL: test_fake.py:known_bug: #99: the known bug" in lines, "XFAIL line: %s" % r.stdout)
    if with_c:
        t.check("XFAIL: test_cfake.c:test_known: #97: the known C bug" in lines, "C XFAIL line: %s" % r.stdout)
        t.eq(lines[-1], "2 passed, 0 failed, 2 expected failures", "last line")
    else:
        t.eq(lines[-1], "1 passed, 0 failed, 1 expected failures", "last line")


@case
def xpass_is_a_failure(t):
    root, with_c = tree(t, "xpass", XPASS_CASE, 'XRUN(test_fixed, "#96: a fixed C bug");')
    r = run(t, root)
    lines = r.stdout.splitlines()
    t.eq(r.returncode, 1, "runner exit code (output: %s)" % r.stdout[-1500:])
    t.check("XPASS: test_fake.py:fixed_bug: #98: a bug that got fixed" in lines, "XPASS line: %s" % r.stdout)
    want = "1 passed, 1 failed, 1 expected failures"
    if with_c:
        t.check("XPASS: test_cfake.c:test_fixed: #96: a fixed C bug" in lines, "C XPASS line: %s" % r.stdout)
        want = "2 passed, 2 failed, 2 expected failures"
    t.eq(lines[-1], want, "last line")


@case
def xfail_needs_an_issue(t):
    try:
        case(xfail="some bug")
    except ValueError:
        return
    t.check(False, "an xfail reason without #N was accepted")


main()
