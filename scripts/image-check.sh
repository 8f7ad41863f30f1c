#!/bin/bash
# scripts/image-check.sh: build the Dockerfile and check the image it makes,
# on a Debian 12 machine without a Docker engine. Not part of the test suite
# (minutes of apt-get and compiling; CI must not depend on it).
#
# As root: installs buildah, containerd, docker.io, skopeo, podman and
# debootstrap (Debian packages), builds the Dockerfile from a clean clone of the
# committed HEAD with scripts/image.sh (base image debian:12-slim pulled if
# a registry answers, else made from Debian's own mirror with debootstrap
# and tagged with that name, so the Dockerfile builds unchanged), then:
# - the image as such: its user/entrypoint/command; as uid 65532 `cairn
#   version`, `--help`, `server --help`, every shared library resolved
#   (ldd), CA certificates, the data directories writable, no compiler;
# - the fs init container: `chown -R 65532:65532` of a root-owned host
#   directory as root with only CAP_CHOWN and CAP_DAC_OVERRIDE;
# - `make image-tar`'s archive: imported by containerd (`ctr images
#   import`, what `k3s ctr images import` is), loaded by Docker (`docker
#   load` into a private dockerd) and podman, read by skopeo as
#   oci-archive and as docker-archive;
# - end to end against kubesim (the project's Kubernetes API stand-in) on
#   the host's loopback, TLS on: the image's `cairn install`, then its
#   server run as the pod runs it, by containerd from the imported image
#   (`ctr run --read-only --seccomp`, uid 65532, tmpfs /tmp, journal,
#   backup directory and the web token bind-mounted): /healthz and
#   /readyz 200, /status.json and /metrics 401 without the token and 200
#   with it; `cairn backup create --wait` from a second container; the
#   tarball owned by 65532; a clean SIGTERM stop. (Where containerd cannot
#   run, the server runs under buildah instead, without the read-only
#   root, and that is said.)
# Prints the build time and the image size; exits non-zero on any failure.
# Idempotent: a second run reuses the base image and buildah's layer cache.
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

[ "$(id -u)" = 0 ] || die "run as root (apt-get, buildah, debootstrap, containerd)"
grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null ||
	echo "image-check: warning: not Debian 12 (bookworm); continuing" >&2

here=$(cd "$(dirname "$0")/.." && pwd)
src=${CAIRN_IMAGE_SRC:-$here}
rev=${CAIRN_IMAGE_REV:-HEAD}

# --- tools -----------------------------------------------------------------
packages=(buildah crun runc debootstrap git ca-certificates python3 openssl curl skopeo podman containerd docker.io)
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
ctrd_pid=
dockerd_pid=
cleanup() {
	local c
	for c in "${ctrs[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
	[ -z "$ctrd_pid" ] || { kill "$ctrd_pid" 2>/dev/null || true; wait "$ctrd_pid" 2>/dev/null || true; }
	[ -z "$dockerd_pid" ] || { kill "$dockerd_pid" 2>/dev/null || true; wait "$dockerd_pid" 2>/dev/null || true; }
	[ -n "${CAIRN_IMAGE_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# --- build (scripts/image.sh of the clone) ----------------------------------
say "cloning $src ($rev)"
rm -rf "$work/src"
git clone --quiet "$src" "$work/src"
git -C "$work/src" checkout --quiet "$rev"
commit=$(git -C "$work/src" rev-parse --short HEAD)
export CAIRN_IMAGE_SRC=$work/src CAIRN_IMAGE_TOOL=buildah
unset CAIRN_IMAGE CAIRN_IMAGE_ARCH
# shellcheck source=scripts/image.sh
. "$work/src/scripts/image.sh"
img_init
version=$IMG_VERSION
image=$IMG_NAME
base=$IMG_BASE
say "building commit $commit"
img_build
build_s=$IMG_BUILD_S
img_isolation
read -r -a iso <<<"$IMG_ISO"

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

# The fs init container (cairn install's backups-owner): root with only
# CHOWN and DAC_OVERRIDE hands a root-owned host directory (what the
# kubelet's DirectoryOrCreate makes), a 0700 subdirectory included, to 65532.
chown_dir=$work/hostpath-backups
rm -rf "$chown_dir"
mkdir -p "$chown_dir/backups/old"
chmod 700 "$chown_dir/backups"
touch "$chown_dir/backups/old/velero-backup.json"
# buildah's --cap-drop ALL wins over --cap-add: drop the others one by one.
init_caps=()
for c in FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE SYS_CHROOT SETFCAP NET_RAW MKNOD AUDIT_WRITE; do
	init_caps+=(--cap-drop "CAP_$c")
done
init_chown() {
	local caps
	caps=$(buildah run "${iso[@]}" --user 0:0 "${init_caps[@]}" "$ctr" -- sh -c 'grep CapEff /proc/self/status')
	[ "$(printf '%s' "$caps" | awk '{print $2}')" = 0000000000000003 ] ||
		{ echo "not exactly CHOWN and DAC_OVERRIDE: $caps"; return 1; }
	buildah run "${iso[@]}" --user 0:0 "${init_caps[@]}" -v "$chown_dir:/var/lib/cairn/backups" "$ctr" -- \
		chown -R 65532:65532 /var/lib/cairn/backups || return 1
	[ -z "$(find "$chown_dir" ! -uid 65532 -print -quit)" ] || { find "$chown_dir" -printf '%u %p\n'; return 1; }
}
check "fs init container: chown -R as root with only CHOWN, DAC_OVERRIDE" init_chown

# --- the archive for air-gapped nodes ----------------------------------------
tarball=$work/cairn-$version-$IMG_ARCH.oci.tar
img_tar "$tarball"
check "image-tar: skopeo reads it as an OCI archive" \
	hexpect "\"Architecture\": \"$IMG_ARCH\"" skopeo inspect "oci-archive:$tarball"
check "image-tar: skopeo reads it as a docker archive (docker load's manifest.json)" \
	hexpect "\"Architecture\": \"$IMG_ARCH\"" skopeo inspect "docker-archive:$tarball"
check "image-tar: podman load names it $IMG_REF" \
	hexpect "Loaded image: $IMG_REF" podman load -i "$tarball"
# docker load, into a dockerd of its own (Debian's docker.io) on a private
# socket, so a Docker already on the machine is left alone.
dkd=$work/dockerd
rm -rf "$dkd"
mkdir -p "$dkd"
/usr/sbin/dockerd --data-root "$dkd/root" --exec-root "$dkd/exec" --host "unix://$dkd/docker.sock" \
	--pidfile "$dkd/pid" --iptables=false --ip6tables=false --bridge=none >"$dkd/log" 2>&1 &
dockerd_pid=$!
DOCKER=(/usr/bin/docker -H "unix://$dkd/docker.sock")
for _ in $(seq 150); do "${DOCKER[@]}" version >/dev/null 2>&1 && break; sleep 0.1; done
if "${DOCKER[@]}" version >/dev/null 2>&1; then
	check "image-tar: docker load names it ${IMG_NAME}" hexpect "Loaded image: ${IMG_NAME}" \
		"${DOCKER[@]}" load -i "$tarball"
else
	say "dockerd does not start here ($(tail -n1 "$dkd/log" | cut -c1-120)): no docker load check"
fi
kill "$dockerd_pid" 2>/dev/null || true
wait "$dockerd_pid" 2>/dev/null || true
dockerd_pid=
ctrd=$work/containerd
rm -rf "$ctrd"
mkdir -p "$ctrd"
cat >"$ctrd/config.toml" <<EOF
version = 2
root = "$ctrd/root"
state = "$ctrd/state"
[grpc]
  address = "$ctrd/containerd.sock"
EOF
containerd --config "$ctrd/config.toml" >"$ctrd/log" 2>&1 &
ctrd_pid=$!
CTR=(ctr --address "$ctrd/containerd.sock" -n k8s.io)
for _ in $(seq 100); do "${CTR[@]}" version >/dev/null 2>&1 && break; sleep 0.1; done
ctr_ok=no
ctr_import() {
	"${CTR[@]}" images import "$tarball" || return 1
	"${CTR[@]}" images ls -q | grep -qx "$IMG_REF" || { "${CTR[@]}" images ls; return 1; }
}
if "${CTR[@]}" version >/dev/null 2>&1; then
	check "image-tar: ctr images import (k3s ctr) names it $IMG_REF" ctr_import
	if "${CTR[@]}" run --rm --read-only "$IMG_REF" probe true >/dev/null 2>&1; then
		ctr_ok=yes
	else
		say "containerd cannot run containers here: the server runs under buildah below"
	fi
else
	say "containerd does not start here ($(tail -n1 "$ctrd/log")): no ctr import check"
	fails=$((fails + 1))
fi

# --- end to end ------------------------------------------------------------
# kubesim on the host's loopback, TLS on, so the image's libcurl and CA
# handling are used. Every cairn here is the image's, as uid 65532, in the
# host's network namespace.
e2e_dir=$work/e2e
rm -rf "$e2e_dir"
mkdir -p "$e2e_dir/kube" "$e2e_dir/ctl" "$e2e_dir/journal" "$e2e_dir/backups"
chmod 777 "$e2e_dir/ctl"
chown 65532:65532 "$e2e_dir/journal" "$e2e_dir/backups"
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
	if [ -n "$server_pid" ]; then
		if [ "$ctr_ok" = yes ]; then
			"${CTR[@]}" task kill -s SIGTERM image-check-server >/dev/null 2>&1 || true
		else
			touch "$e2e_dir/ctl/stop"
		fi
		wait "$server_pid" 2>/dev/null && echo "server exit 0" >>"$e2e_dir/server.log" ||
			echo "server exit $?" >>"$e2e_dir/server.log"
		server_pid=
	fi
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
# The token install generated, read back as a user would (kubectl's job).
token=$(python3 -c '
import base64, json, ssl, sys, urllib.request
url = open(sys.argv[1]).read().strip()
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = json.load(urllib.request.urlopen(url + "/api/v1/namespaces/cairn-system/secrets/cairn-web-token", context=ctx))
print(base64.b64decode(s["data"]["token"]).decode())' "$e2e_dir/ready")
printf '%s' "$token" >"$e2e_dir/token"
chmod 444 "$e2e_dir/token"
server_args=(server --namespace cairn-system --listen "127.0.0.1:$port" --web-token-file /var/run/cairn/web-token/token
	--journal /var/lib/cairn/journal/journal.db --kubeconfig /kube/config --server-id image-check)
if [ "$ctr_ok" = yes ]; then
	say "server: containerd, read-only root, uid 65532, RuntimeDefault seccomp"
	"${CTR[@]}" run --rm --read-only --seccomp --net-host \
		--mount "type=tmpfs,src=tmpfs,dst=/tmp,options=nosuid:nodev:size=16m" \
		--mount "type=bind,src=$e2e_dir/kube,dst=/kube,options=rbind:ro" \
		--mount "type=bind,src=$e2e_dir/journal,dst=/var/lib/cairn/journal,options=rbind:rw" \
		--mount "type=bind,src=$e2e_dir/backups,dst=/var/lib/cairn/backups,options=rbind:rw" \
		--mount "type=bind,src=$e2e_dir/token,dst=/var/run/cairn/web-token/token,options=rbind:ro" \
		"$IMG_REF" image-check-server /usr/bin/cairn "${server_args[@]}" >"$e2e_dir/server.log" 2>&1 &
	server_pid=$!
else
	say "server: buildah (containerd cannot run containers here): root file system writable"
	# shellcheck disable=SC2016 # $p expands in the container's shell
	buildah run "${iso[@]}" "${net[@]}" --user 65532:65532 -v "$e2e_dir/token:/var/run/cairn/web-token/token:ro" \
		-v "$e2e_dir/journal:/var/lib/cairn/journal" -v "$e2e_dir/backups:/var/lib/cairn/backups" \
		"$srv_ctr" -- sh -c '/usr/bin/cairn "$@" & p=$!
		while [ ! -e /ctl/stop ] && kill -0 $p 2>/dev/null; do sleep 0.2; done
		kill -TERM $p 2>/dev/null; wait $p' sh "${server_args[@]}" >"$e2e_dir/server.log" 2>&1 &
	server_pid=$!
fi
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
ready() {
	local _
	for _ in $(seq 300); do
		[ "$(code "http://127.0.0.1:$port/readyz")" = 200 ] && return 0
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.2
	done
	tail -n 20 "$e2e_dir/server.log"; return 1
}
check "e2e: server /readyz answers 200 without the token" ready
check "e2e: /healthz 200 without the token" test "$(code "http://127.0.0.1:$port/healthz")" = 200
for p in /status.json /metrics /status; do
	check "e2e: $p 401 without the token" test "$(code "http://127.0.0.1:$port$p")" = 401
done
check "e2e: /status.json 200 with the token" \
	test "$(code -H "Authorization: Bearer $token" "http://127.0.0.1:$port/status.json")" = 200
check "e2e: /metrics 200 with the token" \
	test "$(code -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics")" = 200
if [ "$ctr_ok" = yes ]; then
	in_server() {
		local pid
		pid=$("${CTR[@]}" task ls | awk '$1 == "image-check-server" {print $2}')
		[ -n "$pid" ] || return 1
		cat "/proc/$pid/status"
		touch "/proc/$pid/root/usr/bin/.w" 2>&1 && return 1
		return 0
	}
	server_status() {
		local out
		out=$(in_server) || { printf '%s\n' "$out"; return 1; }
		printf '%s\n' "$out" | grep -qE '^Uid:\s+65532\s' || { printf '%s\n' "$out" | grep Uid; return 1; }
		printf '%s\n' "$out" | grep -qE '^CapEff:\s+0+$' || { printf '%s\n' "$out" | grep Cap; return 1; }
		printf '%s\n' "$out" | grep -qE '^NoNewPrivs:\s+1$' || return 1
		printf '%s\n' "$out" | grep -qE '^Seccomp:\s+2$' || { printf '%s\n' "$out" | grep Seccomp; return 1; }
	}
	check "e2e: the server runs as uid 65532, no capabilities, no_new_privs, seccomp filter" server_status
	ro_root() {
		local pid
		pid=$("${CTR[@]}" task ls | awk '$1 == "image-check-server" {print $2}')
		grep -E ' / ' "/proc/$pid/mountinfo" | grep -qE '(^| )ro(,| )' || { grep ' / ' "/proc/$pid/mountinfo"; return 1; }
	}
	check "e2e: its root file system is mounted read-only" ro_root
fi
check "e2e: cairn backup create --wait completes" \
	hexpect 'Completed' timeout 300 buildah run "${iso[@]}" "${net[@]}" --user 65532:65532 "$cli_ctr" -- \
	/usr/bin/cairn backup create img1 --include-namespaces shop --wait --kubeconfig /kube/config
tarball_owned() {
	local f list
	f=$(find "$e2e_dir/backups" -name 'img1.tar.gz' | head -n1)
	[ -n "$f" ] || { echo "no img1.tar.gz under the backups directory"; find "$e2e_dir" | head; return 1; }
	[ "$(stat -c %u "$f")" = 65532 ] || { stat "$f"; return 1; }
	list=$(tar -tzf "$f") || return 1
	grep -qx 'resources/configmaps/namespaces/shop/cm-03.json' <<<"$list" || { head <<<"$list"; return 1; }
	[ -s "$e2e_dir/journal/journal.db" ] || { ls -la "$e2e_dir/journal"; return 1; }
}
check "e2e: tarball in the backups directory, owned by 65532; journal written" tarball_owned
stop_e2e
check "e2e: server stops on SIGTERM with exit 0" grep -q '^server exit 0$' "$e2e_dir/server.log"

say "cairn version in the image:"
run /usr/bin/cairn version | sed 's/^/    /'
say "shared libraries:"
run ldd /usr/bin/cairn | sed 's/^/    /'

size=$(buildah images --format '{{.Size}}' "$image" | head -n1)
base_size=$(buildah images --format '{{.Size}}' "$base" | head -n1)
bin_size=$(run stat -c %s /usr/bin/cairn)
gz=$(du -m "$tarball" | cut -f1)
say "image $image: $size, ${gz} MB as $(basename "$tarball") (base $base: $base_size; /usr/bin/cairn: $bin_size bytes); build ${build_s}s"

if [ "$fails" -gt 0 ]; then
	die "$fails check(s) failed"
fi
say "image check passed"
