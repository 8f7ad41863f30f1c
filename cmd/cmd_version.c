/* cmd_version.c: `cairn version`: cairn's version and each library's. */
#include "config.h"
#include "cmd/cli.h"

#include <archive.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <isa-l.h>
#include <libwebsockets.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include <stdio.h>
#include <yaml.h>
#include <zlib.h>

int
cmd_version(const struct cli_command *cmd, struct flagset *fs)
{
	(void)cmd;
	(void)fs;
	printf("cairn %s\n", PACKAGE_VERSION);
	printf("  sqlite        %s\n", sqlite3_libversion());
	printf("  libcurl       %s\n", curl_version_info(CURLVERSION_NOW)->version);
	printf("  cjson         %s\n", cJSON_Version());
	printf("  zlib          %s\n", zlibVersion());
	printf("  isa-l         %d.%d.%d (built with)\n", ISAL_MAJOR_VERSION,
	    ISAL_MINOR_VERSION, ISAL_PATCH_VERSION);
	printf("  libarchive    %s\n", archive_version_string());
	printf("  libmicrohttpd %s\n", MHD_get_version());
	printf("  libyaml       %s\n", yaml_get_version_string());
	printf("  libcrypto     %s\n", OpenSSL_version(OPENSSL_VERSION));
	printf("  libwebsockets %s\n", lws_get_library_version());
	return CLI_EXIT_OK;
}
