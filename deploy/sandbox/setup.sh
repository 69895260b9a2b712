#!/bin/sh
# setup.sh installs what the sandbox package needs to isolate exec_python:
# bubblewrap (bwrap) and prlimit (util-linux). It is idempotent: when both
# are present it prints one line and changes nothing.
#
# Usage: deploy/sandbox/setup.sh   (as root, or with sudo available)
set -eu

need=""
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
command -v prlimit >/dev/null 2>&1 || need="$need util-linux"

if [ -z "$need" ]; then
	echo "sandbox setup: bwrap and prlimit already present ($(command -v bwrap)), nothing to do"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "sandbox setup: missing:$need, and apt-get is not available; install them with your package manager" >&2
	exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "sandbox setup: missing:$need; run as root to install" >&2
		exit 1
	fi
fi

echo "sandbox setup: installing$need"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
echo "sandbox setup: installed$need ($(command -v bwrap))"
