/*
 * itemlog.c: Velero-style log lines of a Backup or Restore. See itemlog.h.
 */
#include "config.h"
#include "engine/itemlog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "journal/journal.h"

static int
needs_quotes(const char *v)
{
	if (v[0] == '\0')
		return 1;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '=' || *p == 0x7f)
			return 1;
	return 0;
}

int
itemlog_kv(struct buf *b, const char *key, const char *value)
{
	int rc = 0;

	if (value == NULL)
		value = "";
	if (b->len > 0)
		rc = buf_putc(b, ' ');
	if (rc == 0)
		rc = buf_puts(b, key);
	if (rc == 0)
		rc = buf_putc(b, '=');
	if (rc == 0)
		rc = needs_quotes(value) ? str_escape_json(b, value) :
		    buf_puts(b, value);
	return rc;
}

void
itemlog_event(const struct itemlog *l, const char *level, const char *fields,
    const char *fmt, ...)
{
	char line[JOURNAL_EVENT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (fields == NULL)
		fields = "";
	if (strcmp(level, "error") == 0)
		log_error("%s %s/%s: %s%s%s", l->kind, l->namespace, l->name,
		    line, fields[0] ? " " : "", fields);
	else if (strcmp(level, "warning") == 0)
		log_warn("%s %s/%s: %s%s%s", l->kind, l->namespace, l->name,
		    line, fields[0] ? " " : "", fields);
	else
		log_info("%s %s/%s: %s%s%s", l->kind, l->namespace, l->name,
		    line, fields[0] ? " " : "", fields);
	if (l->journal != NULL && l->jid > 0)
		(void)journal_event_kv(l->journal, l->jid, level, fields, NULL,
		    "%s", line);
}

struct render {
	const struct itemlog *l;
	struct buf *out;
	int rc;
};

static int
render_line(int64_t at_us, const char *level, const char *line,
    const char *fields, void *arg)
{
	struct render *r = arg;
	char ts[TIME_STR_MAX], obj[2 * 256 + 2];

	time_format_micro(at_us, ts);
	snprintf(obj, sizeof obj, "%s/%s", r->l->namespace, r->l->name);
	buf_printf(r->out, "time=\"%s\" level=%s msg=", ts, level);
	str_escape_json(r->out, line);
	itemlog_kv(r->out, r->l->kind, obj);	/* out is not empty: " k=v" */
	if (fields[0] != '\0') {
		buf_putc(r->out, ' ');
		buf_puts(r->out, fields);
	}
	if (buf_putc(r->out, '\n') < 0) {
		r->rc = CAIRN_ETOOBIG;
		return 1;	/* the cap: stop, what fits is kept */
	}
	return 0;
}

int
itemlog_render(const struct itemlog *l, struct buf *out, struct cairn_err *err)
{
	struct render r = { l, out, 0 };

	if (l->journal == NULL || l->jid <= 0)
		return 0;
	return journal_events_foreach(l->journal, l->jid, render_line, &r, err);
}
