/*
 * flow.c: backing off when the API server pushes back (429, Retry-After).
 *
 * Design. cairn sets no client-side rate limit by default: a real API
 * server protects itself with API Priority and Fairness (APF, on by
 * default since Kubernetes 1.20) and says when a client is too fast by
 * answering 429 with Retry-After. A fixed client-side cap only costs
 * throughput when the server is idle (a restore at 300/s took 4x as long
 * as `kubectl create -f`). What the client must do instead is listen:
 *
 * - Flows. APF queues requests by flow (FlowSchema x distinguisher) under
 *   a priority level, and its Retry-After is per priority level
 *   (k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go,
 *   droppedrequests.go). The client cannot compute the server's flows, so
 *   it keys requests by the finest class APF can tell apart for one user:
 *   verb + API group + resource (+ subresource); discovery and other
 *   non-resource paths form one class per verb. Replies name their
 *   priority level (X-Kubernetes-PF-PriorityLevel-UID); a class remembers
 *   the last one seen, and a 429 holds every class known to share it.
 * - Holds. A 429 holds its flow: no request of it is sent before the
 *   Retry-After has passed (a 429 without one: capped exponential backoff,
 *   as the retry itself waits). Requests already on the wire are not
 *   recalled.
 * - Window. The first 429 of a hold also halves the number of requests
 *   the flow may have in flight (at least 1); each reply that is not a 429
 *   while the window is full opens it by one (slow start), and at
 *   FLOW_WINDOW_FREE it is unlimited again. So after a hold the workers
 *   do not all stampede back at once, and a flow the server does not push
 *   back on never waits for anything.
 * - A fixed --qps token bucket (kube.c) remains for those who want one;
 *   it applies before the flow.
 *
 * Watches (counted = 0) honour holds but take no window slot: they stay
 * open for minutes.
 *
 * Memory: a fixed table of FLOW_SLOTS classes; an idle slot whose hold has
 * passed is reused for a new class (least recently used first); when every
 * slot is busy, the class shares slot 0 ("other").
 */
#include "config.h"
#include "kube/internal.h"
#include "base/mem.h"
#include "base/timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOW_SLOTS 64
#define FLOW_KEY_MAX 96
#define FLOW_PL_MAX 64
#define FLOW_WINDOW_FREE 32	/* window this wide: unlimited again */
#define FLOW_WAIT_SLICE_US (50 * 1000)

struct flow {
	char key[FLOW_KEY_MAX];	/* "POST /secrets", "" free */
	char pl[FLOW_PL_MAX];	/* priority level UID last seen, "" none */
	int64_t hold_until;	/* monotonic us; nothing sent before */
	int window;		/* max in flight; 0 unlimited */
	int inflight;		/* counted requests on the wire */
	int refs;		/* requests using the slot (watches too) */
	int cut_hold;		/* the window was cut for the current hold */
	uint64_t used;		/* LRU clock */
	uint64_t pushed_back;	/* 429s */
};

struct kube_flows {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct flow slot[FLOW_SLOTS];
	uint64_t clock;
	uint64_t pushed_back;
	uint64_t held_us;
};

struct kube_flows *
kube_flows_new(void)
{
	struct kube_flows *f = xcalloc(1, sizeof *f);

	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	snprintf(f->slot[0].key, sizeof f->slot[0].key, "(other)");
	return f;
}

void
kube_flows_free(struct kube_flows *f)
{
	if (f == NULL)
		return;
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}

/* Copy the segment at *p (up to '/', '?' or the end) into out; advance. */
static size_t
seg(const char **p, char *out, size_t cap)
{
	const char *s = *p, *e;
	size_t n;

	while (*s == '/')
		s++;
	for (e = s; *e && *e != '/' && *e != '?'; e++)
		;
	n = (size_t)(e - s) < cap - 1 ? (size_t)(e - s) : cap - 1;
	memcpy(out, s, n);
	out[n] = '\0';
	*p = *e == '?' ? e + strlen(e) : e;
	return (size_t)(e - s);
}

void
kube_flow_key(const char *method, const char *path, char *out, size_t cap)
{
	char s[8][FLOW_KEY_MAX / 2];
	const char *p = path;
	int n = 0, r, core;

	while (n < 8 && seg(&p, s[n], sizeof s[n]) > 0)
		n++;
	/* "/api/v1/..." core; "/apis/G/V/..." a group */
	if (n >= 3 && strcmp(s[0], "api") == 0)
		r = 2;
	else if (n >= 4 && strcmp(s[0], "apis") == 0)
		r = 3;
	else {
		snprintf(out, cap, "%s %s", method, n > 0 && (strcmp(s[0],
		    "api") == 0 || strcmp(s[0], "apis") == 0) ? "(discovery)" :
		    n > 0 ? s[0] : "/");
		return;
	}
	core = r == 2;
	/* namespaces/NS/RESOURCE...: a namespaced resource */
	if (strcmp(s[r], "namespaces") == 0 && n >= r + 3)
		r += 2;
	snprintf(out, cap, "%s %s/%s%s%s", method, core ? "" : s[1], s[r],
	    n >= r + 3 ? "/" : "", n >= r + 3 ? s[r + 2] : "");
}

/* The slot for key (mu held). */
static int
flow_slot(struct kube_flows *f, const char *key, int64_t now)
{
	int i, pick = -1;

	for (i = 1; i < FLOW_SLOTS; i++)
		if (strcmp(f->slot[i].key, key) == 0)
			return i;
	for (i = 1; i < FLOW_SLOTS; i++) {
		struct flow *s = &f->slot[i];

		if (s->refs > 0 || s->hold_until > now)
			continue;
		if (s->key[0] == '\0') {
			pick = i;
			break;
		}
		if (pick < 0 || s->used < f->slot[pick].used)
			pick = i;
	}
	if (pick < 0)
		return 0;
	memset(&f->slot[pick], 0, sizeof f->slot[pick]);
	snprintf(f->slot[pick].key, sizeof f->slot[pick].key, "%s", key);
	return pick;
}

int
kube_flow_enter(struct kube_flows *f, const char *method, const char *path,
    int counted, const atomic_int *stop)
{
	char key[FLOW_KEY_MAX];
	struct flow *s;
	int64_t now, t0 = 0;
	struct timespec ts;
	int i;

	kube_flow_key(method, path, key, sizeof key);
	pthread_mutex_lock(&f->mu);
	now = time_mono_us();
	i = flow_slot(f, key, now);
	s = &f->slot[i];
	s->refs++;
	s->used = ++f->clock;
	for (;;) {
		int64_t wait = s->hold_until - now;

		if (wait <= 0 && (!counted || s->window == 0 ||
		    s->inflight < s->window))
			break;
		if (stop != NULL && *stop) {
			s->refs--;
			pthread_mutex_unlock(&f->mu);
			return CAIRN_ECANCELED;
		}
		if (t0 == 0)
			t0 = now;
		if (wait <= 0 || wait > FLOW_WAIT_SLICE_US)
			wait = FLOW_WAIT_SLICE_US;
		time_deadline(&ts, wait);
		pthread_cond_timedwait(&f->cv, &f->mu, &ts);
		now = time_mono_us();
	}
	if (counted)
		s->inflight++;
	if (t0 != 0)
		f->held_us += (uint64_t)(now - t0);
	pthread_mutex_unlock(&f->mu);
	return i;
}

void
kube_flow_leave(struct kube_flows *f, int i, int counted, long http,
    int64_t hold_us, const char *pl)
{
	struct flow *s = &f->slot[i];
	int64_t now = time_mono_us();
	int j;

	pthread_mutex_lock(&f->mu);
	if (pl != NULL && pl[0] != '\0')
		snprintf(s->pl, sizeof s->pl, "%s", pl);
	if (http == 429) {
		f->pushed_back++;
		s->pushed_back++;
		if (s->hold_until <= now)
			s->cut_hold = 0;
		if (!s->cut_hold) {
			/* one cut per hold: the replies of one burst agree */
			s->window = s->inflight > 1 ? s->inflight / 2 : 1;
			s->cut_hold = 1;
		}
		for (j = 0; j < FLOW_SLOTS; j++) {
			struct flow *o = &f->slot[j];

			if (o != s && (s->pl[0] == '\0' ||
			    strcmp(o->pl, s->pl) != 0))
				continue;
			if (o->hold_until < now + hold_us)
				o->hold_until = now + hold_us;
		}
	} else if (http > 0 && counted && s->window > 0 &&
	    s->inflight >= s->window) {
		if (++s->window >= FLOW_WINDOW_FREE)
			s->window = 0;
	}
	if (counted)
		s->inflight--;
	s->refs--;
	pthread_mutex_unlock(&f->mu);
	pthread_cond_broadcast(&f->cv);
}

void
kube_flows_stats(struct kube_flows *f, uint64_t *pushed_back,
    uint64_t *held_us)
{
	pthread_mutex_lock(&f->mu);
	*pushed_back = f->pushed_back;
	*held_us = f->held_us;
	pthread_mutex_unlock(&f->mu);
}
