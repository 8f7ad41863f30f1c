"""docs/cli.md is what the binary says: `cairn help --markdown` (the
command and flag tables) followed by docs/cli-notes.md. A command, flag,
default or help text changed without `make docs` fails here."""
import difflib
import os
import subprocess

from cairntest import BIN, SRCDIR, case, main


@case
def cli_md_matches_the_binary(t):
    r = subprocess.run([BIN, "help", "--markdown"], capture_output=True, text=True, timeout=30)
    t.eq(r.returncode, 0, "cairn help --markdown: %s" % r.stderr)
    with open(os.path.join(SRCDIR, "docs", "cli-notes.md")) as f:
        want = r.stdout + f.read()
    with open(os.path.join(SRCDIR, "docs", "cli.md")) as f:
        have = f.read()
    diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                        "docs/cli.md (committed)", "generated", n=1))
    t.check(have == want, "docs/cli.md is out of date; run `make docs` in a build "
            "directory and commit it:\n%s" % diff[:4000])
    for c in ("server", "backup delete", "restore create", "backup-location get"):
        t.check("\n## cairn %s\n" % c in have, "section for cairn %s" % c)
    t.check("--markdown" not in subprocess.run([BIN, "--help"], capture_output=True,
                                               text=True).stdout, "hidden from --help")


main()
