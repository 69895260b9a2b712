package ingress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/runclient"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tracing"
)

// RunState is a run of the caller's tenant as it is now: its plan
// projection (a run parked before it was projected is known by its gate,
// a queued one as pending), the packet of the gate it waits at, if one is
// open, and its record once it ended and was projected.
type RunState struct {
	RunID     string
	Plan      store.Plan
	Gate      *orch.GatePacket
	Execution *store.Execution
}

// Run is the caller's tenant's run runID; false once it answered the
// request (404 not_found for a missing run and for another tenant's).
func (x Runs) Run(w http.ResponseWriter, r *http.Request, runID string) (RunState, bool) {
	t, ok := x.g.targetOf(w, withRun(r, runID, "", nil), true)
	if !ok {
		return RunState{}, false
	}
	st := RunState{RunID: runID, Plan: t.plan}
	if x.g.cfg.Gates != nil {
		rec, open, err := x.g.cfg.Gates.OpenOf(r.Context(), t.tenant, runID, "")
		if x.g.storeError(w, err, "gate") {
			return RunState{}, false
		}
		if open {
			p := rec.Gate.Packet()
			st.Gate = &p
		}
	}
	e, err := x.g.store.GetExecution(r.Context(), t.tenant, runID)
	switch {
	case err == nil:
		st.Execution = &e
	case !errors.Is(err, store.ErrNotFound) && x.g.storeError(w, err, "execution"):
		return RunState{}, false
	}
	return st, true
}

// Cancel, Decide and Steer serve POST /agent/runs/{run_id}/cancel,
// .../approvals/{gate_id} and .../steer in process, answering w as those
// routes do: an adapter acts on a run under the native rules.
func (x Runs) Cancel(w http.ResponseWriter, r *http.Request, runID string) {
	x.g.cancel(w, withRun(r, runID, "", nil))
}

func (x Runs) Decide(w http.ResponseWriter, r *http.Request, runID, gateID string, body runclient.ApprovalRequest) {
	x.g.approve(w, withRun(r, runID, gateID, body))
}

func (x Runs) Steer(w http.ResponseWriter, r *http.Request, runID, message string) {
	x.g.steer(w, withRun(r, runID, "", runclient.SteerRequest{Message: message}))
}

// Await returns run st to wait for (its next result: its end, or its
// next gate) or follow (its chunks from now on) within the run timeout;
// await before deciding, so that no result passes unseen. False once it
// answered the request (409 run_awaited when this ingress awaits it).
func (x Runs) Await(w http.ResponseWriter, r *http.Request, route string, st RunState) (*Started, bool) {
	tail, err := x.g.replyTail(r.Context())
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "cannot follow the run: "+err.Error())
		return nil, false
	}
	p, err := x.g.runs.Await(st.RunID)
	if err != nil {
		WriteError(w, http.StatusConflict, "run_awaited", "the run is awaited by another request of this ingress")
		return nil, false
	}
	_, span := tracing.Server(r.Context(), route)
	ctx, cancel := context.WithTimeout(r.Context(), x.g.cfg.RunTimeout)
	req := orch.RunRequest{RunID: st.RunID, TenantID: st.Plan.TenantID, SessionID: st.Plan.SessionID, UserID: st.Plan.UserID}
	return &Started{Request: req, g: x.g, sub: submitted{pending: p, tail: tail, span: span}, ctx: ctx, cancel: cancel}, true
}

// withRun is r as a run-control route's request: its path naming run
// runID (and gate gateID), body its JSON body.
func withRun(r *http.Request, runID, gateID string, body any) *http.Request {
	c := r.Clone(r.Context())
	c.SetPathValue("run_id", runID)
	c.SetPathValue("gate_id", gateID)
	b, _ := json.Marshal(body)
	c.Body, c.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	return c
}
