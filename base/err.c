/* err.c: the error convention, see err.h. */
#include "config.h"
#include "base/err.h"
#include "base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int
cairn_err_set(struct cairn_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return code;
	err->code = code;
	va_start(ap, fmt);
	(void)str_vformat(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return code;
}

int
cairn_err_errno(struct cairn_err *err, int code, int errnum, const char *fmt,
    ...)
{
	va_list ap;
	size_t len;

	if (err == NULL)
		return code;
	err->code = code;
	va_start(ap, fmt);
	len = str_vformat(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	(void)str_format(err->msg + len, sizeof err->msg - len, ": %s",
	    strerror(errnum));
	return code;
}

int
cairn_err_prefix(struct cairn_err *err, const char *fmt, ...)
{
	char old[CAIRN_ERR_MSG_MAX];
	va_list ap;
	int n;

	if (err == NULL)
		return CAIRN_EFAIL;
	memcpy(old, err->msg, sizeof old);
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof err->msg && old[0] != '\0')
		(void)str_format(err->msg + n, sizeof err->msg - (size_t)n,
		    ": %s", old);
	else if (n >= 0 && (size_t)n >= sizeof err->msg)
		err->msg[str_utf8_cut(err->msg, strlen(err->msg))] = '\0';
	if (err->code == 0)
		err->code = CAIRN_EFAIL;
	return err->code;
}

void
cairn_err_clear(struct cairn_err *err)
{
	if (err == NULL)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}

int
cairn_err_copy(struct cairn_err *dst, const struct cairn_err *src)
{
	if (dst != NULL && dst != src)
		memcpy(dst, src, sizeof *dst);
	return src->code;
}

const char *
cairn_strerror(int code)
{
	switch (code) {
	case CAIRN_OK: return "ok";
	case CAIRN_EFAIL: return "failed";
	case CAIRN_EINVAL: return "invalid input";
	case CAIRN_ENOTFOUND: return "not found";
	case CAIRN_EEXIST: return "already exists";
	case CAIRN_ECONFLICT: return "conflict";
	case CAIRN_EGONE: return "gone";
	case CAIRN_EIO: return "I/O error";
	case CAIRN_ETOOBIG: return "too big";
	case CAIRN_ETIMEOUT: return "timed out";
	case CAIRN_ENET: return "network error";
	case CAIRN_EAUTH: return "not authorized";
	case CAIRN_EPROTO: return "protocol error";
	case CAIRN_EFENCED: return "ownership lost";
	case CAIRN_ECANCELED: return "canceled";
	case CAIRN_EUNSUPPORTED: return "unsupported";
	case CAIRN_EBUSY: return "busy";
	case CAIRN_ESERVER: return "server error";
	case CAIRN_EREADONLY: return "read-only";
	}
	return "unknown error";
}
