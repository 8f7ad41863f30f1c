/* signals.c: SIGTERM/SIGINT on one thread, see signals.h. */
#include "config.h"
#include "base/signals.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "base/util.h"

static void *
signal_thread(void *arg)
{
	atomic_int *flag = arg;
	sigset_t set;
	int sig;

	util_thread_name("signals");

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	for (;;)
		if (sigwait(&set, &sig) == 0)
			atomic_store(flag, 1);
	return NULL;
}

int
signals_stop_flag(atomic_int *flag, struct cairn_err *err)
{
	sigset_t set;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, signal_thread, flag);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return cairn_err_set(err, CAIRN_EFAIL, "signal thread: %s",
		    strerror(rc));
	return 0;
}
