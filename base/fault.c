/*
 * fault.c: named crash points for tests (see fault.h).
 */
#include "config.h"
#include "base/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

#define FAULT_MAX	8		/* points armed at once */
#define FAULT_NAME_MAX	64

struct fault {
	char name[FAULT_NAME_MAX];
	long at;			/* act at this hit (1-based) */
	int stop;			/* SIGSTOP instead of SIGKILL */
	atomic_long hits;
};

static struct fault faults[FAULT_MAX];
static int nfaults;
static pthread_once_t faults_once = PTHREAD_ONCE_INIT;

static void
faults_load(void)
{
	const char *env = getenv("CAIRN_FAULT");
	const char *p = env, *end, *at;
	size_t len;

	while (p != NULL && *p != '\0' && nfaults < FAULT_MAX) {
		end = strchr(p, ',');
		len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (len > 0 && len < FAULT_NAME_MAX) {
			struct fault *f = &faults[nfaults];

			memcpy(f->name, p, len);
			f->name[len] = '\0';
			f->at = 1;
			if (len > 5 && strcmp(f->name + len - 5, ":stop") == 0) {
				f->stop = 1;
				f->name[len - 5] = '\0';
			}
			at = strchr(f->name, '@');
			if (at != NULL) {
				f->at = strtol(at + 1, NULL, 10);
				f->name[at - f->name] = '\0';
			}
			if (f->at >= 1 && f->name[0] != '\0')
				nfaults++;
		}
		p = end != NULL ? end + 1 : NULL;
	}
}

void
fault_point(const char *name)
{
	pthread_once(&faults_once, faults_load);
	for (int i = 0; i < nfaults; i++) {
		struct fault *f = &faults[i];

		if (strcmp(f->name, name) != 0)
			continue;
		if (atomic_fetch_add(&f->hits, 1) + 1 != f->at)
			continue;
		if (f->stop) {
			log_warn("fault point %s (hit %ld): stopping "
			    "(CAIRN_FAULT)", name, f->at);
			raise(SIGSTOP);
			return;
		}
		log_warn("fault point %s (hit %ld): dying now (CAIRN_FAULT)",
		    name, f->at);
		raise(SIGKILL);
		_exit(137);
	}
}
