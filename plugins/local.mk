# plugins/: volume snapshotter plugins shipped with cairn (docs/plugins.md).
# csi-snapshotter is a C program of its own (base/ only: it holds no
# credentials and links nothing of the engine), built by `make` and
# installed in $(pkglibexecdir)/plugins; the image puts it in
# /usr/libexec/cairn/plugins and sets CAIRN_PLUGIN_DIR to that directory
# (--plugin-dir of `cairn server` and `cairn node-agent`).
csiplugindir = $(pkglibexecdir)/plugins
csiplugin_PROGRAMS = plugins/csi-snapshotter
plugins_csi_snapshotter_SOURCES = plugins/csi-snapshotter.c
plugins_csi_snapshotter_LDADD = base/libbase.a $(DEPS_LIBS)
EXTRA_DIST += plugins/example-snapshotter
