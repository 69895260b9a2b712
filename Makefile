# agentbus: event-driven agent orchestration on NATS JetStream.
#
# Quick start (fresh machine, Go 1.26 installed):
#   make run    # build and run the demo task end to end: embedded NATS, store, demo skills, offline model
#   make test   # every test, with the race detector: real in-process NATS, a real OpenSearch node
#               # (started by `make opensearch`), real MCP servers
#
# Other targets: make build (binaries in bin/), make up (all-in-one on 127.0.0.1:8080),
# make bench (ratios against the JetStream floor, LangGraph and Restate, executor processes 1/2/4; writes bench/out/),
# make opensearch / opensearch-stop (the dev OpenSearch node on 127.0.0.1:9200, cached under .cache/),
# make lint, make stream-view (the AGENT stream of a running `make up`),
# make local-model (a real local model, no key: llama-cpp-python serving SmolLM2 on 127.0.0.1:8088, built
# into .cache/local-model/ once), make test-local-model (the demo tasks against it; see docs/MODELS.md).

GO      ?= go
BIN     := bin
TESTFLAGS ?=

.PHONY: all build run up test test-local-model local-model bench chaos lint stream-view clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/agentbus demo

up: build
	$(BIN)/agentbus up --http 127.0.0.1:8080 --data ./data

bench: build
	$(GO) build -o $(BIN)/ ./bench/restate/restatepeer
	$(BIN)/agentbus bench

chaos: build
	$(BIN)/agentbus chaos --bin $(BIN) --runs 500 $(CHAOSFLAGS)

opensearch:
	deploy/opensearch/run.sh start

opensearch-stop:
	deploy/opensearch/run.sh stop

test: opensearch build
	deploy/sandbox/setup.sh
	deploy/mcp/setup.sh
	deploy/mcp/conformance/setup.sh
	deploy/browser/setup.sh
	$(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) ./...

local-model:
	deploy/local-model/run.sh serve

# The local-model tier: every run of the demo tasks against SmolLM2 ends with a terminal code within its budget.
test-local-model: build
	deploy/local-model/run.sh with $(GO) test -tags localmodel -count=1 -timeout 60m -run LocalModel -v $(TESTFLAGS) ./cmd/agentbus/

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

stream-view:
	$(GO) tool nats --server nats://127.0.0.1:4222 stream view AGENT

clean:
	rm -rf $(BIN)
