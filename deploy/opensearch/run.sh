#!/usr/bin/env bash
# run.sh: the real single-node OpenSearch used by agentbus development and CI.
#
#   deploy/opensearch/run.sh [start|stop|status]     (start is the default)
#
# start   downloads (with Maven, from Maven Central) the OpenSearch
#         integration-test distribution and the matching k-NN plugin, caches
#         them under .cache/opensearch/ (git-ignored), unpacks them, installs
#         the plugin, starts one node on 127.0.0.1:9200 in the background and
#         waits until the cluster health is at least yellow. It does nothing
#         if something already answers on the port.
# stop    stops the node this script started (by its pid file).
# status  prints the cluster health, or exits 1 if the node does not answer.
#
# Environment (all optional):
#   OPENSEARCH_VERSION    distribution version              (default 3.6.0)
#   OPENSEARCH_JAVA_HOME  JDK running the node              (default: Temurin 25
#                         if present, else $JAVA_HOME; 3.x needs Java 21+)
#   OPENSEARCH_PORT       HTTP port                         (default 9200)
#   OPENSEARCH_HEAP       -Xms/-Xmx of the node             (default 512m)
#   OPENSEARCH_CACHE      cache folder                      (default <repo>/.cache/opensearch)
#   OPENSEARCH_WAIT       seconds to wait for health        (default 120)
#   OPENSEARCH_USER       user running the node when this script runs as
#                         root, which OpenSearch refuses    (default nobody)
#
# The integration-test distribution has no security plugin, so the node
# speaks plain HTTP without authentication. It has no Index State Management
# plugin either, and that plugin is not published to Maven Central; see
# docs in store/opensearch (doc.go) for how the store handles its absence.
set -euo pipefail

VERSION="${OPENSEARCH_VERSION:-3.6.0}"
PORT="${OPENSEARCH_PORT:-9200}"
HEAP="${OPENSEARCH_HEAP:-512m}"
WAIT="${OPENSEARCH_WAIT:-120}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${OPENSEARCH_CACHE:-$ROOT/.cache/opensearch}"
URL="http://127.0.0.1:$PORT"

M2_REPO="$CACHE/m2"                   # Maven local repository (the downloads)
HOME_DIR="$CACHE/opensearch-$VERSION" # unpacked distribution (with plugins)
DATA_DIR="$CACHE/data-$VERSION"
LOG_DIR="$CACHE/logs"
RUN_DIR="$CACHE/run"
PID_FILE="$RUN_DIR/opensearch.pid"
CLUSTER=agentbus-dev

log() { printf 'opensearch: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# java_home picks the JDK for the node: 3.x needs Java 21 or newer.
java_home() {
	if [[ -n "${OPENSEARCH_JAVA_HOME:-}" ]]; then
		echo "$OPENSEARCH_JAVA_HOME"
	elif [[ -x /usr/lib/jvm/temurin-25-jdk-amd64/bin/java ]]; then
		echo /usr/lib/jvm/temurin-25-jdk-amd64
	elif [[ -n "${JAVA_HOME:-}" ]]; then
		echo "$JAVA_HOME"
	else
		die "no JDK: set OPENSEARCH_JAVA_HOME (Java 21+ for OpenSearch 3.x)"
	fi
}

# as_node_user runs a command as the node's user: OpenSearch refuses to run
# as root, so a root caller (typical in CI containers) drops privileges.
as_node_user() {
	if ((EUID == 0)); then
		local user="${OPENSEARCH_USER:-nobody}"
		setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --clear-groups -- "$@"
	else
		"$@"
	fi
}

# close_inherited_fds closes every descriptor of this shell above stderr
# (bash's own script descriptor, 255, aside).
close_inherited_fds() {
	local fd
	for fd in /proc/$BASHPID/fd/*; do
		fd="${fd##*/}"
		if ((fd > 2 && fd != 255)); then
			eval "exec $fd>&-" 2>/dev/null || true
		fi
	done
}

# own gives the node's user the folders the node writes to.
own() {
	if ((EUID == 0)); then
		local user="${OPENSEARCH_USER:-nobody}"
		chown -R "$(id -u "$user"):$(id -g "$user")" "$@"
	fi
}

# check_java fails early when the JDK is too old for the version.
check_java() {
	local java major
	java="$(java_home)/bin/java"
	[[ -x "$java" ]] || die "no java at $java (set OPENSEARCH_JAVA_HOME)"
	major="$("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p')"
	if [[ "$VERSION" == 3.* && "${major:-0}" -lt 21 ]]; then
		die "OpenSearch $VERSION needs Java 21+, $java is Java ${major:-unknown} (set OPENSEARCH_JAVA_HOME)"
	fi
}

answers() { curl -fsS -m 2 "$URL" >/dev/null 2>&1; }

health() { curl -fsS -m 5 "$URL/_cluster/health" 2>/dev/null; }

# fetch prints the path of group:artifact:version:zip in the cache's Maven
# repository, downloading it from Maven Central first if needed.
fetch() {
	local group="$1" artifact="$2" version="$3"
	local file="$M2_REPO/${group//.//}/$artifact/$version/$artifact-$version.zip"
	if [[ ! -s "$file" ]]; then
		command -v mvn >/dev/null || die "mvn not found (needed to download $group:$artifact:$version)"
		log "downloading $group:$artifact:$version:zip from Maven Central"
		mkdir -p "$CACHE"
		mvn -B -Dstyle.color=never -Dmaven.repo.local="$M2_REPO" \
			org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get \
			-Dartifact="$group:$artifact:$version:zip" -Dtransitive=false >"$CACHE/maven.log" 2>&1 \
			|| { tail -n 40 "$CACHE/maven.log" >&2; die "maven could not download $group:$artifact:$version:zip"; }
		[[ -s "$file" ]] || die "maven did not produce $file"
	fi
	echo "$file"
}

# install unpacks the distribution and installs the k-NN plugin, once per
# version. A half-finished install is redone.
install() {
	if [[ -f "$HOME_DIR/.agentbus-installed" ]]; then
		return
	fi
	local dist knn
	dist="$(fetch org.opensearch.distribution.integ-test-zip opensearch "$VERSION")"
	knn="$(fetch org.opensearch.plugin opensearch-knn "$VERSION.0")"
	rm -rf "$HOME_DIR" "$CACHE/unpack"
	mkdir -p "$CACHE/unpack"
	unzip -q "$dist" -d "$CACHE/unpack"
	mv "$CACHE/unpack/opensearch-$VERSION" "$HOME_DIR"
	rmdir "$CACHE/unpack"
	log "installing the k-NN plugin"
	OPENSEARCH_JAVA_HOME="$(java_home)" "$HOME_DIR/bin/opensearch-plugin" install --batch \
		"file://$knn" >"$CACHE/plugin-install.log" 2>&1 \
		|| { cat "$CACHE/plugin-install.log" >&2; die "k-NN plugin install failed"; }
	# jvm.options writes GC logs, heap dumps and crash logs relative to the
	# working directory; keep them with the node's other logs.
	sed -i -e "s|logs/gc.log|$LOG_DIR/gc.log|g" -e "s|logs/hs_err_pid|$LOG_DIR/hs_err_pid|" \
		-e "s|HeapDumpPath=data|HeapDumpPath=$LOG_DIR|" "$HOME_DIR/config/jvm.options"
	touch "$HOME_DIR/.agentbus-installed"
}

node_log() { echo "$LOG_DIR/$CLUSTER.log"; }

fail_with_log() {
	log "$1; last lines of $(node_log):"
	tail -n 60 "$(node_log)" >&2 2>/dev/null || true
	exit 1
}

start() {
	if answers; then
		log "already answering on $URL; nothing to do"
		return
	fi
	local begin=$SECONDS
	check_java
	install
	mkdir -p "$DATA_DIR" "$LOG_DIR" "$RUN_DIR"
	rm -f "$PID_FILE"
	# The node writes its keystore under config/, data, logs and the pid.
	own "$HOME_DIR/config" "$DATA_DIR" "$LOG_DIR" "$RUN_DIR"
	log "starting OpenSearch $VERSION on $URL (heap $HEAP, JDK $(java_home))"
	# -d daemonizes; -p writes the pid file. Single-node discovery also skips
	# the production bootstrap checks (vm.max_map_count and friends). No
	# index is created implicitly: a write to a misspelled index fails
	# instead of creating one with a dynamic mapping.
	# The daemon must not keep what the caller had open (a `flock` on a lock
	# file serialising test runs would be held for the node's life), so the
	# start runs in a subshell that closes every descriptor above stderr.
	(close_inherited_fds
	OPENSEARCH_JAVA_HOME="$(java_home)" \
		OPENSEARCH_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP ${OPENSEARCH_EXTRA_JAVA_OPTS:-}" \
		as_node_user "$HOME_DIR/bin/opensearch" -d -p "$PID_FILE" \
		-Ecluster.name="$CLUSTER" \
		-Enode.name=agentbus-node \
		-Ediscovery.type=single-node \
		-Enetwork.host=127.0.0.1 \
		-Ehttp.port="$PORT" \
		-Epath.data="$DATA_DIR" \
		-Epath.logs="$LOG_DIR" \
		-Eaction.auto_create_index=false \
		-Ecluster.routing.allocation.disk.threshold_enabled=false \
		>"$CACHE/stdout.log" 2>&1) \
		|| { cat "$CACHE/stdout.log" >&2; fail_with_log "the node did not start"; }
	# A single node cannot allocate replicas, so an index with replicas is
	# yellow; agentbus creates its indices with 0 replicas, but accept yellow
	# so that any other index does not block development.
	local deadline=$((SECONDS + WAIT)) status=""
	while ((SECONDS < deadline)); do
		if [[ -f "$PID_FILE" ]] && ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
			fail_with_log "the node exited during startup"
		fi
		status="$(health | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p' || true)"
		if [[ "$status" == green || "$status" == yellow ]]; then
			log "cluster $CLUSTER is $status after $((SECONDS - begin))s (pid $(cat "$PID_FILE"))"
			check_knn
			return
		fi
		sleep 1
	done
	fail_with_log "cluster health not green/yellow after ${WAIT}s (last: ${status:-no answer})"
}

# check_knn proves the k-NN plugin works: a lucene HNSW index with cosine
# similarity, two vectors and a filtered knn query that must return the
# nearest allowed one.
check_knn() {
	local idx=agentbus-knn-smoke out
	local json='Content-Type: application/json'
	curl -fsS -m 10 -XDELETE "$URL/$idx?ignore_unavailable=true" >/dev/null
	curl -fsS -m 30 -XPUT "$URL/$idx" -H "$json" -d '{
		"settings": {"index": {"knn": true, "number_of_shards": 1, "number_of_replicas": 0}},
		"mappings": {"properties": {"t": {"type": "keyword"}, "v": {"type": "knn_vector", "dimension": 3,
			"method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}}}}' >/dev/null \
		|| fail_with_log "cannot create a k-NN index"
	curl -fsS -m 10 -XPUT "$URL/$idx/_doc/a" -H "$json" -d '{"t": "x", "v": [1, 0, 0]}' >/dev/null
	curl -fsS -m 10 -XPUT "$URL/$idx/_doc/b?refresh=true" -H "$json" -d '{"t": "y", "v": [0.9, 0.1, 0]}' >/dev/null
	out="$(curl -fsS -m 10 -XPOST "$URL/$idx/_search" -H "$json" -d '{"size": 1,
		"query": {"knn": {"v": {"vector": [0.9, 0.1, 0], "k": 1, "filter": {"term": {"t": "x"}}}}}}' || true)"
	curl -fsS -m 10 -XDELETE "$URL/$idx" >/dev/null || true
	[[ "$out" == *'"_id":"a"'* ]] || fail_with_log "k-NN smoke query failed: ${out:-no answer}"
	log "k-NN plugin works (lucene engine, filtered query)"
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
		for _ in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "pid $pid still alive after 30s; killing it"
			kill -9 "$pid"
		fi
	fi
	rm -f "$PID_FILE"
}

status() {
	if ! answers; then
		log "not answering on $URL"
		exit 1
	fi
	health
	echo
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
status) status ;;
*) die "usage: $0 [start|stop|status]" ;;
esac
