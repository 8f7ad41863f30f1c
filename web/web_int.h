/*
 * web_int.h: internals of web/ shared between its files (not for other
 * modules).
 */
#ifndef CAIRN_WEB_INT_H
#define CAIRN_WEB_INT_H

#include <stddef.h>

/* web/status.html, embedded by web/local.mk (generated web/status_html.c). */
extern const char web_status_html[];
extern const size_t web_status_html_len;

#endif
