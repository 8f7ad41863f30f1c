#!/bin/bash
# scripts/cross-check.sh: cross-compile cairn for another architecture
# (default arm64, common at the edge) on this Debian 12 amd64 machine and
# run it under qemu-user: every C unit test and a set of integration tests
# whose `cairn` is the cross-compiled binary (kubesim, s3rver and the test
# frame stay native). Not part of the test suite (minutes; CI must not
# depend on it).
#
# As root: installs the Debian packages it needs (crossbuild-essential-ARCH,
# qemu-user-static, binfmt-support, the -dev packages of ARCH next to the
# native ones through dpkg --add-architecture), registers qemu with
# binfmt_misc (mounting it when needed), builds the committed HEAD out of
# tree with ./configure --host, checks the binary's architecture, runs
# `cairn version` and then `make check` on the filter below.
#
#   CAIRN_CROSS_ARCH    Debian architecture (default arm64; armhf, riscv64... untested)
#   CAIRN_CROSS_TESTS   make check filter (default: every unit test and
#                       test_cli.py test_install test_backup.py test_web_endpoint.py)
#   CAIRN_CROSS_WORK    scratch directory (default: a new one under /tmp, removed)
set -euo pipefail

say() { printf '==> %s\n' "$*"; }
die() { printf 'cross-check: FAIL: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (apt-get, binfmt_misc)"
arch=${CAIRN_CROSS_ARCH:-arm64}
tests=${CAIRN_CROSS_TESTS:-/unit/ test_cli.py test_install test_backup.py test_web_endpoint.py}
here=$(cd "$(dirname "$0")/.." && pwd)
triplet=$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null) ||
	die "unknown Debian architecture $arch"
qemu_arch=$(dpkg-architecture -a"$arch" -qDEB_HOST_GNU_CPU)

# --- tools and libraries ------------------------------------------------------
# libwebsockets-dev is Multi-Arch: same, but its lws_config.h differs
# between architectures (a Debian packaging bug), so the target's copy
# cannot be installed next to the native one: it is unpacked on the side
# below, and only what it depends on is installed for the target.
dev=(libsqlite3-dev libcurl4-openssl-dev libcjson-dev zlib1g-dev libisal-dev libarchive-dev
	libmicrohttpd-dev libyaml-dev libssl-dev libwebsockets17 libcap-dev)
packages=("crossbuild-essential-$arch" qemu-user-static binfmt-support
	autoconf automake pkg-config git)
for p in "${dev[@]}"; do packages+=("$p:$arch"); done
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	say "installing Debian packages: ${missing[*]}"
	dpkg --print-foreign-architectures | grep -qx "$arch" || dpkg --add-architecture "$arch"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Binaries of $arch run through qemu-user when binfmt_misc knows it.
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
	mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
		die "cannot mount binfmt_misc: cannot run $arch binaries here"
fi
[ -e "/proc/sys/fs/binfmt_misc/qemu-$qemu_arch" ] || update-binfmts --enable "qemu-$qemu_arch" ||
	die "cannot register qemu-$qemu_arch with binfmt_misc"

# --- build ----------------------------------------------------------------------
if [ -n "${CAIRN_CROSS_WORK:-}" ]; then
	work=$CAIRN_CROSS_WORK
	rm -rf "$work/src" "$work/build"
	mkdir -p "$work"
else
	work=$(mktemp -d /tmp/cairn-cross-check.XXXXXX)
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/src" "$work/build" "$work/side"
(cd "$work/side" && apt-get download "libwebsockets-dev:$arch" >/dev/null 2>&1) ||
	die "cannot download libwebsockets-dev:$arch"
dpkg-deb -x "$work"/side/libwebsockets-dev_*.deb "$work/side/root"
side_lib=$work/side/root/usr/lib/$triplet
sed -i "s|^prefix=.*|prefix=$work/side/root/usr|" "$side_lib/pkgconfig/libwebsockets.pc"
ln -sf "/usr/lib/$triplet/libwebsockets.so.17" "$side_lib/libwebsockets.so"
git -C "$here" archive HEAD | tar -x -C "$work/src"
# The S3 tests' s3rver (npm ci in the checkout): the same modules, native.
[ ! -e "$here/node_modules" ] || ln -s "$(readlink -f "$here/node_modules")" "$work/src/node_modules"
say "building $(git -C "$here" rev-parse --short HEAD) for $arch ($triplet)"
(cd "$work/src" && autoreconf -fi >/dev/null 2>&1) || die "autoreconf failed"
t0=$(date +%s)
(cd "$work/build" &&
	PKG_CONFIG_LIBDIR="$side_lib/pkgconfig:/usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig" \
	"$work/src/configure" --host="$triplet" >configure.log 2>&1) ||
	{ tail -n 20 "$work/build/configure.log" >&2; die "configure --host=$triplet failed"; }
make -C "$work/build" -j"$(nproc)" cairn >"$work/build/make.log" 2>&1 ||
	{ tail -n 30 "$work/build/make.log" >&2; die "cross build failed"; }
say "built in $(($(date +%s) - t0))s: $(file -b "$work/build/cairn" | cut -d, -f1-2)"
file -b "$work/build/cairn" | grep -q "$(case $arch in arm64) echo aarch64 ;; amd64) echo x86-64 ;; *) echo . ;; esac)" ||
	die "the binary is not for $arch"

# --- run it under qemu-user ---------------------------------------------------
"$work/build/cairn" version | sed 's/^/    /' || die "cairn version under qemu-$qemu_arch"
say "make check TESTS_FILTER=\"$tests\" with the $arch binary (qemu-$qemu_arch)"
t0=$(date +%s)
if ! make -C "$work/build" -j"$(nproc)" check TESTS_FILTER="$tests" >"$work/check.log" 2>&1; then
	grep -E '^(FAIL|XPASS)' "$work/check.log" >&2 || tail -n 40 "$work/check.log" >&2
	die "tests failed under qemu-$qemu_arch"
fi
grep -E '^[0-9]+ passed' "$work/check.log" | tail -n 1 | sed 's/^/    /'
say "cross check for $arch passed ($(($(date +%s) - t0))s of tests)"
