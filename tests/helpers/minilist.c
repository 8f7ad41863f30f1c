/*
 * minilist.c: the benchmarks' plain-list baseline, a minimal Kubernetes
 * list client written for the benchmark and sharing nothing with cairn's
 * own client: one libcurl easy handle (one keep-alive connection),
 * `limit=N` pages, gzip accepted (libcurl inflates), and the continue
 * token read from the list's metadata without parsing the items (the
 * first bytes of a built-in list, where kube-apiserver writes metadata
 * before items; the last bytes of a custom resource list, whose metadata
 * comes after them). What any lister must do, and nothing more.
 *
 * usage: minilist --server URL [--token T] [--insecure] [--limit N] PATH...
 *   PATH: a collection path ("/api/v1/configmaps"); several are listed one
 *   after the other over the same connection.
 * Prints one line: pages=N bytes=N (JSON, inflated) wire=N (as received)
 * connections=N remaining0=N (the first page's remainingItemCount, -1 if
 * none).
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EDGE 8192	/* bytes kept from each end of a page */

struct page {
	char head[EDGE + 1];
	size_t nhead;
	char tail[2 * EDGE + 1];	/* the last bytes, shifted down as needed */
	size_t ntail;
	unsigned long long bytes;
};

static size_t
write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct page *pg = arg;
	size_t n = size * nmemb, k;

	pg->bytes += n;
	if (pg->nhead < EDGE) {
		k = n < EDGE - pg->nhead ? n : EDGE - pg->nhead;
		memcpy(pg->head + pg->nhead, p, k);
		pg->nhead += k;
	}
	if (n >= EDGE) {
		memcpy(pg->tail, p + n - EDGE, EDGE);
		pg->ntail = EDGE;
	} else {
		if (pg->ntail + n > 2 * EDGE) {
			memmove(pg->tail, pg->tail + pg->ntail - (EDGE - n),
			    EDGE - n);
			pg->ntail = EDGE - n;
		}
		memcpy(pg->tail + pg->ntail, p, n);
		pg->ntail += n;
	}
	return n;
}

/* Copy the JSON string value starting after `key` in [s, s+n) into out. */
static int
str_after(const char *s, const char *key, char *out, size_t cap)
{
	const char *p = strstr(s, key), *e;

	if (p == NULL)
		return 0;
	p += strlen(key);
	for (e = p; *e && *e != '"'; e++)
		if (*e == '\\' && e[1])
			e++;
	if ((size_t)(e - p) >= cap)
		return 0;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	return 1;
}

/* The list metadata's text: before "items" (built-in) or the last one. */
static const char *
list_meta(struct page *pg)
{
	char *items, *m, *last = NULL;

	pg->head[pg->nhead] = '\0';
	pg->tail[pg->ntail] = '\0';
	items = strstr(pg->head, "\"items\":");
	m = strstr(pg->head, "\"metadata\":{");
	if (m != NULL && (items == NULL || m < items)) {
		if (items != NULL)
			*items = '\0';
		return m;
	}
	for (m = pg->tail; (m = strstr(m, "\"metadata\":{")) != NULL; m++)
		last = m;
	return last != NULL ? last : "";
}

int
main(int argc, char **argv)
{
	const char *server = NULL, *token = NULL;
	int insecure = 0, limit = 500, i;
	unsigned long long pages = 0, bytes = 0, wire = 0;
	long remaining0 = -1, conns = 0;
	struct curl_slist *hdrs = NULL;
	struct page *pg = calloc(1, sizeof *pg);
	CURL *h;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--server") == 0 && i + 1 < argc)
			server = argv[++i];
		else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc)
			token = argv[++i];
		else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc)
			limit = atoi(argv[++i]);
		else if (strcmp(argv[i], "--insecure") == 0)
			insecure = 1;
		else
			break;
	}
	if (server == NULL || i >= argc || pg == NULL) {
		fprintf(stderr, "usage: minilist --server URL [--token T] "
		    "[--insecure] [--limit N] PATH...\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	h = curl_easy_init();
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (token != NULL) {
		char line[4096];

		snprintf(line, sizeof line, "Authorization: Bearer %s", token);
		hdrs = curl_slist_append(hdrs, line);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, pg);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	for (; i < argc; i++) {
		char cont[4096] = "", url[8192], num[32];

		do {
			char *esc = curl_easy_escape(h, cont, 0);
			curl_off_t dl = 0;
			long code = 0, nc = 0;
			const char *meta;

			snprintf(url, sizeof url, "%s%s%climit=%d%s%s", server,
			    argv[i], strchr(argv[i], '?') ? '&' : '?', limit,
			    cont[0] ? "&continue=" : "", cont[0] ? esc : "");
			curl_free(esc);
			curl_easy_setopt(h, CURLOPT_URL, url);
			memset(pg, 0, sizeof *pg);
			if (curl_easy_perform(h) != CURLE_OK) {
				fprintf(stderr, "minilist: GET %s failed\n", url);
				return 1;
			}
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
			curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &dl);
			curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nc);
			if (code != 200) {
				fprintf(stderr, "minilist: GET %s: HTTP %ld\n",
				    url, code);
				return 1;
			}
			conns += nc;
			pages++;
			bytes += pg->bytes;
			wire += (unsigned long long)dl;
			meta = list_meta(pg);
			if (pages == 1 && str_after(meta,
			    "\"remainingItemCount\":", num, sizeof num))
				remaining0 = atol(num);
			if (!str_after(meta, "\"continue\":\"", cont,
			    sizeof cont))
				cont[0] = '\0';
		} while (cont[0] != '\0');
	}
	printf("pages=%llu bytes=%llu wire=%llu connections=%ld "
	    "remaining0=%ld\n", pages, bytes, wire, conns, remaining0);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	curl_global_cleanup();
	free(pg);
	return 0;
}
