/*
 * flags.h: command-line parsing driven by the one table in flags.def.
 *
 * A command passes the flag ids it accepts; flags_parse() fills a flagset
 * from argv, then environment variables, then defaults, checking each value
 * against its type. Errors name the flag and the bad value and return
 * CAIRN_EINVAL (the CLI exits 2).
 */
#ifndef CAIRN_FLAGS_H
#define CAIRN_FLAGS_H

#include <stdint.h>
#include "base/buf.h"
#include "base/err.h"

enum flag_type { FT_STRING, FT_INT, FT_BOOL, FT_DURATION, FT_LIST };

enum flag_id {
#define FLAG(id, name, sh, env, type, def, meta, help) F_##id,
#include "base/flags.def"
#undef FLAG
	F__COUNT,
	F__END = -1	/* terminates a list of flag ids */
};

struct flag_def {
	const char *name;	/* long name without "--" */
	char shortopt;		/* single letter or 0 */
	const char *env;	/* environment variable or NULL */
	enum flag_type type;
	const char *def;	/* default as text, NULL for none */
	const char *metavar;	/* shown in help */
	const char *help;
};

extern const struct flag_def flag_table[F__COUNT];

struct flagval {
	int given;		/* 1 if from argv or env, 0 if default/unset */
	char *str;		/* owned text value (NULL if unset) */
	int64_t num;		/* INT, BOOL, DURATION (microseconds) */
	char **list;		/* LIST: NULL-terminated, owned */
};

struct flagset {
	struct flagval v[F__COUNT];
	char **args;		/* positional arguments (owned copies) */
	int nargs;
};

/*
 * Parse argv (without the program and command words). lists is a
 * NULL-terminated array of F__END-terminated flag id arrays: the flags this
 * command accepts. On error fs still has to be freed.
 */
int flags_parse(struct flagset *fs, const enum flag_id *const *lists,
	int argc, const char *const *argv, struct cairn_err *err);
void flags_free(struct flagset *fs);

const char *flag_str(const struct flagset *fs, enum flag_id id);
int64_t flag_int(const struct flagset *fs, enum flag_id id);
int flag_bool(const struct flagset *fs, enum flag_id id);
int64_t flag_duration_us(const struct flagset *fs, enum flag_id id);
char **flag_list(const struct flagset *fs, enum flag_id id);	/* borrowed, never NULL */
int flag_given(const struct flagset *fs, enum flag_id id);

/* Parse a boolean word: true/false, yes/no, 1/0, on/off. */
int flags_parse_bool(const char *s, int *out);
/* Append the help lines for the listed flags to out. */
void flags_help(struct buf *out, const enum flag_id *const *lists);

#endif
