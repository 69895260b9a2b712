#!/bin/sh
# images.sh builds agentbus's images with podman and no registry (`make images`):
#
#   agentbus/router, planner, aggregator, ingress, agentbus  static, FROM scratch (target role)
#   agentbus/executor                                        Debian root with python3 and bubblewrap (target executor)
#   agentbus/nats                                            nats-server of go.mod, FROM scratch (target nats)
#
# each tagged VERSION and latest, from the stages of deploy/docker/Dockerfile
# with BINARIES=prebuilt (the static binaries built here, with the flags of
# the Dockerfile's golang stage) and DEBIAN_BASE=localhost/agentbus/debian:<tag>,
# a Debian root that mmdebstrap builds from Debian's packages (suite
# DEBIAN_SUITE, only DEBIAN_PACKAGES and what they depend on) and podman
# imports. It prints each image's size.
#
# Everything it writes is under .cache/containers/ (the Debian root's tar,
# the build context, podman's storage: deploy/containers/setup.sh); a second
# run reuses the Debian base and podman's layer cache, and rebuilds only the
# binaries that changed.
#
# Usage: deploy/containers/images.sh   (as root; VERSION defaults to git describe)
set -eu

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
eval "$(deploy/containers/setup.sh)"
CACHE="$(cd .cache/containers && pwd -P)"

# The Debian base: suite and packages are its whole recipe, and its tag
# names both, so a change of either builds a new one.
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_SECURITY="${DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
# Debian's essential packages (variant essential: what dpkg and the packages'
# scripts need; no apt, nothing is installed at run time), then the sandbox's
# python3, bubblewrap and prlimit (util-linux, essential), and the CA
# certificates and time zones (copied into the scratch images too).
DEBIAN_PACKAGES="python3 bubblewrap ca-certificates tzdata"
# A fixed time for the files mmdebstrap writes, so that the same packages
# give the same tar.
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1700000000}"
export SOURCE_DATE_EPOCH

# go.mod's toolchain (go1.27.3), as the Makefile picks it.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
BINARIES="router planner aggregator ingress agentbus executor nats-server"

log() { echo "images: $*" >&2; }

debian_base() {
	sum="$(printf '%s\n' "$DEBIAN_SUITE" $DEBIAN_PACKAGES | sha256sum | cut -c1-12)"
	tag="localhost/agentbus/debian:$DEBIAN_SUITE-$sum"
	if podman image exists "$tag"; then
		echo "$tag"
		return
	fi
	tar="$CACHE/debian/$DEBIAN_SUITE-$sum.tar"
	if [ ! -s "$tar" ]; then
		mkdir -p "$CACHE/debian"
		log "building the Debian root $DEBIAN_SUITE ($DEBIAN_PACKAGES) with mmdebstrap"
		# The system's python3 for mmdebstrap's helpers, not a user's.
		PATH=/usr/sbin:/usr/bin:/sbin:/bin mmdebstrap --variant=essential --format=tar --quiet \
			--include="$(echo $DEBIAN_PACKAGES | tr ' ' ,)" \
			--dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-exclude=/usr/share/man/*' \
			--dpkgopt='path-exclude=/usr/share/locale/*' \
			--dpkgopt='path-exclude=/usr/share/info/*' \
			--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
			"$DEBIAN_SUITE" "$tar.part" \
			"deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
			"deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
			"deb $DEBIAN_SECURITY $DEBIAN_SUITE-security main" >&2
		mv "$tar.part" "$tar"
	fi
	log "importing $tar as $tag"
	podman import --quiet "$tar" "$tag" >/dev/null
	echo "$tag"
}

# The build context: the binaries in out/, and the files the Dockerfile
# copies from the repository.
CTX="$CACHE/context"
mkdir -p "$CTX/out" "$CTX/deploy/docker"
cp deploy/docker/passwd deploy/docker/group "$CTX/deploy/docker/"
log "building the binaries ($VERSION)"
pkgs=""
for b in $BINARIES healthcheck; do
	case "$b" in
	nats-server) pkgs="$pkgs github.com/nats-io/nats-server/v2" ;; # go.mod's version; built as nats-server
	*) pkgs="$pkgs ./cmd/$b" ;;
	esac
done
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o "$CTX/out/" $pkgs

BASE="$(debian_base)"
for b in $BINARIES; do
	case "$b" in
	executor) target=executor name=executor ;;
	nats-server) target=nats name=nats ;;
	*) target=role name="$b" ;;
	esac
	log "building agentbus/$name:$VERSION (target $target)"
	podman build --quiet -f deploy/docker/Dockerfile --target "$target" \
		--build-arg BINARY="$b" --build-arg BINARIES=prebuilt --build-arg DEBIAN_BASE="$BASE" \
		-t "agentbus/$name:$VERSION" -t "agentbus/$name:latest" "$CTX" >/dev/null
done

echo "images ($VERSION):"
for b in $BINARIES; do
	name="$b"
	[ "$b" != nats-server ] || name=nats
	podman image inspect --format "{{.Size}}" "agentbus/$name:$VERSION" |
		awk -v n="agentbus/$name:$VERSION" '{ printf "  %-40s %6.1f MB\n", n, $1 / 1e6 }'
done
