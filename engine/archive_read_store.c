/*
 * archive_read_store.c: the tarball source that streams from object
 * storage (see tarread_src_store() in archive_read.h).
 */
#include "config.h"
#include "engine/archive_read.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "storage/store.h"

/*
 * The store source: the helper thread runs store_get(); its sink copies
 * bytes into chunks and waits while QUEUE_MAX chunks are queued. The
 * consumer takes chunks in order. closed (set by the consumer) makes the
 * sink refuse, which ends store_get with CAIRN_ECANCELED.
 */
#define QUEUE_MAX 8
#define CHUNK_MAX (64u << 10)

struct chunk {
	size_t len;
	unsigned char *p;
};

struct dl_src {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int started;
	struct store *s;
	char *key;
	int64_t stall_us;
	struct chunk q[QUEUE_MAX];
	size_t head, count;
	unsigned char *current;		/* chunk handed to the consumer */
	int finished;			/* producer ended */
	int rc;				/* its result */
	int closed;			/* consumer gone */
	struct cairn_err err;
};

static int
store_sink(void *arg, const void *buf, size_t n)
{
	struct dl_src *ss = arg;
	const unsigned char *p = buf;

	while (n > 0) {
		size_t take = n < CHUNK_MAX ? n : CHUNK_MAX;
		struct chunk c;

		c.len = take;
		c.p = xmalloc(take);
		memcpy(c.p, p, take);
		pthread_mutex_lock(&ss->mu);
		while (ss->count == QUEUE_MAX && !ss->closed)
			pthread_cond_wait(&ss->cv, &ss->mu);
		if (ss->closed) {
			pthread_mutex_unlock(&ss->mu);
			free(c.p);
			return -1;
		}
		ss->q[(ss->head + ss->count) % QUEUE_MAX] = c;
		ss->count++;
		pthread_cond_broadcast(&ss->cv);
		pthread_mutex_unlock(&ss->mu);
		p += take;
		n -= take;
	}
	return 0;
}

static void *
store_thread(void *arg)
{
	struct dl_src *ss = arg;
	struct cairn_err err = CAIRN_ERR_INIT;
	int rc;

	util_thread_name("storeread");

	rc = store_get(ss->s, ss->key, 0, -1, store_sink, ss, NULL, &err);
	pthread_mutex_lock(&ss->mu);
	ss->finished = 1;
	ss->rc = rc;
	cairn_err_copy(&ss->err, &err);
	pthread_cond_broadcast(&ss->cv);
	pthread_mutex_unlock(&ss->mu);
	return NULL;
}

static ssize_t
store_read(void *arg, const void **p, struct cairn_err *err)
{
	struct dl_src *ss = arg;
	struct timespec ts;
	ssize_t n;
	int rc = 0;

	pthread_mutex_lock(&ss->mu);
	FREE_NULL(ss->current);
	time_deadline(&ts, ss->stall_us);
	while (ss->count == 0 && !ss->finished && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&ss->cv, &ss->mu, &ts);
	if (ss->count > 0) {
		struct chunk c = ss->q[ss->head];

		ss->head = (ss->head + 1) % QUEUE_MAX;
		ss->count--;
		ss->current = c.p;
		*p = c.p;
		n = (ssize_t)c.len;
		pthread_cond_broadcast(&ss->cv);
	} else if (ss->finished) {
		if (ss->rc < 0)
			n = cairn_err_copy(err, &ss->err);
		else
			n = 0;
	} else {
		n = cairn_err_set(err, CAIRN_ETIMEOUT,
		    "no tarball data from storage for %lld s",
		    (long long)(ss->stall_us / TIME_US_PER_SEC));
	}
	pthread_mutex_unlock(&ss->mu);
	return n;
}

static void
store_close(void *arg)
{
	struct dl_src *ss = arg;

	pthread_mutex_lock(&ss->mu);
	ss->closed = 1;
	pthread_cond_broadcast(&ss->cv);
	pthread_mutex_unlock(&ss->mu);
	if (ss->started)
		pthread_join(ss->thread, NULL);
	while (ss->count > 0) {
		free(ss->q[ss->head].p);
		ss->head = (ss->head + 1) % QUEUE_MAX;
		ss->count--;
	}
	free(ss->current);
	free(ss->key);
	pthread_cond_destroy(&ss->cv);
	pthread_mutex_destroy(&ss->mu);
	free(ss);
}

int
tarread_src_store(struct tarread_src *src, struct store *s, const char *key,
    int64_t stall_us, struct cairn_err *err)
{
	struct dl_src *ss = xcalloc(1, sizeof *ss);
	int rc;

	pthread_mutex_init(&ss->mu, NULL);
	pthread_cond_init(&ss->cv, NULL);
	ss->s = s;
	ss->key = xstrdup(key);
	ss->stall_us = stall_us > 0 ? stall_us : TARREAD_STALL_US;
	rc = pthread_create(&ss->thread, NULL, store_thread, ss);
	if (rc != 0) {
		store_close(ss);
		return cairn_err_errno(err, CAIRN_EFAIL, rc,
		    "starting the download thread");
	}
	ss->started = 1;
	src->read = store_read;
	src->close = store_close;
	src->arg = ss;
	return 0;
}
