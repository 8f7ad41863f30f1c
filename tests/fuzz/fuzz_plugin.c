/*
 * fuzz_plugin.c: libFuzzer target for plugin protocol lines
 * (engine/plugin.c): the bytes a plugin writes on stdout, split into
 * lines and handled as the runner handles them (hello, progress,
 * properties, log, result, error; caps, invalid UTF-8). The first byte
 * says whether the hello was seen already. Every error message must be
 * valid UTF-8 (it goes into status).
 *   ./tests/fuzz/fuzz_plugin -max_total_time=600 tests/fuzz/corpus/plugin
 */
#include "engine/plugin.c"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
prog(void *arg, int64_t done, int64_t total)
{
	(void)arg;
	(void)done;
	(void)total;
}

static void
prop(void *arg, const char *k, const char *v)
{
	(void)arg;
	assert(str_utf8_valid(k, strlen(k)) && str_utf8_valid(v, strlen(v)));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct plugin_limits lim;
	struct plugin_cbs cbs;
	struct plugin_hello hello;
	struct prun r;
	int rc;

	if (size == 0)
		return 0;
	memset(&r, 0, sizeof r);
	memset(&hello, 0, sizeof hello);
	memset(&cbs, 0, sizeof cbs);
	limits_fill(&lim, NULL);
	lim.lines_per_sec = 1u << 30;
	cbs.progress = prog;
	cbs.property = prop;
	r.path = "fuzz";
	r.lim = &lim;
	r.cbs = &cbs;
	r.pid = -1;
	r.fd_in = r.fd_out = r.fd_err = -1;
	r.has_request = data[0] & 1;
	r.hello_seen = (data[0] >> 1) & 1;
	r.hello = &hello;
	if (data[0] & 4)
		keep_stderr(&r, (const char *)data + 1, (size - 1) / 4);
	buf_init(&r.line, PLUGIN_LINE_MAX + 2);
	if (buf_append(&r.line, data + 1, size - 1) == 0) {
		rc = drain_lines(&r, &err);
		if (rc < 0)
			assert(str_utf8_valid(err.msg, strlen(err.msg)));
	}
	buf_free(&r.line);
	cJSON_Delete(r.result);
	plugin_hello_free(&hello);
	return 0;
}
