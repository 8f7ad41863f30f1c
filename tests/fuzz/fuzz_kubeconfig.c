/*
 * fuzz_kubeconfig.c: libFuzzer target for kubeconfig files (kube/config.c):
 * the YAML reader (base/codec.h, both scalar modes; anchors and aliases
 * included: a small file must not expand without bound) and the whole kubeconfig load from a file with
 * those bytes (contexts, clusters, users, inline and file credentials).
 *   ./tests/fuzz/fuzz_kubeconfig -max_total_time=600 tests/fuzz/corpus/kubeconfig
 */
#include "config.h"
#include "base/codec.h"
#include "kube/kube.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_config_opts o;
	struct kube_config *cfg = NULL;
	cJSON *j;
	FILE *f;

	j = codec_yaml_doc((const char *)data, size, CODEC_YAML_STRINGS, "fuzz",
	    NULL);
	cJSON_Delete(j);
	j = codec_yaml_doc((const char *)data, size, CODEC_YAML_TYPED, "fuzz",
	    NULL);
	cJSON_Delete(j);
	if (path[0] == '\0')
		snprintf(path, sizeof path, "/tmp/cairn-fuzz-kcfg.%d",
		    (int)getpid());
	f = fopen(path, "wb");
	if (f == NULL)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	memset(&o, 0, sizeof o);
	o.kubeconfig = path;
	if (kube_config_load(&o, &cfg, NULL) == 0) {
		cJSON *d = kube_config_describe(cfg);

		cJSON_Delete(d);
		kube_config_free(cfg);
	}
	unlink(path);
	return 0;
}
