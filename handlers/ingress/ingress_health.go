package ingress

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/health"
	"github.com/agentbus/agentbus/store"
)

// DefaultHealthWindow is the window of GET /agent/health without one.
const DefaultHealthWindow = 24 * time.Hour

// maxWindow bounds a health window or an audit query's range.
const maxWindow = 90 * 24 * time.Hour

// health serves GET /agent/health?window=1h (or since/until): the
// caller's tenant's plan health.
func (g *Ingress) health(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	now := g.now()
	since, until, err := timeRange(r, now, DefaultHealthWindow)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	h, err := health.TenantHealth(r.Context(), g.store, tenant, since, until)
	if g.storeError(w, err, "events") {
		return
	}
	WriteJSON(w, http.StatusOK, h)
}

// auditEvents serves GET /agent/audit/events: the caller's tenant's
// events, newest first, filtered by type (repeatable), skill, time range
// (since, until: RFC 3339, or a duration before now such as 168h) and
// large_response, at most limit. For example
// ?type=skill.called&since=168h&large_response=true: every skill call of
// the last 7 days that triggered large-response handling.
func (g *Ingress) auditEvents(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	params := r.URL.Query()
	q := store.EventQuery{TenantID: tenant, EventTypes: params["type"], SkillID: params.Get("skill"), Limit: store.DefaultEventLimit}
	var err error
	if q.Since, q.Until, err = timeRange(r, g.now(), 0); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if v := params.Get("large_response"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "invalid_request", "large_response must be true or false")
			return
		}
		q.LargeResponse = &b
	}
	if q.Limit, ok = queryLimit(w, params.Get("limit"), store.MaxEventLimit); !ok {
		return
	}
	for _, t := range q.EventTypes {
		if _, err := events.Subject(events.AuditType(t), tenant); err != nil {
			WriteError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("type %q is not an event name such as skill.called", t))
			return
		}
	}
	evs, err := g.store.Events(r.Context(), q)
	if g.storeError(w, err, "events") {
		return
	}
	if evs == nil {
		evs = []store.Event{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"tenant_id": tenant, "count": len(evs), "events": evs})
}

// queryLimit parses a limit query parameter v of 1 to most, answering
// 400 invalid_request itself when it is not one; 0 when v is empty.
func queryLimit(w http.ResponseWriter, v string, most int) (int, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		WriteError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("limit must be 1 to %d", most))
		return 0, false
	}
	return n, true
}

// timeRange reads since and until (RFC 3339 times, or durations before
// now), or window (a duration before now). A zero def leaves an absent
// since unbounded; otherwise since defaults to now - def.
func timeRange(r *http.Request, now time.Time, def time.Duration) (since, until time.Time, err error) {
	params := r.URL.Query()
	at := func(name string) (time.Time, error) {
		v := params.Get(name)
		if v == "" {
			return time.Time{}, nil
		}
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return now.Add(-d), nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s must be an RFC 3339 time or a duration such as 24h", name)
		}
		return t, nil
	}
	if since, err = at("since"); err != nil {
		return
	}
	if until, err = at("until"); err != nil {
		return
	}
	end := cmp.Or(until, now) // the range's end, bounded or not
	if v := params.Get("window"); v != "" {
		d, perr := time.ParseDuration(v)
		if perr != nil || d <= 0 || !since.IsZero() {
			return since, until, fmt.Errorf("window must be a positive duration such as 1h, and not sent with since")
		}
		since = end.Add(-d)
	}
	if since.IsZero() && def > 0 {
		since = end.Add(-def)
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return since, until, fmt.Errorf("since must be before until")
	}
	if !since.IsZero() && end.Sub(since) > maxWindow {
		return since, until, fmt.Errorf("the range is longer than %d days", int(maxWindow.Hours()/24))
	}
	return since, until, nil
}

// RunSummary is one finished run as GET /agent/runs lists it.
type RunSummary struct {
	PlanID       string    `json:"plan_id"`
	SessionID    string    `json:"session_id,omitempty"`
	TerminalCode string    `json:"terminal_code"`
	TaskType     string    `json:"task_type,omitempty"`
	Replans      int       `json:"replans"`
	InputTokens  int       `json:"input_tokens"`
	OutputTokens int       `json:"output_tokens"`
	CostUSD      float64   `json:"cost_usd"`
	FinishedAt   time.Time `json:"finished_at"`
}

// recentRuns serves GET /agent/runs?limit=50 (and since, until): the caller's
// tenant's finished runs, newest first.
func (g *Ingress) recentRuns(w http.ResponseWriter, r *http.Request) {
	tenant, ok := readScope(w, r)
	if !ok {
		return
	}
	q := store.EventQuery{TenantID: tenant, EventTypes: []string{"run.finished"}, Limit: 50}
	var err error
	if q.Since, q.Until, err = timeRange(r, g.now(), 0); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if q.Limit, ok = queryLimit(w, r.URL.Query().Get("limit"), 1000); !ok {
		return
	}
	evs, err := g.store.Events(r.Context(), q)
	if g.storeError(w, err, "events") {
		return
	}
	out := make([]RunSummary, 0, len(evs))
	for _, ev := range evs {
		out = append(out, RunSummary{PlanID: ev.PlanID, SessionID: ev.SessionID, TerminalCode: ev.Outcome, TaskType: ev.TaskType,
			Replans: ev.Replans, InputTokens: ev.InputTokens, OutputTokens: ev.OutputTokens, CostUSD: ev.CostUSD, FinishedAt: ev.TS})
	}
	WriteJSON(w, http.StatusOK, map[string]any{"tenant_id": tenant, "runs": out})
}
