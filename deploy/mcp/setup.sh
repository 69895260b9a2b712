#!/usr/bin/env bash
# setup.sh: installs the MCP reference servers the tests run against:
# server-everything (skills/everything_test.go, on all three transports),
# server-filesystem (the plain-MCP end-to-end run with a real model's wire
# format, cmd/agentbus/model_test.go, over stdio) and server-memory (with
# the other two, the offline model's phrasing suite,
# cmd/agentbus/phrasing_test.go).
#
#   deploy/mcp/setup.sh
#
# It installs @modelcontextprotocol/server-everything,
# @modelcontextprotocol/server-filesystem and
# @modelcontextprotocol/server-memory, pinned in
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
#   node .cache/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js <allowed dir>...   (stdio)
#   MEMORY_FILE_PATH=<graph.jsonl> node .cache/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js   (stdio)
#
# Environment (optional):
#   MCP_CACHE   install folder (default <repo>/.cache/mcp)
#
# Requires node >= 20 and npm on PATH.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DEST="${MCP_CACHE:-$ROOT/.cache/mcp}"
# npm ci, given a path through a symbolic link (a .cache shared by another
# checkout), takes the folder for a linked package missing from the
# lockfile; its physical path installs.
mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd -P)"
PKGS=("@modelcontextprotocol/server-everything" "@modelcontextprotocol/server-filesystem" "@modelcontextprotocol/server-memory")

die() { echo "deploy/mcp/setup.sh: $*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (need node >= 20)"
command -v npm >/dev/null || die "npm is not installed"
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || die "node $(node --version) is too old (need >= 20)"

# installed_all succeeds when every package is installed at its pinned
# version (from package.json) from exactly this lockfile.
installed() {
	node -p "require('$DEST/node_modules/$1/package.json').version" 2>/dev/null || true
}
pinned() {
	node -p "require('$HERE/package.json').dependencies['$1']"
}
installed_all() {
	cmp -s "$HERE/package-lock.json" "$DEST/package-lock.json" || return 1
	for pkg in "${PKGS[@]}"; do
		[ "$(installed "$pkg")" = "$(pinned "$pkg")" ] || return 1
	done
}

if installed_all; then
	echo "${PKGS[*]} are installed in $DEST"
	exit 0
fi

mkdir -p "$DEST"
cp "$HERE/package.json" "$HERE/package-lock.json" "$DEST/"
npm ci --prefix "$DEST" --no-audit --no-fund --ignore-scripts --loglevel=error

for pkg in "${PKGS[@]}"; do
	got="$(installed "$pkg")"
	[ "$got" = "$(pinned "$pkg")" ] || die "installed $pkg version is '$got', want $(pinned "$pkg")"
	[ -f "$DEST/node_modules/$pkg/dist/index.js" ] || die "$pkg has no dist/index.js"
	echo "installed $pkg@$got in $DEST"
done
