#!/usr/bin/env bash
# setup.sh: installs the Python packages the client tests drive against a
# real all-in-one: the official `openai` SDK, unmodified, against
# /v1/chat/completions (cmd/agentbus/openai_test.go), and httpx, which
# agentbus's own Python client (clients/python) needs
# (cmd/agentbus/pyclient_test.go), with setuptools and wheel to build it,
# and the official `a2a-sdk`, unmodified, against the A2A endpoints
# (cmd/agentbus/a2a_test.go), with its direct requirements pinned.
#
#   deploy/pyclients/setup.sh      # prints the venv's python
#
# A virtual environment under the git-ignored .cache/pyclients, with the
# pinned versions below from PyPI. It does nothing when they are already
# installed, so it is cheap to run before every `make test`.
set -euo pipefail

cd "$(dirname "$0")/../.."
venv=.cache/pyclients
pins=(openai==3.57.0 httpx==0.28.1 setuptools==84.2.1 wheel==0.48.0
	a2a-sdk==0.3.26 httpx-sse==0.4.3 pydantic==2.14.4 protobuf==7.36.2 google-api-core==2.44.0)

if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "${pins[@]}" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, pin
PY
then
	echo "$venv/bin/python"
	exit 0
fi

if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deploy/pyclients/setup.sh: python3-venv is missing and this is not root; run:" >&2
		echo "  sudo apt-get update && sudo apt-get install -y python3-venv" >&2
		exit 1
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
echo "$venv/bin/python"
