# storage/: object storage behind one interface (store.h): the local
# directory and S3 backends, SigV4, the S3 XML reader, Velero's key layout
# and the BackupStorageLocation mapping. See storage/README.md.
noinst_LIBRARIES += storage/libstorage.a
CAIRN_MODULE_LIBS += storage/libstorage.a
storage_libstorage_a_SOURCES = \
	storage/store.c storage/store.h storage/store_int.h \
	storage/store_fs.c storage/store_s3.c \
	storage/crypt.c storage/crypt.h storage/store_crypt.c \
	storage/sigv4.c storage/sigv4.h \
	storage/s3xml.c storage/s3xml.h \
	storage/layout.c storage/layout.h \
	storage/location.c storage/location.h
EXTRA_DIST += storage/README.md

check_PROGRAMS += tests/unit/test_storage tests/unit/test_sigv4 tests/unit/test_crypt \
	tests/helpers/storage_tool
tests_unit_test_storage_SOURCES = tests/unit/test_storage.c tests/unit/unit.h
tests_unit_test_storage_LDADD = storage/libstorage.a base/libbase.a $(DEPS_LIBS)
tests_unit_test_crypt_SOURCES = tests/unit/test_crypt.c tests/unit/unit.h
tests_unit_test_crypt_LDADD = storage/libstorage.a base/libbase.a $(DEPS_LIBS)
tests_unit_test_sigv4_SOURCES = tests/unit/test_sigv4.c tests/unit/unit.h
tests_unit_test_sigv4_LDADD = storage/libstorage.a base/libbase.a $(DEPS_LIBS)
tests_helpers_storage_tool_SOURCES = tests/helpers/storage_tool.c
tests_helpers_storage_tool_LDADD = storage/libstorage.a base/libbase.a $(DEPS_LIBS)

if FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_s3xml
tests_fuzz_fuzz_s3xml_SOURCES = tests/fuzz/fuzz_s3xml.c
tests_fuzz_fuzz_s3xml_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_s3xml_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_s3xml_LDADD = storage/libstorage.a base/libbase.a $(DEPS_LIBS)
endif
