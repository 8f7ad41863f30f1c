/*
 * log.h: one line per event on stderr, as text or JSON lines.
 *
 *   text: 2026-12-02T12:00:00.123456Z INFO  backup_run: claimed b1 attempt=1
 *   json: {"ts":"...","level":"info","func":"backup_run","msg":"claimed b1 attempt=1"}
 *
 * The level is checked before anything is formatted (the macros below).
 * The formatted message is escaped as a whole (control characters, quotes
 * in JSON), so untrusted text such as an object name or an API error can
 * never forge a log line. Each line is one write(2): safe across threads.
 */
#ifndef CAIRN_LOG_H
#define CAIRN_LOG_H

#include "base/err.h"

/* LOG_NONE: nothing is logged (a CLI command reports its own errors). */
enum log_level { LOG_NONE = -1, LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG,
	LOG_TRACE };

/* Configure from strings ("error".."trace", "text"|"json"). */
int log_configure(const char *level, const char *format, struct cairn_err *err);
void log_set_level(enum log_level level);
void log_set_json(int json);
/* Extra static field in every line (e.g. the server id); NULL to clear. */
void log_set_component(const char *name);
int log_enabled(enum log_level level);
void log_write(enum log_level level, const char *func, const char *fmt, ...)
	CAIRN_PRINTF(3, 4);

#define LOG_AT(lvl, ...) do {						\
	if (log_enabled(lvl))						\
		log_write(lvl, __func__, __VA_ARGS__);			\
} while (0)
#define log_error(...)	LOG_AT(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)	LOG_AT(LOG_WARN, __VA_ARGS__)
#define log_info(...)	LOG_AT(LOG_INFO, __VA_ARGS__)
#define log_debug(...)	LOG_AT(LOG_DEBUG, __VA_ARGS__)
#define log_trace(...)	LOG_AT(LOG_TRACE, __VA_ARGS__)

#endif
