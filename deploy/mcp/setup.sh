#!/usr/bin/env bash
# setup.sh: installs the MCP reference server the skills interop tests run
# (skills/everything_test.go) against, on all three transports.
#
#   deploy/mcp/setup.sh
#
# It installs @modelcontextprotocol/server-everything, pinned in
# deploy/mcp/package.json with every transitive dependency pinned in
# deploy/mcp/package-lock.json, into .cache/mcp/ (git-ignored) with
# `npm ci`, without running package install scripts. It does nothing when
# .cache/mcp already holds exactly that lockfile's install, so it is cheap
# to run before every `make test`.
#
# The server is then started as
#   node .cache/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio
#   PORT=<port> node .../dist/index.js sse              (GET /sse, POST /message)
#   PORT=<port> node .../dist/index.js streamableHttp   (/mcp)
#
# Environment (optional):
#   MCP_CACHE   install folder (default <repo>/.cache/mcp)
#
# Requires node >= 20 and npm on PATH.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DEST="${MCP_CACHE:-$ROOT/.cache/mcp}"
PKG="@modelcontextprotocol/server-everything"

die() { echo "deploy/mcp/setup.sh: $*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (need node >= 20)"
command -v npm >/dev/null || die "npm is not installed"
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || die "node $(node --version) is too old (need >= 20)"

# The pinned version, from package.json.
want="$(node -p "require('$HERE/package.json').dependencies['$PKG']")"

installed() {
	node -p "require('$DEST/node_modules/$PKG/package.json').version" 2>/dev/null || true
}

if [ "$(installed)" = "$want" ] && cmp -s "$HERE/package-lock.json" "$DEST/package-lock.json"; then
	echo "$PKG@$want is installed in $DEST"
	exit 0
fi

mkdir -p "$DEST"
cp "$HERE/package.json" "$HERE/package-lock.json" "$DEST/"
npm ci --prefix "$DEST" --no-audit --no-fund --ignore-scripts --loglevel=error

got="$(installed)"
[ "$got" = "$want" ] || die "installed $PKG version is '$got', want $want"
[ -f "$DEST/node_modules/$PKG/dist/index.js" ] || die "$PKG has no dist/index.js"
echo "installed $PKG@$want in $DEST"
