/*
 * selector.c: Kubernetes label selectors, parsed and matched in C.
 *
 * Grammar (apimachinery/pkg/labels): requirements joined by ',' (AND);
 * each is `key`, `!key`, `key=value`, `key==value`, `key!=value`,
 * `key in (v1,v2)`, `key notin (v1,v2)`, `key>N`, `key<N`. Spaces are
 * allowed around tokens. Keys are qualified names: an optional DNS
 * subdomain prefix (<= 253) and '/', then a name of <= 63 characters of
 * [A-Za-z0-9-_.] beginning and ending alphanumeric. Values are empty or
 * such a name. `!=` and `notin` also match objects without the key.
 *
 * The parser works on a private copy split into tokens; every error names
 * the requirement and what was expected (CAIRN_EINVAL).
 */
#include "config.h"
#include "kube/internal.h"
#include "base/buf.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define SEL_MAX_LEN (64u << 10)
#define SEL_NAME_MAX 63
#define SEL_PREFIX_MAX 253

enum sel_op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS,
    OP_GT, OP_LT };

struct sel_req {
	char *key;
	enum sel_op op;
	char **values;		/* NULL-terminated, never NULL */
	long long num;		/* OP_GT, OP_LT */
};

struct kube_selector {
	struct sel_req *reqs;
	size_t n;
};

void
kube_selector_free(struct kube_selector *sel)
{
	size_t i;

	if (sel == NULL)
		return;
	for (i = 0; i < sel->n; i++) {
		free(sel->reqs[i].key);
		strv_free(sel->reqs[i].values);
	}
	free(sel->reqs);
	free(sel);
}

static int
name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > SEL_NAME_MAX)
		return 0;
	if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' &&
		    s[i] != '_' && s[i] != '.')
			return 0;
	return 1;
}

static int
prefix_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > SEL_PREFIX_MAX)
		return 0;
	if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) ||
		    isdigit((unsigned char)s[i]) || s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

static int
key_ok(const char *k)
{
	const char *slash = strchr(k, '/');

	if (slash == NULL)
		return name_ok(k, strlen(k));
	return prefix_ok(k, (size_t)(slash - k)) &&
	    name_ok(slash + 1, strlen(slash + 1));
}

static int
value_ok(const char *v)
{
	return *v == '\0' || name_ok(v, strlen(v));
}

/* ---- the scanner ---- */

struct lex {
	const char *s;
	size_t pos;
	const char *all;	/* whole selector, for messages */
};

static void
skip_ws(struct lex *l)
{
	while (l->s[l->pos] == ' ' || l->s[l->pos] == '\t')
		l->pos++;
}

static int
is_ident_char(char c)
{
	return c != '\0' && c != ' ' && c != '\t' && c != ',' && c != '(' &&
	    c != ')' && c != '=' && c != '!' && c != '<' && c != '>';
}

/* Read an identifier (key or value); owned, "" if none. */
static char *
read_ident(struct lex *l)
{
	size_t b;

	skip_ws(l);
	b = l->pos;
	while (is_ident_char(l->s[l->pos]))
		l->pos++;
	return xstrndup(l->s + b, l->pos - b);
}

static int
fail(struct cairn_err *err, struct lex *l, const char *what)
{
	return cairn_err_set(err, CAIRN_EINVAL,
	    "label selector \"%s\": at character %zu: %s", l->all,
	    l->pos + 1, what);
}

static int
parse_req(struct lex *l, struct sel_req *r, struct cairn_err *err)
{
	char *v;
	const char *p;

	r->values = xcalloc(1, sizeof(char *));
	skip_ws(l);
	if (l->s[l->pos] == '!') {
		l->pos++;
		r->op = OP_NOTEXISTS;
		r->key = read_ident(l);
		if (!key_ok(r->key))
			return fail(err, l, "expected a label key after '!'");
		return 0;
	}
	r->key = read_ident(l);
	if (*r->key == '\0')
		return fail(err, l, "expected a label key");
	if (!key_ok(r->key))
		return fail(err, l, "invalid label key (a qualified name: "
		    "[prefix/]name, name <= 63 of [A-Za-z0-9-_.])");
	skip_ws(l);
	p = l->s + l->pos;
	if (*p == '\0' || *p == ',') {
		r->op = OP_EXISTS;
		return 0;
	}
	if (p[0] == '=' && p[1] == '=') {
		r->op = OP_EQ;
		l->pos += 2;
	} else if (p[0] == '=') {
		r->op = OP_EQ;
		l->pos += 1;
	} else if (p[0] == '!' && p[1] == '=') {
		r->op = OP_NE;
		l->pos += 2;
	} else if (p[0] == '>' || p[0] == '<') {
		char *end;

		r->op = p[0] == '>' ? OP_GT : OP_LT;
		l->pos += 1;
		v = read_ident(l);
		r->num = strtoll(v, &end, 10);
		if (*v == '\0' || *end != '\0') {
			free(v);
			return fail(err, l, "'>' and '<' need an integer value");
		}
		free(v);
		return 0;
	} else if (strncmp(p, "in", 2) == 0 || strncmp(p, "notin", 5) == 0) {
		int notin = p[0] == 'n';

		r->op = notin ? OP_NOTIN : OP_IN;
		l->pos += notin ? 5 : 2;
		skip_ws(l);
		if (l->s[l->pos] != '(')
			return fail(err, l, "expected '(' after in/notin");
		l->pos++;
		for (;;) {
			size_t n;

			v = read_ident(l);
			if (!value_ok(v)) {
				free(v);
				return fail(err, l, "invalid label value (<= 63 "
				    "of [A-Za-z0-9-_.], alphanumeric at both "
				    "ends)");
			}
			n = strv_len(r->values);
			r->values = xreallocarray(r->values, n + 2,
			    sizeof(char *));
			r->values[n] = v;
			r->values[n + 1] = NULL;
			skip_ws(l);
			if (l->s[l->pos] == ',') {
				l->pos++;
				continue;
			}
			if (l->s[l->pos] == ')') {
				l->pos++;
				break;
			}
			return fail(err, l, "expected ',' or ')' in a value "
			    "list");
		}
		if (strv_len(r->values) == 1 && *r->values[0] == '\0')
			return fail(err, l, "in/notin need at least one value");
		return 0;
	} else {
		return fail(err, l, "expected one of =, ==, !=, in, notin, "
		    "<, > or ','");
	}
	v = read_ident(l);
	if (!value_ok(v)) {
		free(v);
		return fail(err, l, "invalid label value (<= 63 of "
		    "[A-Za-z0-9-_.], alphanumeric at both ends)");
	}
	r->values = xreallocarray(r->values, 2, sizeof(char *));
	r->values[0] = v;
	r->values[1] = NULL;
	return 0;
}

int
kube_selector_parse(const char *s, struct kube_selector **out,
    struct cairn_err *err)
{
	struct kube_selector *sel;
	struct lex l;
	int rc;

	*out = NULL;
	sel = xcalloc(1, sizeof *sel);
	if (s == NULL)
		s = "";
	if (strlen(s) > SEL_MAX_LEN) {
		kube_selector_free(sel);
		return cairn_err_set(err, CAIRN_EINVAL,
		    "label selector longer than %u bytes", SEL_MAX_LEN);
	}
	memset(&l, 0, sizeof l);
	l.s = s;
	l.all = s;
	skip_ws(&l);
	if (s[l.pos] == '\0') {
		*out = sel;
		return 0;
	}
	for (;;) {
		sel->reqs = xreallocarray(sel->reqs, sel->n + 1,
		    sizeof *sel->reqs);
		memset(&sel->reqs[sel->n], 0, sizeof sel->reqs[sel->n]);
		sel->n++;
		rc = parse_req(&l, &sel->reqs[sel->n - 1], err);
		if (rc < 0) {
			kube_selector_free(sel);
			return rc;
		}
		skip_ws(&l);
		if (s[l.pos] == '\0')
			break;
		if (s[l.pos] != ',') {
			rc = fail(err, &l, "expected ',' between requirements");
			kube_selector_free(sel);
			return rc;
		}
		l.pos++;
	}
	*out = sel;
	return 0;
}

int
kube_selector_empty(const struct kube_selector *sel)
{
	return sel == NULL || sel->n == 0;
}

int
kube_selector_match(const struct kube_selector *sel, const cJSON *labels)
{
	size_t i;

	if (sel == NULL)
		return 1;
	if (!cJSON_IsObject(labels))
		labels = NULL;
	for (i = 0; i < sel->n; i++) {
		const struct sel_req *r = &sel->reqs[i];
		const cJSON *l = labels ? cJSON_GetObjectItemCaseSensitive(
		    labels, r->key) : NULL;
		const char *v = cJSON_IsString(l) ? l->valuestring : NULL;
		char *end;
		long long n;

		switch (r->op) {
		case OP_EQ:
		case OP_IN:
			if (v == NULL || !strv_contains(r->values, v))
				return 0;
			break;
		case OP_NE:
		case OP_NOTIN:
			if (v != NULL && strv_contains(r->values, v))
				return 0;
			break;
		case OP_EXISTS:
			if (v == NULL)
				return 0;
			break;
		case OP_NOTEXISTS:
			if (v != NULL)
				return 0;
			break;
		case OP_GT:
		case OP_LT:
			if (v == NULL)
				return 0;
			n = strtoll(v, &end, 10);
			if (*v == '\0' || *end != '\0')
				return 0;
			if (r->op == OP_GT ? !(n > r->num) : !(n < r->num))
				return 0;
			break;
		}
	}
	return 1;
}

int
kube_selector_match_object(const struct kube_selector *sel, const cJSON *obj)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	return kube_selector_match(sel, md ?
	    cJSON_GetObjectItemCaseSensitive(md, "labels") : NULL);
}

static void
sel_expr(cJSON *exprs, const char *key, const char *op, char *const *values)
{
	cJSON *e = cJSON_CreateObject(), *va;

	cJSON_AddStringToObject(e, "key", key);
	cJSON_AddStringToObject(e, "operator", op);
	if (values != NULL && values[0] != NULL) {
		va = cJSON_AddArrayToObject(e, "values");
		for (size_t j = 0; values[j] != NULL; j++)
			cJSON_AddItemToArray(va, cJSON_CreateString(values[j]));
	}
	cJSON_AddItemToArray(exprs, e);
}

int
kube_selector_object(const char *text, cJSON **out, struct cairn_err *err)
{
	struct kube_selector *sel = NULL;
	cJSON *obj, *labels, *exprs;
	int rc;

	*out = NULL;
	rc = kube_selector_parse(text, &sel, err);
	if (rc < 0)
		return rc;
	obj = cJSON_CreateObject();
	labels = cJSON_CreateObject();
	exprs = cJSON_CreateArray();
	for (size_t i = 0; sel != NULL && i < sel->n; i++) {
		const struct sel_req *r = &sel->reqs[i];

		switch (r->op) {
		case OP_EQ:
			if (cJSON_GetObjectItemCaseSensitive(labels, r->key) ==
			    NULL)
				cJSON_AddStringToObject(labels, r->key,
				    r->values[0]);
			else
				sel_expr(exprs, r->key, "In", r->values);
			break;
		case OP_NE:
		case OP_NOTIN:
			sel_expr(exprs, r->key, "NotIn", r->values);
			break;
		case OP_IN:
			sel_expr(exprs, r->key, "In", r->values);
			break;
		case OP_EXISTS:
			sel_expr(exprs, r->key, "Exists", NULL);
			break;
		case OP_NOTEXISTS:
			sel_expr(exprs, r->key, "DoesNotExist", NULL);
			break;
		case OP_GT:
		case OP_LT:
			rc = cairn_err_set(err, CAIRN_EINVAL, "\"%s%c%lld\": a "
			    "label selector object has no > or <", r->key,
			    r->op == OP_GT ? '>' : '<', r->num);
			break;
		}
	}
	kube_selector_free(sel);
	if (rc < 0) {
		cJSON_Delete(labels);
		cJSON_Delete(exprs);
		cJSON_Delete(obj);
		return rc;
	}
	if (labels->child != NULL)
		cJSON_AddItemToObject(obj, "matchLabels", labels);
	else
		cJSON_Delete(labels);
	if (exprs->child != NULL)
		cJSON_AddItemToObject(obj, "matchExpressions", exprs);
	else
		cJSON_Delete(exprs);
	*out = obj;
	return 0;
}

char *
kube_selector_string(const struct kube_selector *sel)
{
	struct buf b;
	size_t i, j;

	buf_init(&b, SEL_MAX_LEN * 2);
	buf_append(&b, "", 0);
	for (i = 0; sel != NULL && i < sel->n; i++) {
		const struct sel_req *r = &sel->reqs[i];

		if (i > 0)
			buf_putc(&b, ',');
		switch (r->op) {
		case OP_EQ:
			buf_printf(&b, "%s=%s", r->key, r->values[0]);
			break;
		case OP_NE:
			buf_printf(&b, "%s!=%s", r->key, r->values[0]);
			break;
		case OP_IN:
		case OP_NOTIN:
			buf_printf(&b, "%s %s (", r->key, r->op == OP_IN ?
			    "in" : "notin");
			for (j = 0; r->values[j] != NULL; j++)
				buf_printf(&b, "%s%s", j ? "," : "",
				    r->values[j]);
			buf_putc(&b, ')');
			break;
		case OP_EXISTS:
			buf_puts(&b, r->key);
			break;
		case OP_NOTEXISTS:
			buf_printf(&b, "!%s", r->key);
			break;
		case OP_GT:
		case OP_LT:
			buf_printf(&b, "%s%c%lld", r->key, r->op == OP_GT ?
			    '>' : '<', r->num);
			break;
		}
	}
	return buf_take(&b, NULL);
}

int
kube_selector_text(const cJSON *sel, char **out, struct cairn_err *err)
{
	struct buf b;
	const cJSON *ml, *me, *it, *v;
	int first = 1;

	*out = NULL;
	buf_init(&b, 64 << 10);
	if (sel == NULL || cJSON_IsNull(sel)) {
		*out = buf_take(&b, NULL);
		if (*out == NULL)
			*out = xstrdup("");
		return 0;
	}
	if (!cJSON_IsObject(sel)) {
		buf_free(&b);
		return cairn_err_set(err, CAIRN_EINVAL, "not an object");
	}
	ml = cJSON_GetObjectItemCaseSensitive(sel, "matchLabels");
	cJSON_ArrayForEach(it, ml) {
		if (!cJSON_IsString(it)) {
			cairn_err_set(err, CAIRN_EINVAL, "matchLabels value "
			    "of \"%s\" is not a string", it->string);
			goto fail;
		}
		buf_printf(&b, "%s%s=%s", first ? "" : ",", it->string,
		    it->valuestring);
		first = 0;
	}
	me = cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions");
	cJSON_ArrayForEach(it, me) {
		const char *key = json_str(it, "key");
		const char *op = json_str(it, "operator");
		const cJSON *vals = cJSON_GetObjectItemCaseSensitive(it, "values");
		int nv = cJSON_IsArray(vals) ? cJSON_GetArraySize(vals) : 0;

		if (key == NULL || op == NULL) {
			cairn_err_set(err, CAIRN_EINVAL, "matchExpressions "
			    "entry needs key and operator");
			goto fail;
		}
		buf_puts(&b, first ? "" : ",");
		first = 0;
		if (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0) {
			int k = 0;

			if (nv == 0) {
				cairn_err_set(err, CAIRN_EINVAL, "%s: operator "
				    "%s needs values", key, op);
				goto fail;
			}
			buf_printf(&b, "%s %s (", key,
			    op[0] == 'I' ? "in" : "notin");
			cJSON_ArrayForEach(v, vals) {
				if (!cJSON_IsString(v)) {
					cairn_err_set(err, CAIRN_EINVAL,
					    "%s: values must be strings", key);
					goto fail;
				}
				buf_printf(&b, "%s%s", k++ ? "," : "",
				    v->valuestring);
			}
			buf_putc(&b, ')');
		} else if (strcmp(op, "Exists") == 0 ||
		    strcmp(op, "DoesNotExist") == 0) {
			if (nv != 0) {
				cairn_err_set(err, CAIRN_EINVAL, "%s: operator "
				    "%s takes no values", key, op);
				goto fail;
			}
			buf_printf(&b, "%s%s", op[0] == 'D' ? "!" : "", key);
		} else {
			cairn_err_set(err, CAIRN_EINVAL, "\"%s\" is not a valid "
			    "label selector operator", op);
			goto fail;
		}
	}
	*out = buf_take(&b, NULL);
	if (*out == NULL)
		*out = xstrdup("");
	return 0;
fail:
	buf_free(&b);
	return err != NULL ? err->code : CAIRN_EINVAL;
}
