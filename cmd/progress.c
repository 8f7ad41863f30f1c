/*
 * progress.c: progress bars and lines (see progress.h).
 *
 * The rate is measured, not reported by the server: each observation is
 * kept with its monotonic time in a small ring, and the rate is the change
 * over the oldest sample not older than PROGRESS_RATE_WINDOW_US. Bytes are
 * preferred over items when known. The terminal width comes from
 * TIOCGWINSZ (else $COLUMNS, else 80) and the line is cut to fit, so the
 * bar never wraps (a wrapped line cannot be redrawn with "\r").
 */
#include "config.h"
#include "cmd/progress.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PROGRESS_RING 16			/* samples kept for the rate */
#define PROGRESS_RATE_WINDOW_US (10 * TIME_US_PER_SEC)
#define PROGRESS_TTY_MIN_US 100000		/* redraw at most every 100 ms */
#define PROGRESS_BAR_WIDTH 24			/* cells of the bar */
#define PROGRESS_TEXT_MAX 128			/* phase / detail kept */

struct sample {
	int64_t t_us;		/* monotonic */
	int64_t done;		/* items, -1 unknown */
	int64_t bytes;		/* bytes, -1 unknown */
};

struct progress {
	FILE *f;			/* borrowed output */
	int tty;			/* redraw in place */
	char *label;			/* "backup b1" */
	struct progress_state last;	/* phase/detail point into the arrays below */
	char phase[PROGRESS_TEXT_MAX];
	char detail[PROGRESS_TEXT_MAX];
	int have_last;			/* last is valid */
	int drawn;			/* a bar is on screen (tty) */
	int64_t last_draw_us;		/* monotonic time of the last output */
	char last_phase[PROGRESS_TEXT_MAX];	/* as last printed (plain) */
	char last_detail[PROGRESS_TEXT_MAX];
	struct sample ring[PROGRESS_RING];
	size_t nring, head;		/* samples held, next slot */
};

struct progress *
progress_new(FILE *f, int mode, const char *label)
{
	struct progress *p = xcalloc(1, sizeof *p);

	p->f = f;
	if (mode == PROGRESS_AUTO)
		p->tty = isatty(fileno(f)) && getenv("TERM") != NULL &&
		    strcmp(getenv("TERM"), "dumb") != 0;
	else
		p->tty = mode == PROGRESS_TTY;
	p->label = xstrdup(label ? label : "");
	p->last_draw_us = -1;
	return p;
}

int
progress_mode(const struct progress *p)
{
	return p->tty ? PROGRESS_TTY : PROGRESS_PLAIN;
}

static int
term_width(const struct progress *p)
{
	struct winsize ws;
	const char *cols;

	if (ioctl(fileno(p->f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	cols = getenv("COLUMNS");
	if (cols != NULL && atoi(cols) > 0)
		return atoi(cols);
	return 80;
}

static void
record(struct progress *p, const struct progress_state *st)
{
	struct sample *s = &p->ring[p->head];

	s->t_us = time_mono_us();
	s->done = st->done;
	s->bytes = st->bytes;
	p->head = (p->head + 1) % PROGRESS_RING;
	if (p->nring < PROGRESS_RING)
		p->nring++;
}

/* Per-second rate of bytes (or items when is_items); -1 if unknown. */
static double
rate_of(const struct progress *p, int is_items)
{
	const struct sample *newest, *oldest = NULL;
	size_t idx;

	if (p->nring < 2)
		return -1;
	newest = &p->ring[(p->head + PROGRESS_RING - 1) % PROGRESS_RING];
	for (size_t i = p->nring; i >= 2; i--) {
		idx = (p->head + PROGRESS_RING - i) % PROGRESS_RING;
		if (newest->t_us - p->ring[idx].t_us <= PROGRESS_RATE_WINDOW_US) {
			oldest = &p->ring[idx];
			break;
		}
	}
	if (oldest == NULL || newest->t_us - oldest->t_us < 200000)
		return -1;
	if (is_items) {
		if (newest->done < 0 || oldest->done < 0)
			return -1;
		return (double)(newest->done - oldest->done) * 1e6 /
		    (double)(newest->t_us - oldest->t_us);
	}
	if (newest->bytes < 0 || oldest->bytes < 0)
		return -1;
	return (double)(newest->bytes - oldest->bytes) * 1e6 /
	    (double)(newest->t_us - oldest->t_us);
}

/* Fraction done in [0,1], or -1 when nothing says. */
static double
fraction(const struct progress_state *st)
{
	if (st->total > 0 && st->done >= 0)
		return st->done >= st->total ? 1.0 :
		    (double)st->done / (double)st->total;
	if (st->bytes_total > 0 && st->bytes >= 0)
		return st->bytes >= st->bytes_total ? 1.0 :
		    (double)st->bytes / (double)st->bytes_total;
	return -1;
}

/* The figures after the bar: "120/500 items, 3.4 MiB, 1.1 MiB/s". */
static void
figures(struct progress *p, const struct progress_state *st, struct buf *b)
{
	char sz[32], tot[32];
	double r;
	const char *sep = "";

	if (st->done >= 0) {
		if (st->total > 0)
			buf_printf(b, "%lld/%lld items", (long long)st->done,
			    (long long)st->total);
		else
			buf_printf(b, "%lld items", (long long)st->done);
		sep = ", ";
	}
	if (st->bytes >= 0) {
		fmt_bytes((uint64_t)st->bytes, sz);
		if (st->bytes_total > 0) {
			fmt_bytes((uint64_t)st->bytes_total, tot);
			buf_printf(b, "%s%s / %s", sep, sz, tot);
		} else
			buf_printf(b, "%s%s", sep, sz);
		sep = ", ";
	}
	r = rate_of(p, 0);
	if (r >= 0) {
		fmt_bytes((uint64_t)r, sz);
		buf_printf(b, "%s%s/s", sep, sz);
	} else if ((r = rate_of(p, 1)) >= 0)
		buf_printf(b, "%s%.0f items/s", sep, r);
}

void
progress_format(struct progress *p, const struct progress_state *st,
    int width, char *out, size_t outlen)
{
	struct buf b;
	double frac = fraction(st);
	const char *text;

	buf_init(&b, PROGRESS_LINE_MAX * 4);
	if (p->tty) {
		buf_printf(&b, "%s %s ", p->label, st->phase ? st->phase : "");
		buf_putc(&b, '[');
		for (int i = 0; i < PROGRESS_BAR_WIDTH; i++) {
			double cell = (double)(i + 1) / PROGRESS_BAR_WIDTH;

			buf_putc(&b, frac >= 0 && frac + 1e-9 >= cell ? '#' :
			    (frac >= 0 ? '.' : '-'));
		}
		buf_putc(&b, ']');
		if (frac >= 0)
			buf_printf(&b, " %3d%%", (int)(frac * 100));
		buf_putc(&b, ' ');
		figures(p, st, &b);
		if (st->detail != NULL && st->detail[0] != '\0')
			buf_printf(&b, "  %s", st->detail);
	} else {
		buf_printf(&b, "%s: %s", p->label, st->phase ? st->phase : "");
		if (st->done >= 0 || st->bytes >= 0) {
			buf_puts(&b, ", ");
			figures(p, st, &b);
		}
		if (frac >= 0)
			buf_printf(&b, " (%d%%)", (int)(frac * 100));
		if (st->detail != NULL && st->detail[0] != '\0')
			buf_printf(&b, ", %s", st->detail);
	}
	/* Cut to width code points (never inside a UTF-8 sequence) and outlen. */
	text = buf_cstr(&b);
	{
		size_t i = 0, n = 0, cols = 0;

		while (text[i] != '\0') {
			size_t len = 1;

			while ((text[i + len] & 0xC0) == 0x80)
				len++;
			if ((width > 0 && cols >= (size_t)width) ||
			    n + len + 1 > outlen)
				break;
			memcpy(out + n, text + i, len);
			n += len;
			i += len;
			cols++;
		}
		if (outlen > 0)
			out[n] = '\0';
	}
	buf_free(&b);
}

static void
copy_state(struct progress *p, const struct progress_state *st)
{
	p->last = *st;
	snprintf(p->phase, sizeof p->phase, "%s", st->phase ? st->phase : "");
	snprintf(p->detail, sizeof p->detail, "%s", st->detail ? st->detail : "");
	p->last.phase = p->phase;
	p->last.detail = p->detail;
	p->have_last = 1;
}

static void
draw(struct progress *p)
{
	char line[PROGRESS_LINE_MAX];

	if (p->tty) {
		/* One column spare: writing the last column may wrap. */
		progress_format(p, &p->last, term_width(p) - 1, line, sizeof line);
		fprintf(p->f, "\r\033[K%s", line);
		p->drawn = 1;
	} else {
		progress_format(p, &p->last, 0, line, sizeof line);
		fprintf(p->f, "%s\n", line);
		snprintf(p->last_phase, sizeof p->last_phase, "%s", p->phase);
		snprintf(p->last_detail, sizeof p->last_detail, "%s", p->detail);
	}
	fflush(p->f);
	p->last_draw_us = time_mono_us();
}

void
progress_update(struct progress *p, const struct progress_state *st)
{
	int64_t now = time_mono_us();
	int changed;

	copy_state(p, st);
	record(p, st);
	if (p->tty) {
		if (p->last_draw_us < 0 ||
		    now - p->last_draw_us >= PROGRESS_TTY_MIN_US)
			draw(p);
		return;
	}
	changed = strcmp(p->last_phase, p->phase) != 0 ||
	    strcmp(p->last_detail, p->detail) != 0;
	if (p->last_draw_us < 0 || changed ||
	    now - p->last_draw_us >= PROGRESS_INTERVAL_US)
		draw(p);
}

void
progress_note(struct progress *p, const char *fmt, ...)
{
	va_list ap;

	if (p->tty && p->drawn)
		fputs("\r\033[K", p->f);
	va_start(ap, fmt);
	vfprintf(p->f, fmt, ap);
	va_end(ap);
	fputc('\n', p->f);
	p->drawn = 0;
	if (p->tty && p->have_last)
		draw(p);
	fflush(p->f);
}

void
progress_end(struct progress *p, const struct progress_state *final)
{
	if (final != NULL) {
		copy_state(p, final);
		record(p, final);
		draw(p);
	}
	if (p->tty && p->drawn)
		fputc('\n', p->f);
	p->drawn = 0;
	fflush(p->f);
}

void
progress_free(struct progress *p)
{
	if (p == NULL)
		return;
	free(p->label);
	free(p);
}
