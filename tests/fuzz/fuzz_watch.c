/*
 * fuzz_watch.c: libFuzzer target for watch streams (kube/watch.c): the
 * bytes of a watch response, cut into chunks as a network would deliver
 * them (the first byte picks the chunk size), split into events by jsplit
 * and handled by the watch's own event handler (type, object, ERROR with
 * 410, resourceVersion). Must never crash, leak or loop.
 *   ./configure CC=clang --enable-fuzzing && make tests/fuzz/fuzz_watch
 *   ./tests/fuzz/fuzz_watch -max_total_time=600 tests/fuzz/corpus/watch
 */
#include "kube/watch.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
count_event(void *arg, enum kube_event_type t, cJSON *obj)
{
	(void)t;
	(void)obj;
	return ++*(int *)arg > 100000;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct wst w;
	size_t chunk, off;
	int n = 0, rc = 0;

	if (size == 0)
		return 0;
	chunk = 1 + data[0] % 64;
	memset(&w, 0, sizeof w);
	w.fn = count_event;
	w.arg = &n;
	w.err = &err;
	jsplit_init(&w.js, 1u << 20);
	for (off = 1; off < size && rc == 0; off += chunk)
		rc = watch_sink(&w, (const char *)data + off,
		    size - off < chunk ? size - off : chunk);
	jsplit_free(&w.js);
	free(w.rv);
	return 0;
}
