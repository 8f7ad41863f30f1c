/*
 * fault.h: named crash points for tests.
 *
 * The crash tests and the chaos suite (tests/chaos/) need a process to die
 * at one exact moment, e.g. between completing a tarball upload and
 * writing the phase Completed, which a kill from outside hits only by
 * luck. fault_point("name") is a no-op unless $CAIRN_FAULT names that
 * point: a comma-separated list of `name` (die at the first hit) or
 * `name@N` (die at the N-th hit, N >= 1), each optionally followed by
 * `:stop`. Dying is SIGKILL to the own process, i.e. exactly a kill -9 at
 * that line: no cleanup, no flush; `:stop` is SIGSTOP instead (the process
 * freezes there until a SIGCONT: a write delayed in flight).
 * The points are listed in docs/development.md.
 *
 * Thread-safe; the variable is read once, at the first call.
 */
#ifndef CAIRN_FAULT_H
#define CAIRN_FAULT_H

/* Die (or stop) now if $CAIRN_FAULT asks for this hit of point `name`. */
void fault_point(const char *name);

#endif
