# kube/: fragment owned by the kube module (see kube/README.md).
# The Kubernetes REST client: configuration, transport, discovery, objects,
# streamed lists, watches, informers, label selectors.
noinst_LIBRARIES += kube/libkube.a
CAIRN_MODULE_LIBS += kube/libkube.a
kube_libkube_a_SOURCES = \
	kube/kube.h kube/internal.h \
	kube/config.c \
	kube/kube.c \
	kube/flow.c \
	kube/stream.c \
	kube/discovery.c \
	kube/objects.c \
	kube/list.c \
	kube/lists.c \
	kube/watch.c \
	kube/exec.c \
	kube/selector.c \
	kube/label.c kube/label.h
EXTRA_DIST += kube/README.md

check_PROGRAMS += tests/unit/test_kube
tests_unit_test_kube_SOURCES = tests/unit/test_kube.c tests/unit/unit.h
tests_unit_test_kube_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_list_text
tests_unit_test_kube_list_text_SOURCES = tests/unit/test_kube_list_text.c tests/unit/unit.h \
	tests/unit/unit_kube.h
tests_unit_test_kube_list_text_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_list_keys
tests_unit_test_kube_list_keys_SOURCES = tests/unit/test_kube_list_keys.c tests/unit/unit.h \
	tests/unit/unit_kube.h tests/unit/unit_http.h
tests_unit_test_kube_list_keys_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_discovery
tests_unit_test_kube_discovery_SOURCES = tests/unit/test_kube_discovery.c tests/unit/unit.h \
	tests/unit/unit_kube.h tests/unit/unit_http.h
tests_unit_test_kube_discovery_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_watch
tests_unit_test_kube_watch_SOURCES = tests/unit/test_kube_watch.c tests/unit/unit.h \
	tests/unit/unit_kube.h tests/unit/unit_http.h
tests_unit_test_kube_watch_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_exec_cred
tests_unit_test_kube_exec_cred_SOURCES = tests/unit/test_kube_exec_cred.c tests/unit/unit.h
tests_unit_test_kube_exec_cred_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/helpers/kube_tool
tests_helpers_kube_tool_SOURCES = tests/helpers/kube_tool.c
tests_helpers_kube_tool_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/helpers/exec_tool
tests_helpers_exec_tool_SOURCES = tests/helpers/exec_tool.c
tests_helpers_exec_tool_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_flow
tests_unit_test_kube_flow_SOURCES = tests/unit/test_kube_flow.c tests/unit/unit.h
tests_unit_test_kube_flow_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_kube_lists
tests_unit_test_kube_lists_SOURCES = tests/unit/test_kube_lists.c tests/unit/unit.h \
	tests/unit/unit_http.h tests/unit/unit_kube.h
tests_unit_test_kube_lists_LDADD = kube/libkube.a base/libbase.a $(DEPS_LIBS)
