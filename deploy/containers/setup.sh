#!/bin/sh
# setup.sh installs and configures what `make images` and `make test-containers`
# need to build and run agentbus's containers on this machine, offline:
#
#   - podman (with runc as its runtime, netavark, aardvark-dns and iptables
#     for the containers' network and names) and mmdebstrap (the executor's Debian
#     base), from Debian's packages;
#   - a podman configuration of the project's own under .cache/containers/:
#     containers.conf (runtime runc, no default rlimits: these machines
#     refuse podman's defaults, and crun refuses their hybrid cgroups) and
#     storage.conf (images and containers under .cache/containers/storage),
#     so that nothing of the machine's own podman set-up is changed.
#
# It is idempotent: a second run installs nothing and rewrites the two files
# only when their content changed. It prints the environment to use them:
#
#   eval "$(deploy/containers/setup.sh)"   # CONTAINERS_CONF, CONTAINERS_STORAGE_CONF
#
# Usage: deploy/containers/setup.sh   (as root, or with sudo available; the
# storage of rootful podman needs root anyway)
set -eu

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$ROOT/.cache/containers"
CACHE="$(cd "$ROOT/.cache/containers" && pwd -P)"

log() { echo "containers setup: $*" >&2; }

need=""
command -v podman >/dev/null 2>&1 || need="$need podman"
command -v runc >/dev/null 2>&1 || need="$need runc"
command -v mmdebstrap >/dev/null 2>&1 || need="$need mmdebstrap"
[ -x /usr/lib/podman/netavark ] || command -v netavark >/dev/null 2>&1 || need="$need netavark"
[ -x /usr/lib/podman/aardvark-dns ] || command -v aardvark-dns >/dev/null 2>&1 || need="$need aardvark-dns"
# netavark sets the containers' network up with iptables.
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need="$need iptables"

if [ -n "$need" ]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		log "missing:$need, and apt-get is not available; install them with your package manager"
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then
			sudo="sudo"
		else
			log "missing:$need; run as root to install"
			exit 1
		fi
	fi
	log "installing$need"
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $need >&2
fi

# write_if_changed FILE: stdin to FILE unless FILE already holds it.
write_if_changed() {
	tmp="$1.new.$$"
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then
		rm -f "$tmp"
	else
		mv "$tmp" "$1"
		log "wrote $1"
	fi
}

write_if_changed "$CACHE/containers.conf" <<EOF
# Written by deploy/containers/setup.sh: agentbus's podman configuration.
[containers]
# The machines refuse podman's default rlimits (RLIMIT_NOFILE, RLIMIT_NPROC).
default_ulimits = []

[engine]
# crun refuses the machines' hybrid (v1 + v2) cgroups; runc runs.
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
network_backend = "netavark"
EOF

write_if_changed "$CACHE/storage.conf" <<EOF
# Written by deploy/containers/setup.sh: images and containers under .cache/.
[storage]
driver = "overlay"
graphroot = "$CACHE/storage"
runroot = "/run/agentbus-containers"
EOF

echo "export CONTAINERS_CONF='$CACHE/containers.conf' CONTAINERS_STORAGE_CONF='$CACHE/storage.conf'"
