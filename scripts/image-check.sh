#!/bin/bash
# scripts/image-check.sh: build the Dockerfile and check the image it makes,
# on a Debian 12 machine without a Docker engine. Not part of the test suite
# (minutes of apt-get and compiling; CI must not depend on it).
#
# As root: installs buildah and debootstrap (Debian packages), gets the base
# image debian:12-slim (pulled if a registry answers, otherwise made from
# Debian's own mirror with debootstrap and tagged with that name, so the
# Dockerfile's FROM lines resolve to it unchanged), builds the Dockerfile
# from a clean clone of the committed HEAD, then runs the image as its user
# 65532: `cairn version`, `cairn --help`, `cairn server --help`, every shared
# library resolved (ldd), the data directories writable, the image's
# user/entrypoint/command. Prints the build time and the image size; exits
# non-zero on any failure. Idempotent: a second run reuses the base image
# and buildah's layer cache.
#
#   CAIRN_IMAGE_SRC     repository to clone (default: the one holding this script)
#   CAIRN_IMAGE_REV     revision to build (default HEAD; uncommitted edits are not built)
#   CAIRN_IMAGE_BASE    auto (default): pull, else debootstrap | pull | debootstrap
#   CAIRN_IMAGE_MIRROR  Debian mirror for debootstrap (default: the one apt uses)
#   CAIRN_IMAGE_WORK    scratch directory (default: a new one under /tmp, removed)
#   CAIRN_IMAGE_NOCACHE 1: build without buildah's layer cache (a cold build)
set -euo pipefail

say() { printf '==> %s\n' "$*"; }
die() { printf 'image-check: FAIL: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (apt-get, buildah, debootstrap)"
grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null ||
	echo "image-check: warning: not Debian 12 (bookworm); continuing" >&2

here=$(cd "$(dirname "$0")/.." && pwd)
src=${CAIRN_IMAGE_SRC:-$here}
rev=${CAIRN_IMAGE_REV:-HEAD}
base_mode=${CAIRN_IMAGE_BASE:-auto}
base=docker.io/library/debian:12-slim

# --- tools -----------------------------------------------------------------
packages=(buildah crun runc debootstrap git ca-certificates python3 openssl curl)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	say "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -n "${CAIRN_IMAGE_WORK:-}" ]; then
	work=$CAIRN_IMAGE_WORK
	mkdir -p "$work"
else
	work=$(mktemp -d /tmp/cairn-image-check.XXXXXX)
fi
ctrs=()
cleanup() {
	local c
	for c in "${ctrs[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
	[ -n "${CAIRN_IMAGE_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# --- base image --------------------------------------------------------------
# The Debian mirror apt uses here: the first http(s) URI ending in /debian.
mirror=${CAIRN_IMAGE_MIRROR:-$( { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
	/etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | grep -v '^[[:space:]]*#' |
	grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ')}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}

# debian:12-slim from Debian's own packages: a minbase debootstrap, then what
# the official slim variant does (docs, man pages and translations excluded
# and kept out by a dpkg rule; apt keeps no .deb caches), its apt sources
# (bookworm, -updates, -security), PATH and CMD. Not byte-identical to the
# Docker Hub image, but the same distribution, packages and conventions.
make_base() {
	local root=$work/rootfs ctr mnt
	say "debootstrap --variant=minbase bookworm from $mirror"
	rm -rf "$root"
	debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
	cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<-'EOF'
	# The "slim" variant: files that containers do not need are excluded,
	# and this rule keeps them that way.
	path-exclude /usr/share/doc/*
	# keep copyright files for legal reasons
	path-include /usr/share/doc/*/copyright
	path-exclude /usr/share/groff/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/linda/*
	path-exclude /usr/share/lintian/overrides/*
	path-exclude /usr/share/locale/*
	path-include /usr/share/locale/locale.alias
	path-exclude /usr/share/man/*
	EOF
	find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$root"/usr/share/{groff,info,linda,man}/* "$root"/usr/share/lintian/overrides/*
	find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
	cat >"$root/etc/apt/apt.conf.d/docker-clean" <<-'EOF'
	DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
	APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
	Dir::Cache::pkgcache "";
	Dir::Cache::srcpkgcache "";
	EOF
	printf 'Acquire::Languages "none";\n' >"$root/etc/apt/apt.conf.d/docker-no-languages"
	rm -f "$root/etc/apt/sources.list"
	cat >"$root/etc/apt/sources.list.d/debian.sources" <<-EOF
	Types: deb
	URIs: $mirror
	Suites: bookworm bookworm-updates
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

	Types: deb
	URIs: $mirror-security
	Suites: bookworm-security
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
		"$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*
	: >"$root/etc/hostname"
	: >"$root/etc/resolv.conf"
	: >"$root/etc/machine-id"

	ctr=$(buildah from scratch)
	ctrs+=("$ctr")
	mnt=$(buildah mount "$ctr")
	tar -C "$root" --numeric-owner --xattrs -cf - . | tar -C "$mnt" --numeric-owner --xattrs -xpf -
	buildah umount "$ctr" >/dev/null
	buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd bash --os linux --arch amd64 \
		--label org.cairn.base=debootstrap-minbase-bookworm "$ctr"
	buildah commit --quiet --rm "$ctr" "$base" >/dev/null
	ctrs=()
	rm -rf "$root"
}

if label=$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "org.cairn.base"}}' "$base" 2>/dev/null); then
	say "base image $base: present (${label:-pulled})"
else
	pulled=no
	if [ "$base_mode" != debootstrap ]; then
		say "pulling $base"
		if timeout 120 buildah pull --quiet "$base" >/dev/null 2>"$work/pull.err"; then
			pulled=yes
		elif [ "$base_mode" = pull ]; then
			cat "$work/pull.err" >&2; die "cannot pull $base"
		else
			say "cannot pull $base ($(tail -n1 "$work/pull.err" | cut -c1-120)); making it with debootstrap"
		fi
	fi
	[ "$pulled" = yes ] || make_base
fi

# --- how to run containers ----------------------------------------------------
# crun, then runc (crun refuses hybrid cgroup v1/v2 hosts), then plain chroot
# isolation where no OCI runtime can make its namespaces.
iso=()
probe=$(buildah from --pull=never "$base")
ctrs+=("$probe")
for cand in "--isolation oci --runtime /usr/bin/crun" "--isolation oci --runtime /usr/sbin/runc" "--isolation chroot"; do
	read -r -a try <<<"$cand"
	if buildah run "${try[@]}" "$probe" -- true >/dev/null 2>"$work/probe.err"; then
		iso=("${try[@]}"); break
	fi
	say "cannot run containers with $cand: $(tail -n1 "$work/probe.err" | cut -c1-100)"
done
[ "${#iso[@]}" -gt 0 ] || die "no way to run a container here (tried crun, runc, chroot)"
say "running containers with ${iso[*]}"

# --- build -------------------------------------------------------------------
say "cloning $src ($rev)"
rm -rf "$work/src"
git clone --quiet "$src" "$work/src"
git -C "$work/src" checkout --quiet "$rev"
commit=$(git -C "$work/src" rev-parse --short HEAD)
version=$(sed -n 's/^AC_INIT(\[cairn\], \[\([^]]*\)\].*/\1/p' "$work/src/configure.ac")
[ -n "$version" ] || die "no version in configure.ac"
image=localhost/cairn:$version

build_flags=("${iso[@]}" --pull=never --layers -f Dockerfile -t "$image")
[ "${CAIRN_IMAGE_NOCACHE:-0}" = 1 ] && build_flags+=(--no-cache)
say "buildah bud ${build_flags[*]} (commit $commit)"
t0=$(date +%s)
if ! buildah bud "${build_flags[@]}" "$work/src" >"$work/build.log" 2>&1; then
	tail -n 40 "$work/build.log" >&2
	die "image build failed (log above)"
fi
build_s=$(($(date +%s) - t0))
say "built $image in ${build_s}s"

# --- checks ------------------------------------------------------------------
fails=0
check() { # check NAME CMD...: run a host command, PASS/FAIL line
	local name=$1; shift
	local out
	if out=$("$@" 2>&1); then
		printf 'PASS: %s\n' "$name"
	else
		printf 'FAIL: %s\n%s\n' "$name" "$(printf '%s\n' "$out" | tail -n 15)"
		fails=$((fails + 1))
	fi
}

cfg() { buildah inspect --type image --format "$1" "$image"; }
user=$(cfg '{{.OCIv1.Config.User}}')
entry=$(cfg '{{.OCIv1.Config.Entrypoint}}')
cmd=$(cfg '{{.OCIv1.Config.Cmd}}')
check "image user is 65532:65532 (got $user)" test "$user" = 65532:65532
check "entrypoint is /usr/bin/cairn (got $entry)" test "$entry" = '[/usr/bin/cairn]'
check "command is server --listen 0.0.0.0:8085 (got $cmd)" \
	test "$cmd" = '[server --listen 0.0.0.0:8085]'

ctr=$(buildah from --pull=never "$image")
ctrs+=("$ctr")
run() { buildah run "${iso[@]}" --user 65532:65532 "$ctr" -- "$@"; }
expect() { # expect PATTERN CMD...: the output of CMD in the image matches
	local pat=$1; shift
	hexpect "$pat" run "$@"
}
hexpect() { # hexpect PATTERN CMD...: the output of the host command CMD matches
	local pat=$1; shift
	local out
	out=$("$@" 2>&1) || { printf '%s\n' "$out"; return 1; }
	printf '%s\n' "$out" | grep -qE -e "$pat" || { printf 'no /%s/ in:\n%s\n' "$pat" "$out"; return 1; }
}
no_missing_libs() {
	local out
	out=$(run ldd /usr/bin/cairn 2>&1) || { printf '%s\n' "$out"; return 1; }
	printf '%s\n' "$out" | grep -q 'not found' && { printf '%s\n' "$out"; return 1; }
	printf '%s\n' "$out" | grep -q 'libc.so' || { printf '%s\n' "$out"; return 1; }
}
check "runs as uid 65532" expect '^65532$' id -u
check "cairn version" expect "$version" /usr/bin/cairn version
check "cairn --help" expect 'server' /usr/bin/cairn --help
check "cairn server --help" expect '--listen' /usr/bin/cairn server --help
check "ldd: every shared library resolves" no_missing_libs
check "CA certificates present" run test -s /etc/ssl/certs/ca-certificates.crt
check "journal dir writable by 65532" run sh -c 'touch /var/lib/cairn/journal/.w && rm /var/lib/cairn/journal/.w'
check "backups dir writable by 65532" run sh -c 'touch /var/lib/cairn/backups/.w && rm /var/lib/cairn/backups/.w'
check "no compiler in the runtime image" run sh -c '! command -v cc && ! command -v gcc' 

# End to end against kubesim (the project's Kubernetes API stand-in) on the
# host's loopback, TLS on, so the image's libcurl and CA handling are used.
# Every cairn here is the image's, as uid 65532, in the host's network
# namespace: `cairn install`, then `cairn server` with the image's defaults
# (journal, fs location /var/lib/cairn/backups) and a second container's
# `cairn backup create --wait`. The server is stopped with SIGTERM through a
# stop file (SIGTERM to `buildah run` kills the container outright).
e2e_dir=$work/e2e
rm -rf "$e2e_dir"
mkdir -p "$e2e_dir/kube" "$e2e_dir/ctl"
chmod 777 "$e2e_dir/ctl"
python3 - "$e2e_dir/seed.json" <<'PY'
import json, sys
items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}]
items += [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%02d" % i, "namespace": "shop"},
           "data": {"k": "v%d" % i}} for i in range(10)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"))
PY
python3 "$work/src/tests/kubesim/kubesim.py" --tls --seed "$e2e_dir/seed.json" \
	--kubeconfig-out "$e2e_dir/kube/config" --ready-file "$e2e_dir/ready" >"$e2e_dir/kubesim.log" 2>&1 &
kubesim_pid=$!
server_pid=
stop_e2e() {
	[ -z "$server_pid" ] || { touch "$e2e_dir/ctl/stop"; wait "$server_pid" 2>/dev/null || true; server_pid=; }
	[ -z "$kubesim_pid" ] || { kill "$kubesim_pid" 2>/dev/null || true; wait "$kubesim_pid" 2>/dev/null || true; kubesim_pid=; }
}
trap 'stop_e2e; cleanup' EXIT
for _ in $(seq 100); do [ -s "$e2e_dir/ready" ] && break; sleep 0.1; done
[ -s "$e2e_dir/ready" ] || { cat "$e2e_dir/kubesim.log" >&2; die "kubesim did not start"; }
chmod 644 "$e2e_dir/kube/config"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
net=(--network host -v "$e2e_dir/kube:/kube:ro" -v "$e2e_dir/ctl:/ctl")
e2e() { buildah run "${iso[@]}" "${net[@]}" --user 65532:65532 "$1" -- "${@:2}"; }
srv_ctr=$(buildah from --pull=never "$image"); ctrs+=("$srv_ctr")
cli_ctr=$(buildah from --pull=never "$image"); ctrs+=("$cli_ctr")
check "e2e: cairn install against kubesim (TLS)" \
	hexpect 'cairn installed' e2e "$cli_ctr" /usr/bin/cairn install --kubeconfig /kube/config
# shellcheck disable=SC2016 # $p expands in the container's shell
e2e "$srv_ctr" sh -c '/usr/bin/cairn server --kubeconfig /kube/config --server-id image-check \
	--listen 127.0.0.1:'"$port"' & p=$!
	while [ ! -e /ctl/stop ] && kill -0 $p 2>/dev/null; do sleep 0.2; done
	kill -TERM $p 2>/dev/null; wait $p; echo "server exit $?"' >"$e2e_dir/server.log" 2>&1 &
server_pid=$!
ready() {
	local _
	for _ in $(seq 300); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] && return 0
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.2
	done
	tail -n 20 "$e2e_dir/server.log"; return 1
}
check "e2e: server /readyz answers 200" ready
check "e2e: cairn backup create --wait completes" \
	hexpect 'Completed' timeout 300 buildah run "${iso[@]}" "${net[@]}" --user 65532:65532 "$cli_ctr" -- \
	/usr/bin/cairn backup create img1 --include-namespaces shop --wait --kubeconfig /kube/config
tarball_owned() {
	local mnt f list
	mnt=$(buildah mount "$srv_ctr")
	f=$(find "$mnt/var/lib/cairn/backups" -name 'img1.tar.gz' | head -n1)
	[ -n "$f" ] || { echo "no img1.tar.gz under /var/lib/cairn/backups"; find "$mnt/var/lib/cairn" | head; return 1; }
	[ "$(stat -c %u "$f")" = 65532 ] || { stat "$f"; return 1; }
	list=$(tar -tzf "$f") || return 1
	grep -qx 'resources/configmaps/namespaces/shop/cm-03.json' <<<"$list" || { head <<<"$list"; return 1; }
	[ -s "$mnt/var/lib/cairn/journal/journal.db" ] || { ls -la "$mnt/var/lib/cairn/journal"; return 1; }
}
check "e2e: tarball in /var/lib/cairn/backups, owned by 65532, journal in /var/lib/cairn/journal" tarball_owned
stop_e2e
check "e2e: server stops on SIGTERM with exit 0" grep -q '^server exit 0$' "$e2e_dir/server.log"

say "cairn version in the image:"
run /usr/bin/cairn version | sed 's/^/    /'
say "shared libraries:"
run ldd /usr/bin/cairn | sed 's/^/    /'

size=$(buildah images --format '{{.Size}}' "$image" | head -n1)
base_size=$(buildah images --format '{{.Size}}' "$base" | head -n1)
bin_size=$(run stat -c %s /usr/bin/cairn)
# What a registry would store and a node pull: the layers gzip-compressed.
rm -rf "$work/push"
buildah push --quiet --compression-format gzip "$image" "dir:$work/push" >/dev/null 2>&1 ||
	die "cannot export $image"
gz=$(find "$work/push" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.1f MB", s / 1e6}')
rm -rf "$work/push"
say "image $image: $size, $gz compressed (base $base: $base_size; /usr/bin/cairn: $bin_size bytes); build ${build_s}s"

if [ "$fails" -gt 0 ]; then
	die "$fails check(s) failed"
fi
say "image check passed"
