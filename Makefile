# agentbus: event-driven agent orchestration on NATS JetStream.
#
# Quick start (fresh machine, Go 1.26 or later installed; the targets use go.mod's toolchain, go1.27.3,
# which the go command fetches through the module proxy on first use):
#   make run    # build and run the demo task end to end: embedded NATS, store, demo skills, offline model
#   make test   # every test, with the race detector: real in-process NATS, a real OpenSearch node
#               # (started by `make opensearch`), real MCP servers
#
# Other targets: make build (binaries in bin/), make up (all-in-one on 127.0.0.1:8080),
# make check (gofmt, go vet, staticcheck, govulncheck against an offline database; what CI runs first),
# make test-unit (the fast tier: the tests that need no server, no setup and no long real time; see below),
# make fuzz (every fuzz target for FUZZTIME each, 30s by default; CI runs a bounded pass),
# make bench (ratios against the JetStream floor, LangGraph and Restate, executor processes 1/2/4; writes bench/out/),
# make chaos (the fault-injection run against the multi-process deployment),
# make opensearch / opensearch-stop (the dev OpenSearch node on 127.0.0.1:9200, cached under .cache/),
# make lint, make stream-view (the AGENT stream of a running `make up`),
# make images (the images with podman and no registry: static roles on scratch, the executor on a Debian
# root built by mmdebstrap, nats-server; cached under .cache/containers/), make test-containers (the Compose
# deployment started with podman from those images and driven through the ingress; see deploy/containers/),
# make local-model (a real local model, no key: llama-cpp-python serving SmolLM2 on 127.0.0.1:8088, built
# into .cache/local-model/ once), make test-local-model (the demo tasks against it; see docs/MODELS.md).
#
# Two modules: the product (go.mod) and the development module cmd/dev (cmd/dev/go.mod), which holds
# what only development needs: the nats CLI, staticcheck, govulncheck, the benchmark's Restate peer and
# the deployment manifests' tests, so that none of them is a requirement of the product.

GO      ?= go
BIN     := bin
DEV     := cmd/dev
TESTFLAGS ?=
# go.mod's toolchain line picks the Go release (a machine set to GOTOOLCHAIN=local ignores it otherwise).
export GOTOOLCHAIN ?= auto

# Test tiers. make test runs every test of both modules (-race, no -short): a test that needs a missing
# server fails there, never skips. make test-unit is the fast tier, -short without -race: the tests
# that need no server and no setup script (no OpenSearch, no sandbox (bubblewrap), no MCP reference
# servers or conformance suite, no browser, no role binaries run as processes) and no long real time.
# In-process NATS is kept: most handler tests run on it. Under -short (testing.Short) a test skips,
# saying why, when it needs one of those servers, drives whole runs through every role (the tests of
# handlers/internal/pipeline, about 45 s together), or must let seconds of real time pass (an ack wait,
# a TTL, a lease, a NATS restart). UNIT_SKIP leaves out the packages whose tests (nearly) all skip
# there, the servers' and handlers/internal/pipeline. Linking the fifty test binaries is about a
# minute of CPU, more than their tests take: the tier keeps them in UNIT_BIN (go test -o) and relinks
# only those whose package or dependencies changed. (go test -o needs the packages' names distinct.)
UNIT_SKIP := /store/opensearch$$|/sandbox$$|/cmd/agentbus$$|/cmd/internal/chaos$$|/handlers/internal/pipeline$$
UNIT_BIN  := $(BIN)/unit
WITH_TESTS = {{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}

# FUZZTIME is how long `make fuzz` runs each fuzz target.
FUZZTIME ?= 30s

.PHONY: all build run up images test test-containers test-unit test-local-model local-model bench chaos check fuzz lint staticcheck vulncheck stream-view clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/agentbus demo

up: build
	$(BIN)/agentbus up --http 127.0.0.1:8080 --data ./data

bench: build
	$(GO) build -C $(DEV) -o $(CURDIR)/$(BIN)/ ./restatepeer
	$(BIN)/agentbus-dev bench

chaos: build
	$(BIN)/agentbus-dev chaos --bin $(BIN) --runs 500 $(CHAOSFLAGS)

opensearch:
	deploy/opensearch/run.sh start

opensearch-stop:
	deploy/opensearch/run.sh stop

test: opensearch build
	deploy/sandbox/setup.sh
	deploy/mcp/setup.sh
	deploy/mcp/conformance/setup.sh
	deploy/browser/setup.sh
	deploy/pyclients/setup.sh >/dev/null
	$(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) ./...
	cd $(DEV) && $(GO) test -race -count=1 $(TESTFLAGS) ./...

test-unit:
	@mkdir -p $(UNIT_BIN)/dev
	$(GO) test -short -count=1 -ldflags='-s -w' -o $(UNIT_BIN)/ $(TESTFLAGS) $$($(GO) list -f '$(WITH_TESTS)' ./... | grep -Ev '$(UNIT_SKIP)')
	cd $(DEV) && $(GO) test -short -count=1 -ldflags='-s -w' -o $(CURDIR)/$(UNIT_BIN)/dev/ $(TESTFLAGS) $$($(GO) list -f '$(WITH_TESTS)' ./...)

check: lint staticcheck vulncheck

# Every fuzz target (func Fuzz… in a _test.go file) for FUZZTIME each, one after the other. A failing
# input is written to the package's testdata/fuzz/<target>/ and then runs with every `go test` (commit it
# with the fix). The sandbox's targets need deploy/sandbox/setup.sh (which `make test` runs).
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./.cache/' | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz: $$dir $$target for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
		done; \
	done

# The images, built with podman from deploy/docker/Dockerfile's stages (deploy/containers/images.sh
# installs podman and mmdebstrap first); prints each one's size. VERSION tags them (default: git describe).
images:
	deploy/containers/images.sh

# The container tier: deploy/compose/compose.yaml started with podman (3 NATS nodes, every role, two
# executors), driven through the ingress: the demo and menu tasks (the menu through bwrap in the
# executor's container), an executor killed mid-run, a NATS node stopped and started, every role
# stopped with SIGTERM. Behind the build tag "containers": make test never runs it, and here a missing
# podman or image fails it.
test-containers: images
	eval "$$(deploy/containers/setup.sh)" && cd $(DEV) && \
		$(GO) test -tags containers -count=1 -timeout 30m -v -run TestDeploymentInContainers $(TESTFLAGS) ./containers/

local-model:
	deploy/local-model/run.sh serve

# The local-model tier: every run of the demo tasks against SmolLM2 ends with a terminal code within its budget.
test-local-model: build
	deploy/local-model/run.sh with $(GO) test -tags localmodel -count=1 -timeout 60m -run LocalModel -v $(TESTFLAGS) ./cmd/agentbus/

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	cd $(DEV) && $(GO) vet ./... && $(GO) vet -tags containers ./containers/

# staticcheck and govulncheck are tools of the development module (pinned in cmd/dev/go.mod), run on
# each module from its own root.
staticcheck:
	sc="$$(cd $(DEV) && $(GO) tool -n staticcheck)" && "$$sc" ./... && cd $(DEV) && "$$sc" ./...

vulncheck:
	db="$$(deploy/vulndb/setup.sh)" && cd $(DEV) && \
		$(GO) run ./vulncheck -db "file://$$db" -allow vulncheck/allowed.txt -C $(CURDIR) ./... && \
		$(GO) run ./vulncheck -db "file://$$db" -C $(CURDIR)/$(DEV) ./...

stream-view:
	cd $(DEV) && $(GO) tool nats --server nats://127.0.0.1:4222 stream view AGENT

clean:
	rm -rf $(BIN)
