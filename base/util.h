/*
 * util.h: small string helpers shared by every module: escaping untrusted
 * text for logs, JSON and HTML, glob matching, splitting lists, randomness.
 */
#ifndef CAIRN_UTIL_H
#define CAIRN_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"

/* Append s with control chars, backslash and non-UTF-8 bytes escaped. */
int str_escape_text(struct buf *b, const char *s);
/* Append s as a quoted JSON string. */
int str_escape_json(struct buf *b, const char *s);
/* Append s with & < > " ' replaced by entities. */
int str_escape_html(struct buf *b, const char *s);

/*
 * UTF-8. Text from outside (plugins, API errors, file names) is capped and
 * formatted into status, logs and messages; the API server and JSON
 * readers refuse or mangle invalid UTF-8, so everything cairn emits is
 * valid: strict RFC 3629 (no overlong forms, surrogates or values past
 * U+10FFFF).
 *
 * str_utf8_cut: the largest n <= len such that s[0..n) does not end inside
 * a multi-byte character (a cut point for a cap of len bytes).
 * str_utf8_valid: 1 if the len bytes at s are valid UTF-8 without NUL
 * issues (NUL is valid UTF-8), else 0.
 * str_utf8_fix: an owned NUL-terminated copy of len bytes with every byte
 * of an invalid sequence, and every NUL, replaced by U+FFFD.
 * str_format / str_vformat: snprintf into dst of cap bytes that, when it
 * must truncate, cuts before a partial character; returns the length.
 */
size_t str_utf8_cut(const char *s, size_t len);
int str_utf8_valid(const char *s, size_t len);
char *str_utf8_fix(const char *s, size_t len);
size_t str_format(char *dst, size_t cap, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);
size_t str_vformat(char *dst, size_t cap, const char *fmt, va_list ap);

/* Shell-style glob with '*' and '?' only (Velero's namespace globs). */
int str_glob(const char *pattern, const char *s);
/* Does s match any pattern of the NULL-terminated list pats (str_glob)? */
int strv_glob_any(char *const *pats, const char *s);
int str_has_prefix(const char *s, const char *prefix);
int str_has_suffix(const char *s, const char *suffix);
/*
 * Compare two relative paths ('/'-separated) component by component,
 * bytewise: the order of a depth-first walk that sorts each directory's
 * names, where a directory comes before everything inside it ("a" <
 * "a/z" < "a-b", unlike strcmp). <0, 0, >0 as strcmp.
 */
int str_path_cmp(const char *a, const char *b);

/*
 * Split s on sep into a NULL-terminated array of trimmed, non-empty owned
 * strings (free with strv_free). *n_out (may be NULL) gets the count.
 */
char **str_split(const char *s, char sep, size_t *n_out);
void strv_free(char **v);
size_t strv_len(char *const *v);
/* Append a copy of s to v (NULL: a new array); returns the array. */
char **strv_push(char **v, const char *s);
int strv_contains(char *const *v, const char *s);

/* Fill p with n random bytes from getrandom(2). */
void rand_bytes(void *p, size_t n);
/* A random RFC 4122 version-4 UUID, 36 chars + NUL. */
void rand_uuid(char out[37]);
/* Uniform random in [0, n). */
uint64_t rand_below(uint64_t n);

/*
 * A Kubernetes resource quantity as a whole number of bytes: digits with
 * an optional fraction and a suffix Ki Mi Gi Ti Pi Ei (powers of 1024) or
 * k M G T P E (powers of 1000), rounded up ("1.5Gi", "10G", "1048576").
 * 0, or -1 for anything else (exponents, milli, negative, overflow).
 */
int str_parse_quantity(const char *s, uint64_t *bytes);

/* Human sizes: "1.5 MiB". out has 32 bytes. */
void fmt_bytes(uint64_t n, char out[32]);

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void str_hex(const unsigned char *p, size_t n, char *out);

/*
 * How many CPUs this process may use: the CPUs of its affinity mask
 * (sched_getaffinity: taskset, cpusets), fewer when its cgroup's CPU
 * quota says so (cgroup v2 cpu.max, v1 cpu.cfs_quota_us: a container's
 * resources.limits.cpu, rounded up). At least 1. cgroup_root: where
 * the cgroup's files are (NULL: /sys/fs/cgroup).
 */
int util_cpus_at(const char *cgroup_root);
int util_cpus(void);

/*
 * Write all n bytes of p to fd, through short writes and EINTR: 0, or -1
 * with errno set (EIO for a write that wrote nothing).
 */
int util_write_all(int fd, const void *p, size_t n);
/* The same at file offset off (pwrite: fd's own offset is left alone). */
int util_pwrite_all(int fd, const void *p, size_t n, int64_t off);

/*
 * A new unlinked temporary file "<dir>/cairn-<what>.XXXXXX" (dir NULL or
 * "": $TMPDIR, else /tmp), open for reading and writing, close-on-exec:
 * its fd, or -1 with errno set. Spools that are gone with the process.
 */
int util_tmpfd(const char *dir, const char *what);
/* Where util_tmpfd(dir, ...) makes its file, for messages. */
const char *util_tmpdir_label(const char *dir);

/*
 * Name the calling thread "cairn-<role>" (cut to the kernel's 15 bytes),
 * so `top -H`, `ps -L`, perf and gdb tell the walk from a list fetcher or
 * a compression thread. Called first thing in each thread's main.
 */
void util_thread_name(const char *role);

#endif
