/* label.c: names as label values, Velero's GetValidName (see label.h). */
#include "config.h"
#include "kube/label.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

#define LABEL_HASH_CHARS 6

char *
kube_label_value(const char *name)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t n = strlen(name);
	char *v;

	if (n <= KUBE_LABEL_VALUE_MAX)
		return xstrdup(name);
	EVP_Digest(name, n, md, &mdlen, EVP_sha256(), NULL);
	v = xmalloc(KUBE_LABEL_VALUE_MAX + 1);
	memcpy(v, name, KUBE_LABEL_VALUE_MAX - LABEL_HASH_CHARS);
	for (int i = 0; i < LABEL_HASH_CHARS / 2; i++)
		snprintf(v + KUBE_LABEL_VALUE_MAX - LABEL_HASH_CHARS + 2 * i, 3,
		    "%02x", md[i]);
	v[KUBE_LABEL_VALUE_MAX] = '\0';
	return v;
}

int
kube_label_value_is(const char *v, const char *name)
{
	char *want;
	int eq;

	if (v == NULL || name == NULL)
		return 0;
	want = kube_label_value(name);
	eq = strcmp(v, want) == 0;
	free(want);
	return eq;
}
