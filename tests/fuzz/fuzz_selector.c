/*
 * fuzz_selector.c: libFuzzer target for label selectors (kube/selector.c:
 * text and LabelSelector objects) and cron expressions (engine/cron.c).
 * The first byte picks which; a parsed selector is matched against fixed
 * labels and printed back, which must parse again; a parsed cron
 * expression is asked for its next times.
 *   ./tests/fuzz/fuzz_selector -max_total_time=600 tests/fuzz/corpus/selector
 */
#include "config.h"
#include "kube/kube.h"
#include "engine/cron.h"
#include "base/jsonutil.h"
#include "base/mem.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;
	struct kube_selector *sel = NULL, *again = NULL;
	struct cron *c = NULL;
	cJSON *labels, *obj = NULL;

	if (size == 0)
		return 0;
	s = xstrndup((const char *)data + 1, size - 1);
	switch (data[0] % 3) {
	case 0:
		if (kube_selector_parse(s, &sel, NULL) == 0) {
			char *txt = kube_selector_string(sel);

			labels = json_parse("{\"app\":\"web\",\"tier\":\"1\","
			    "\"x.io/k\":\"v\"}", 36, NULL);
			(void)kube_selector_match(sel, labels);
			cJSON_Delete(labels);
			assert(kube_selector_parse(txt, &again, NULL) == 0);
			kube_selector_free(again);
			free(txt);
			kube_selector_free(sel);
		}
		if (kube_selector_object(s, &obj, NULL) == 0)
			cJSON_Delete(obj);
		break;
	case 1:
		obj = json_parse((const char *)data + 1, size - 1, NULL);
		if (obj != NULL) {
			char *txt = json_print(obj);

			if (kube_selector_parse(txt, &sel, NULL) == 0)
				kube_selector_free(sel);
			free(txt);
			cJSON_Delete(obj);
		}
		break;
	default:
		if (cron_parse(s, &c, NULL) == 0) {
			int64_t t = 1700000000LL * 1000000;

			for (int i = 0; i < 3 && t > 0; i++)
				t = cron_next(c, t);
			(void)cron_latest(c, 1700000000LL * 1000000,
			    1800000000LL * 1000000);
			(void)cron_interval(c);
			cron_free(c);
		}
		break;
	}
	free(s);
	return 0;
}
