/* log.c: leveled text or JSON-lines logging, see log.h. */
#include "config.h"
#include "base/log.h"
#include "base/buf.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static atomic_int log_level = LOG_INFO;
static atomic_int log_json;
static const char *log_component;

static const char *const level_names[] = {
	"error", "warn", "info", "debug", "trace"
};

void
log_set_level(enum log_level level)
{
	log_level = level;
}

void
log_set_json(int json)
{
	log_json = json;
}

void
log_set_component(const char *name)
{
	log_component = name;
}

int
log_enabled(enum log_level level)
{
	return (int)level <= log_level;
}

int
log_configure(const char *level, const char *format, struct cairn_err *err)
{
	if (level != NULL) {
		int found = -1;

		for (int i = 0; i <= LOG_TRACE; i++)
			if (strcasecmp(level, level_names[i]) == 0)
				found = i;
		if (strcasecmp(level, "warning") == 0)
			found = LOG_WARN;
		if (found < 0)
			return cairn_err_set(err, CAIRN_EINVAL,
			    "unknown log level \"%s\" (want error, warn, info, debug or trace)",
			    level);
		log_level = found;
	}
	if (format != NULL) {
		if (strcmp(format, "json") == 0)
			log_json = 1;
		else if (strcmp(format, "text") == 0)
			log_json = 0;
		else
			return cairn_err_set(err, CAIRN_EINVAL,
			    "unknown log format \"%s\" (want text or json)",
			    format);
	}
	return 0;
}

void
log_write(enum log_level level, const char *func, const char *fmt, ...)
{
	char ts[TIME_STR_MAX], msg[4096];
	struct buf line;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	time_format_micro(time_now_us(), ts);
	buf_init(&line, 3 * sizeof msg);
	if (log_json) {
		buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"%s\"", ts,
		    level_names[level]);
		if (log_component != NULL) {
			buf_puts(&line, ",\"server\":");
			str_escape_json(&line, log_component);
		}
		buf_printf(&line, ",\"func\":\"%s\",\"msg\":", func);
		str_escape_json(&line, msg);
		buf_puts(&line, "}\n");
	} else {
		buf_printf(&line, "%s %-5s ", ts, level_names[level]);
		if (log_component != NULL)
			buf_printf(&line, "[%s] ", log_component);
		buf_printf(&line, "%s: ", func);
		str_escape_text(&line, msg);
		buf_putc(&line, '\n');
	}
	(void)!write(STDERR_FILENO, line.data, line.len);
	buf_free(&line);
}
