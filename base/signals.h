/*
 * signals.h: SIGTERM and SIGINT handled on one thread of their own.
 *
 * A process with many threads must not take an asynchronous signal on an
 * arbitrary one (a handler interrupting a worker inside malloc or a lock;
 * ThreadSanitizer reports it). signals_stop_flag() blocks the two signals
 * in the calling thread, and so in every thread created after it, and
 * starts one thread that waits for them (sigwait) and sets *flag to 1:
 * the rest of the process only ever reads the atomic flag. Call it
 * before any other thread is started. SIGPIPE is ignored.
 */
#ifndef CAIRN_SIGNALS_H
#define CAIRN_SIGNALS_H

#include <stdatomic.h>

#include "base/err.h"

/* 0, or CAIRN_EFAIL if the thread could not be started. */
int signals_stop_flag(atomic_int *flag, struct cairn_err *err);

#endif
