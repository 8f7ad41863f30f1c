"""The CLI frame as a user meets it: help, version, usage errors, exit codes."""
from cairntest import case, main, cairn


@case
def version_lists_every_library(t):
    r = cairn("version")
    t.eq(r.returncode, 0, "exit code")
    t.check(r.stdout.startswith("cairn "), "first line names cairn: %r" % r.stdout[:80])
    for lib in ("sqlite", "libcurl", "cjson", "zlib", "libarchive", "libmicrohttpd",
                "libyaml", "libcrypto"):
        t.check(lib in r.stdout, "version output lacks %s" % lib)


@case
def help_lists_commands(t):
    r = cairn("--help")
    t.eq(r.returncode, 0, "exit code of --help")
    t.check("Usage: cairn COMMAND" in r.stdout and "version" in r.stdout, r.stdout)
    r2 = cairn("help")
    t.eq(r2.stdout, r.stdout, "cairn help == cairn --help")


@case
def command_help_three_ways(t):
    a = cairn("help", "version")
    b = cairn("version", "--help")
    c = cairn("version", "-h")
    for r in (a, b, c):
        t.eq(r.returncode, 0, "exit code")
        t.check("Usage: cairn version" in r.stdout, r.stdout)
        t.check("--log-level" in r.stdout and "CAIRN_LOG_LEVEL" in r.stdout,
                "help shows flags with their env vars")
    t.eq(a.stdout, b.stdout, "help version == version --help")


@case
def unknown_command_is_usage_error(t):
    r = cairn("frobnicate")
    t.eq(r.returncode, 2, "exit code")
    t.eq(r.stdout, "", "nothing on stdout")
    lines = r.stderr.strip().splitlines()
    t.eq(lines[0], 'cairn: unknown command "frobnicate"', "first stderr line")
    t.check(any("Usage:" in x for x in lines), "usage hint: %r" % r.stderr)


@case
def unknown_flag_is_usage_error(t):
    r = cairn("version", "--frobnicate")
    t.eq(r.returncode, 2, "exit code")
    t.eq(r.stderr.splitlines()[0], "cairn: unknown flag --frobnicate", "error line")
    r = cairn("--frobnicate")
    t.eq(r.returncode, 2, "exit code of a bare unknown flag")


@case
def bad_flag_value_is_usage_error(t):
    r = cairn("version", "--log-level", "loud")
    t.eq(r.returncode, 2, "exit code")
    t.check('unknown log level "loud"' in r.stderr, r.stderr)
    r = cairn("version", env={"CAIRN_LOG_FORMAT": "xml"})
    t.eq(r.returncode, 2, "bad env value is a usage error too")
    t.check("xml" in r.stderr, r.stderr)


@case
def no_arguments_prints_usage(t):
    r = cairn()
    t.eq(r.returncode, 2, "exit code")
    t.check("Usage: cairn COMMAND" in r.stdout, r.stdout)



@case
def unusable_kubeconfig_fails_cleanly_everywhere(t):
    """Every command that talks to the cluster says why and exits 1 (the
    schedule commands once went on with no client)."""
    bad = t.path("no-such-kubeconfig")
    for args in (["schedule", "get"], ["schedule", "pause", "s"], ["backup", "get"],
                 ["restore", "get"], ["backup", "create", "b"]):
        r = cairn(*(args + ["--kubeconfig", bad]))
        t.eq(r.returncode, 1, "%s exit code (%s)" % (" ".join(args), r.stderr))
        t.check(r.stderr.startswith("cairn: ") and "no-such-kubeconfig" in r.stderr,
                "%s: %r" % (" ".join(args), r.stderr))


main()
