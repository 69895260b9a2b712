#!/usr/bin/env bash
# setup.sh: installs the headless browser the dashboard test drives
# (cmd/agentbus/dashboard_test.go loads /dashboard in headless Chromium,
# dumps the rendered DOM and takes a screenshot).
#
#   deploy/browser/setup.sh
#
# It installs Debian's `chromium` package with apt. It does nothing when a
# chromium (or chromium-browser) binary is already on PATH, so it is cheap to
# run before every `make test`.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deploy/browser/setup.sh: chromium is not installed and this is not root; run:" >&2
	echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium" >&2
	exit 1
fi

apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || {
	echo "deploy/browser/setup.sh: apt installed chromium but no chromium binary is on PATH" >&2
	exit 1
}
