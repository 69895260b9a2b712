#!/usr/bin/env bash
# Prepare the Python virtualenv used by bench/langgraph/peer.py.
#
#   bench/langgraph/setup.sh            # creates/updates bench/.venv
#
# Idempotent: a stamp inside the venv records the sha256 of requirements.txt and
# the venv's Python version; when both still match, the script does nothing.
# On success prints one line to stdout: "langgraph-ready: <python> langgraph <ver>".
# On failure prints ONE line to stderr starting with "langgraph-unavailable:" and
# exits 3 (pip's own output goes to a log file named in that line).
#
# Env: PYTHON (interpreter used to create the venv, default python3),
#      BENCH_VENV (venv path, default <repo>/bench/.venv).
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
req="$here/requirements.txt"
venv="${BENCH_VENV:-$(cd "$here/.." && pwd)/.venv}"
py="${PYTHON:-python3}"
stamp="$venv/.stamp-langgraph"
log="$venv/.setup-langgraph.log"

fail() {
	echo "langgraph-unavailable: $*" >&2
	exit 3
}

# last meaningful line of a log, flattened to one line
last_err() {
	local l
	l="$(grep -E '^(ERROR|error):' "$1" 2>/dev/null | tail -n 1)"
	[ -n "$l" ] || l="$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1)"
	printf '%s' "$l" | tr -s '\n\t' '  ' | cut -c1-300
}

[ -f "$req" ] || fail "requirements file not found: $req"
command -v "$py" >/dev/null 2>&1 || fail "interpreter '$py' not found on PATH"

# Serialise concurrent setup runs (e.g. parallel bench targets) when flock exists.
if command -v flock >/dev/null 2>&1; then
	exec 9>"${TMPDIR:-/tmp}/agentbus-bench-venv.lock" && flock 9
fi

want="$(sha256sum "$req" | cut -d' ' -f1)"

venv_py="$venv/bin/python"
if [ -d "$venv" ] && ! "$venv_py" -c 'import sys' >/dev/null 2>&1; then
	# Broken venv (e.g. base interpreter removed/upgraded): rebuild it.
	[ -f "$venv/pyvenv.cfg" ] || fail "$venv exists but is not a virtualenv; refusing to replace it"
	rm -rf "$venv"
fi

if [ -x "$venv_py" ]; then
	pyver="$("$venv_py" -c 'import platform; print(platform.python_version())')"
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want python$pyver" ]; then
		echo "langgraph-ready: $venv_py (up to date)"
		exit 0
	fi
fi

if [ ! -x "$venv_py" ]; then
	tmplog="$(mktemp)"
	if ! "$py" -m venv "$venv" >"$tmplog" 2>&1; then
		reason="$(last_err "$tmplog")"
		rm -f "$tmplog"
		rm -rf "$venv"
		fail "'$py -m venv $venv' failed: $reason"
	fi
	rm -f "$tmplog"
fi

rm -f "$stamp"
pyver="$("$venv_py" -c 'import platform; print(platform.python_version())')"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if ! "$venv_py" -m pip install -q -r "$req" >"$log" 2>&1; then
	fail "pip install -r $req failed on Python $pyver: $(last_err "$log") (full log: $log)"
fi
if ! "$venv_py" -c 'import langgraph.graph, langgraph.checkpoint.memory, langgraph.checkpoint.sqlite.aio' >>"$log" 2>&1; then
	fail "installed but import failed on Python $pyver: $(last_err "$log") (full log: $log)"
fi

echo "$want python$pyver" >"$stamp"
ver="$("$venv_py" -c 'import importlib.metadata as m; print(m.version("langgraph"))')"
echo "langgraph-ready: $venv_py langgraph $ver"
