#!/usr/bin/env bash
# setup.sh: builds the Go vulnerability database that `make check` runs
# govulncheck against, offline.
#
#   deploy/vulndb/setup.sh     # prints the database's directory on its last line
#
# The database is the OSV entries of golang.org/x/vulndb at the version the
# development module pins (cmd/dev/go.mod), fetched through the Go module
# proxy like any module, and indexed into govulncheck's database layout
# (index/db.json, index/modules.json, ID/<id>.json) by that module's own
# generator, cmd/indexdb (a tool of cmd/dev). It is written to
# .cache/vulndb/ (git-ignored), then used as
#   govulncheck -db file://<repo>/.cache/vulndb/db ./...
#
# It does nothing when .cache/vulndb already holds the database of the
# pinned version, so it is cheap to run before every `make check`. To move
# to a newer database: cd cmd/dev && go get -tool golang.org/x/vulndb/cmd/indexdb@<version>.
#
# Environment (optional):
#   VULNDB_CACHE   folder of the database (default <repo>/.cache/vulndb)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DEV="$ROOT/cmd/dev"
DEST="${VULNDB_CACHE:-$ROOT/.cache/vulndb}"
GO="${GO:-go}"

die() { echo "deploy/vulndb/setup.sh: $*" >&2; exit 1; }

version="$(cd "$DEV" && "$GO" list -m -f '{{.Version}}' golang.org/x/vulndb)" ||
	die "cannot read the pinned golang.org/x/vulndb version from cmd/dev/go.mod"

if [ "$(cat "$DEST/VERSION" 2>/dev/null || true)" = "$version" ] && [ -f "$DEST/db/index/modules.json" ]; then
	echo "vulnerability database golang.org/x/vulndb@$version is in $DEST/db" >&2
	echo "$DEST/db"
	exit 0
fi

src="$(cd "$DEV" && "$GO" mod download golang.org/x/vulndb && "$GO" list -m -f '{{.Dir}}' golang.org/x/vulndb)"
[ -d "$src/data/osv" ] || die "golang.org/x/vulndb@$version has no data/osv (module source: '$src')"

# Build beside the destination and swap it in, so that a reader never sees
# half a database and an interrupted run leaves the old one.
mkdir -p "$(dirname "$DEST")"
tmp="$(mktemp -d "$DEST.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$DEV" && "$GO" tool indexdb -vulns "$src/data/osv" -out "$tmp/db") ||
	die "indexdb failed on $src/data/osv"
[ -f "$tmp/db/index/modules.json" ] || die "indexdb wrote no index/modules.json"
echo "$version" >"$tmp/VERSION"
rm -rf "$DEST"
mv "$tmp" "$DEST"
trap - EXIT
echo "built the vulnerability database golang.org/x/vulndb@$version ($(ls "$DEST/db/ID" | wc -l) entries) in $DEST/db" >&2
echo "$DEST/db"
