/*
 * fuzz_discovery.c: libFuzzer target for discovery documents
 * (kube/discovery.c): an APIResourceList as the API server sends it,
 * folded into the discovery table (resources, then subresources onto their
 * parents), then looked up by name, short name and plural as `cairn`
 * arguments are.
 *   ./tests/fuzz/fuzz_discovery -max_total_time=600 tests/fuzz/corpus/discovery
 */
#include "kube/discovery.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
each(void *arg, const struct kube_resource *r)
{
	(void)r;
	++*(int *)arg;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_discovery *d;
	cJSON *list = json_parse((const char *)data, size, NULL);
	const cJSON *r;
	int n = 0;

	if (list == NULL)
		return 0;
	d = xcalloc(1, sizeof *d);
	atomic_init(&d->refs, 1);
	add_resource_list(d, json_str_or(list, "groupVersion", ""), "v1", 1,
	    list);
	add_resource_list(d, "apps", "v1", 0, list);
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(list,
	    "resources")) {
		const char *name = json_str(r, "name");

		if (name != NULL) {
			(void)kube_discovery_lookup(d, name);
			(void)kube_discovery_find(d, "", NULL, name);
			(void)kube_discovery_find(d, "apps", "v1", name);
		}
	}
	(void)kube_discovery_lookup(d, "deploy");
	(void)kube_discovery_foreach_listable(d, each, &n);
	kube_discovery_release(d);
	cJSON_Delete(list);
	return 0;
}
