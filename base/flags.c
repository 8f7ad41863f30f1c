/* flags.c: table-driven flag parsing, see flags.h and flags.def. */
#include "config.h"
#include "base/flags.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const struct flag_def flag_table[F__COUNT] = {
#define FLAG(id, name, sh, env, type, def, meta, help) \
	{ name, sh, env, FT_##type, def, meta, help },
#include "base/flags.def"
#undef FLAG
};

static const char *const empty_list[] = { NULL };

static int
accepted(const enum flag_id *const *lists, enum flag_id id)
{
	for (size_t i = 0; lists[i] != NULL; i++)
		for (const enum flag_id *p = lists[i]; *p != F__END; p++)
			if (*p == id)
				return 1;
	return 0;
}

int
flags_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "true", "yes", "1", "on" };
	static const char *const no[] = { "false", "no", "0", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return CAIRN_EINVAL;
}

/* Store value (from source "src") into fs for flag id; type-checked. */
static int
set_value(struct flagset *fs, enum flag_id id, const char *value,
    const char *src, struct cairn_err *err)
{
	const struct flag_def *d = &flag_table[id];
	struct flagval *v = &fs->v[id];
	char *end;
	int b;

	switch (d->type) {
	case FT_STRING:
		break;
	case FT_INT:
		errno = 0;
		v->num = strtoll(value, &end, 10);
		if (errno != 0 || end == value || *end != '\0' || v->num < 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "invalid value \"%s\" for --%s%s: want a non-negative whole number",
			    value, d->name, src);
		break;
	case FT_BOOL:
		if (flags_parse_bool(value, &b) < 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "invalid value \"%s\" for --%s%s: want true or false",
			    value, d->name, src);
		v->num = b;
		break;
	case FT_DURATION:
		if (duration_parse(value, &v->num) < 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "invalid duration \"%s\" for --%s%s: want e.g. 500ms, 3s, 72h",
			    value, d->name, src);
		break;
	case FT_LIST: {
		char **add = str_split(value, ',', NULL);
		size_t n = strv_len(v->list), k = strv_len(add);

		v->list = xreallocarray(v->list, n + k + 1, sizeof *v->list);
		memcpy(v->list + n, add, (k + 1) * sizeof *add);
		free(add);
		break;
	}
	}
	free(v->str);
	v->str = xstrdup(value);
	return 0;
}

static int
find_long(const char *name, size_t len)
{
	for (int i = 0; i < F__COUNT; i++)
		if (strlen(flag_table[i].name) == len &&
		    strncmp(flag_table[i].name, name, len) == 0)
			return i;
	return -1;
}

static int
find_short(char c)
{
	for (int i = 0; i < F__COUNT; i++)
		if (flag_table[i].shortopt == c)
			return i;
	return -1;
}

int
flags_parse(struct flagset *fs, const enum flag_id *const *lists, int argc,
    const char *const *argv, struct cairn_err *err)
{
	int only_args = 0;

	memset(fs, 0, sizeof *fs);
	fs->args = xcalloc((size_t)argc + 1, sizeof *fs->args);
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *value = NULL, *name;
		char shown[64];
		int id;

		if (only_args || a[0] != '-' || a[1] == '\0') {
			fs->args[fs->nargs++] = xstrdup(a);
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_args = 1;
			continue;
		}
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);

			name = a + 2;
			id = find_long(name, len);
			if (eq != NULL)
				value = eq + 1;
			snprintf(shown, sizeof shown, "--%.*s", (int)len, name);
		} else {
			id = find_short(a[1]);
			if (a[2] != '\0')
				value = a + 2;
			snprintf(shown, sizeof shown, "-%c", a[1]);
		}
		if (id < 0 || !accepted(lists, (enum flag_id)id))
			return cairn_err_set(err, CAIRN_EINVAL,
			    "unknown flag %s", shown);
		if (value == NULL && flag_table[id].type == FT_BOOL) {
			value = "true";
		} else if (value == NULL) {
			if (i + 1 >= argc)
				return cairn_err_set(err, CAIRN_EINVAL,
				    "flag %s needs a value (%s)", shown,
				    flag_table[id].metavar);
			value = argv[++i];
		}
		if (set_value(fs, (enum flag_id)id, value, "", err) < 0)
			return err ? err->code : CAIRN_EINVAL;
		fs->v[id].given = 1;
	}
	for (int id = 0; id < F__COUNT; id++) {
		const struct flag_def *d = &flag_table[id];
		const char *env;

		if (fs->v[id].given || !accepted(lists, (enum flag_id)id))
			continue;
		env = d->env ? getenv(d->env) : NULL;
		if (env != NULL && *env != '\0') {
			char src[96];

			snprintf(src, sizeof src, " (from $%s)", d->env);
			if (set_value(fs, (enum flag_id)id, env, src, err) < 0)
				return err ? err->code : CAIRN_EINVAL;
			fs->v[id].given = 1;
		} else if (d->def != NULL) {
			if (set_value(fs, (enum flag_id)id, d->def, "", err) < 0)
				return err ? err->code : CAIRN_EINVAL;
		}
	}
	return 0;
}

void
flags_free(struct flagset *fs)
{
	for (int i = 0; i < F__COUNT; i++) {
		free(fs->v[i].str);
		strv_free(fs->v[i].list);
	}
	for (int i = 0; i < fs->nargs; i++)
		free(fs->args[i]);
	free(fs->args);
	memset(fs, 0, sizeof *fs);
}

const char *
flag_str(const struct flagset *fs, enum flag_id id)
{
	return fs->v[id].str;
}

int64_t
flag_int(const struct flagset *fs, enum flag_id id)
{
	return fs->v[id].num;
}

int
flag_bool(const struct flagset *fs, enum flag_id id)
{
	return fs->v[id].num != 0;
}

int64_t
flag_duration_us(const struct flagset *fs, enum flag_id id)
{
	return fs->v[id].num;
}

char **
flag_list(const struct flagset *fs, enum flag_id id)
{
	return fs->v[id].list ? fs->v[id].list : (char **)empty_list;
}

int
flag_given(const struct flagset *fs, enum flag_id id)
{
	return fs->v[id].given;
}

void
flags_help(struct buf *out, const enum flag_id *const *lists)
{
	for (int id = 0; id < F__COUNT; id++) {
		const struct flag_def *d = &flag_table[id];
		char left[96];
		int n;

		if (!accepted(lists, (enum flag_id)id))
			continue;
		if (d->shortopt)
			n = snprintf(left, sizeof left, "  -%c, --%s", d->shortopt,
			    d->name);
		else
			n = snprintf(left, sizeof left, "      --%s", d->name);
		if (d->type != FT_BOOL && n > 0 && (size_t)n < sizeof left)
			snprintf(left + n, sizeof left - (size_t)n, " %s",
			    d->metavar);
		if (strlen(left) > 34)
			buf_printf(out, "%s\n%36s", left, "");
		else
			buf_printf(out, "%-36s", left);
		buf_puts(out, d->help);
		if (d->def != NULL && d->type != FT_BOOL)
			buf_printf(out, " [default: %s]", d->def);
		if (d->env != NULL)
			buf_printf(out, " [env: %s]", d->env);
		buf_putc(out, '\n');
	}
}
