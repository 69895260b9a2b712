package ingress

import (
	"context"
	"net/http"
	"time"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/handlers/defs"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
)

// Adapter is a protocol served besides the native API (handlers/chat:
// OpenAI's chat completions). Mount adds its routes to the ingress's mux,
// behind its authentication; its handlers start and follow runs through
// Runs, under the same identity rules, validation, request limits and
// credentials as POST /agent/run.
type Adapter interface {
	Mount(mux *http.ServeMux, runs Runs)
}

// Runs is what an adapter's handlers use of the ingress.
type Runs struct{ g *Ingress }

// Decode reads r's body into v (at most MaxBodyBytes, within
// BodyTimeout), ignoring the fields v lacks: another protocol's clients
// extend its bodies. A body it cannot take is an error with its code.
func (x Runs) Decode(w http.ResponseWriter, r *http.Request, v any) (string, error) {
	return x.g.decodeWith(w, r, v, false)
}

// Start starts the run body asks for, as POST /agent/run does, and
// returns it to wait for or follow; route names the request's span. When
// it cannot, it answers the request itself and reports false.
func (x Runs) Start(w http.ResponseWriter, r *http.Request, route string, body runclient.Request) (*Started, bool) {
	req, code, err := x.g.runRequest(r, body)
	if err != nil {
		WriteError(w, StatusOf(code), code, err.Error())
		return nil, false
	}
	sub, ok := x.g.submit(w, r, route, req)
	if !ok {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), x.g.cfg.RunTimeout)
	return &Started{Request: req, g: x.g, sub: sub, ctx: ctx, cancel: cancel}, true
}

// Tenant is the tenant a read is scoped to, or false once it answered
// the request (tenant_required, invalid_request).
func (x Runs) Tenant(w http.ResponseWriter, r *http.Request) (string, bool) { return readScope(w, r) }

// Agents are the tenant's agents; false once it answered a store failure.
func (x Runs) Agents(w http.ResponseWriter, r *http.Request, tenant string) ([]agents.Agent, bool) {
	list, err := defs.Agents(r.Context(), x.g.store, tenant)
	return list, !x.g.storeError(w, err, "agents")
}

// Now is the ingress's clock.
func (x Runs) Now() time.Time { return x.g.now() }

// Started is a run an adapter started: Wait for its result or Stream its
// chunks, within the ingress's run timeout, then Close it.
type Started struct {
	Request orch.RunRequest
	g       *Ingress
	sub     submitted
	ctx     context.Context
	cancel  context.CancelFunc
}

// Wait returns the run's result, or an error once the run timeout passed
// (WriteRunTimeout answers it).
func (s *Started) Wait() (orch.RunResult, error) { return s.sub.pending.Wait(s.ctx) }

// Stream sends the run's chunks to sink until its last one.
func (s *Started) Stream(sink ChunkSink) {
	s.g.streamRun(s.ctx, sink, s.Request, s.sub.tail, s.sub.pending.Wait)
}

// Close releases the run's waiter.
func (s *Started) Close() {
	s.cancel()
	s.sub.close()
}
