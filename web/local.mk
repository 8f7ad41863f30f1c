# web/: the embedded web endpoint (/status, /status.json, /healthz, /readyz,
# /metrics). See web/README.md. Depends on base/ only; cmd/cmd_server.c
# hands it callbacks (struct web_source) that read the engine's status.
noinst_LIBRARIES += web/libweb.a
CAIRN_MODULE_LIBS += web/libweb.a
web_libweb_a_SOURCES = \
	web/web.c web/web.h web/web_int.h
nodist_web_libweb_a_SOURCES = web/status_html.c
EXTRA_DIST += web/status.html web/README.md
CLEANFILES += web/status_html.c

# The /status page is written as HTML in web/status.html and embedded as a C
# string: each line becomes one string literal; backslash, double quote and
# '?' (trigraphs under -std=c11) are escaped.
web/status_html.c: $(srcdir)/web/status.html $(srcdir)/web/local.mk
	$(AM_V_GEN)mkdir -p web && { \
	  echo '/* generated from web/status.html by web/local.mk: do not edit */'; \
	  echo '#include "config.h"'; \
	  echo '#include "web/web_int.h"'; \
	  echo 'const char web_status_html[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' \
	      -e 's/^/"/' -e 's/$$/\\n"/' $(srcdir)/web/status.html; \
	  echo ';'; \
	  echo 'const size_t web_status_html_len = sizeof web_status_html - 1;'; \
	} > $@.tmp && mv $@.tmp $@

check_PROGRAMS += tests/unit/test_web
tests_unit_test_web_SOURCES = tests/unit/test_web.c tests/unit/unit.h
tests_unit_test_web_LDADD = web/libweb.a base/libbase.a $(DEPS_LIBS)

# The fake status source used by the web tests and the benchmark (its
# document is built with engine/status_doc.h, as the server's is).
check_PROGRAMS += tests/helpers/web_demo
tests_helpers_web_demo_SOURCES = tests/helpers/web_demo.c
tests_helpers_web_demo_LDADD = web/libweb.a engine/libengine.a base/libbase.a \
	$(DEPS_LIBS)

EXTRA_DIST += tests/lib/cdp.py tests/lib/webcheck.py docs/status-json.md docs/status.schema.json
