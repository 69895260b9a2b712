#!/usr/bin/env bash
# Install the Restate server used by agentbus bench's Restate peer.
#
#   bench/restate/setup.sh            # installs into bench/.restate
#
# The server comes from the npm package @restatedev/restate-server, whose
# binary ships in an optional platform package (@restatedev/restate-server-
# linux-x64 and friends). npm installs into a git-ignored prefix with install
# scripts disabled (the package's telemetry postinstall never runs).
# Idempotent: a stamp records the installed version; when it matches, the
# script does nothing.
# On success prints one line to stdout: "restate-ready: <binary> <version>".
# On failure prints ONE line to stderr starting with "restate-unavailable:" and
# exits 3 (npm's own output goes to a log file named in that line).
#
# Env: RESTATE_VERSION (default 1.7.12), BENCH_RESTATE (prefix, default
#      <repo>/bench/.restate).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${RESTATE_VERSION:-1.7.12}"
prefix="${BENCH_RESTATE:-$(cd "$here/.." && pwd)/.restate}"
stamp="$prefix/.stamp-restate"
log="$prefix/.setup-restate.log"

fail() {
	echo "restate-unavailable: $*" >&2
	exit 3
}

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) platform=linux-x64 ;;
Linux-aarch64) platform=linux-arm64 ;;
Darwin-x86_64) platform=darwin-x64 ;;
Darwin-arm64) platform=darwin-arm64 ;;
*) fail "no restate-server package for $(uname -s) $(uname -m)" ;;
esac
bin="$prefix/node_modules/@restatedev/restate-server-$platform/bin/restate-server"

# Serialise concurrent setup runs when flock exists.
if command -v flock >/dev/null 2>&1; then
	exec 9>"${TMPDIR:-/tmp}/agentbus-bench-restate.lock" && flock 9
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version $platform" ] && [ -x "$bin" ]; then
	echo "restate-ready: $bin $version"
	exit 0
fi

command -v npm >/dev/null 2>&1 || fail "npm not found on PATH (the server is installed from the npm package @restatedev/restate-server)"
mkdir -p "$prefix" || fail "cannot create $prefix"
rm -f "$stamp"
export DO_NOT_TRACK=1 SCARF_ANALYTICS=false npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
if ! npm install --prefix "$prefix" --ignore-scripts --no-save "@restatedev/restate-server@$version" >"$log" 2>&1; then
	reason="$(grep -iE '^npm (error|ERR!)' "$log" | grep -v -iE 'complete log|^npm (error|ERR!) *$|code E' | head -n 1 | cut -c1-300)"
	fail "npm install @restatedev/restate-server@$version failed: ${reason:-see the log} (full log: $log)"
fi
[ -x "$bin" ] || fail "npm installed @restatedev/restate-server@$version but not its $platform binary ($bin)"
got="$("$bin" --version 2>>"$log" | awk '{print $2}')"
[ "$got" = "$version" ] || fail "$bin --version says '$got', want $version (full log: $log)"

echo "$version $platform" >"$stamp"
echo "restate-ready: $bin $version"
