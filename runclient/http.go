package runclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
)

// ErrNoResult reports a stream that ended without the run's result.
var ErrNoResult = errors.New("runclient: the stream ended without the run's result")

// StatusError is a request the ingress answered with an error status: the
// request, the status and the error body's code and message.
type StatusError struct {
	Request    string // "POST /agent/run"
	StatusCode int
	Code       string
	Message    string
}

// Error describes the refusal: request, status, code and message.
func (e *StatusError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("runclient: %s: %d %s", e.Request, e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("runclient: %s: %d %s: %s: %s", e.Request, e.StatusCode, http.StatusText(e.StatusCode), e.Code, e.Message)
}

// HTTP submits runs to the ingress's POST /agent/run and awaits their
// results, the HTTP transport of what Client does on NATS, and cancels
// runs (POST /agent/runs/{run_id}/cancel). The ingress assigns the run
// id, so a request's RunID is not sent.
type HTTP struct {
	base    string
	hc      *http.Client
	bearer  string
	started func(runID string)
}

// NewHTTP returns a client of the ingress at baseURL (http://host:port).
// hc carries the timeouts; nil uses http.DefaultClient.
func NewHTTP(baseURL string, hc *http.Client) *HTTP {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &HTTP{base: strings.TrimRight(baseURL, "/"), hc: hc}
}

// WithCredential returns a copy of c that authenticates as the holder of
// credential (a tenant API key, a JWT or the service token), sent as a
// bearer token.
func (c *HTTP) WithCredential(credential string) *HTTP {
	cp := *c
	cp.bearer = credential
	return &cp
}

// OnStart returns a copy of c whose Stream calls fn with the run id the
// ingress assigned, as soon as the run is accepted: the id Cancel takes.
func (c *HTTP) OnStart(fn func(runID string)) *HTTP {
	cp := *c
	cp.started = fn
	return &cp
}

// Cancel asks the ingress to cancel run runID of tenantID (sent as
// X-Tenant-Id; "" when the credential names the tenant). The run stops
// before its next hop and ends USER_CANCEL, unless it finishes first. An
// error status is a *StatusError: 404 not_found for a run the tenant does
// not have, 409 run_finished for a finished one.
func (c *HTTP) Cancel(ctx context.Context, tenantID, runID string) (CancelResponse, error) {
	path := "/agent/runs/" + url.PathEscape(runID) + "/cancel"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, nil)
	if err != nil {
		return CancelResponse{}, fmt.Errorf("runclient: %w", err)
	}
	if tenantID != "" {
		hreq.Header.Set("X-Tenant-Id", tenantID)
	}
	resp, err := c.do(hreq, http.StatusAccepted)
	if err != nil {
		return CancelResponse{}, err
	}
	defer resp.Body.Close()
	var res CancelResponse
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return CancelResponse{}, fmt.Errorf("runclient: POST %s: decode the answer: %w", path, err)
	}
	return res, nil
}

// Control posts to a run-control endpoint of run runID of tenantID
// (action "interrupt", "resume", "steer" or "approvals/<gate_id>") with
// body (nil for none). An error status is a *StatusError.
func (c *HTTP) Control(ctx context.Context, tenantID, runID, action string, body any) (ControlResponse, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return ControlResponse{}, fmt.Errorf("runclient: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	path := "/agent/runs/" + url.PathEscape(runID) + "/" + action
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, rd)
	if err != nil {
		return ControlResponse{}, fmt.Errorf("runclient: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if tenantID != "" {
		hreq.Header.Set("X-Tenant-Id", tenantID)
	}
	resp, err := c.do(hreq, http.StatusAccepted)
	if err != nil {
		return ControlResponse{}, err
	}
	defer resp.Body.Close()
	var res ControlResponse
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return ControlResponse{}, fmt.Errorf("runclient: POST %s: decode the answer: %w", path, err)
	}
	return res, nil
}

// Follow reads run runID's stream from its start (GET
// /agent/runs/{run_id}/stream), calling onChunk with every chunk, until
// the run ends (its result) or parks at a gate (its ParkedResult).
func (c *HTTP) Follow(ctx context.Context, tenantID, runID string, onChunk func(Chunk)) (orch.RunResult, error) {
	req := orch.RunRequest{RunID: runID, TenantID: tenantID}
	var last string
	for resumes := 0; ; resumes++ {
		resp, err := c.resume(ctx, tenantID, runID, last)
		if err != nil {
			return orch.RunResult{}, err
		}
		res, ended, err := readStream(req, resp.Body, func(ch Chunk) {
			if ch.MessageType == ChunkAwaitingGate {
				return // a gate already passed, or the one it parks at (the last chunk)
			}
			onChunk(ch)
		}, &last)
		resp.Body.Close()
		if ended || ctx.Err() != nil || resumes == maxResumes {
			return res, err
		}
	}
}

// Run posts req and returns the run's result from the synchronous answer
// (a run parked at a gate answers its ParkedResult). An error status is a
// *StatusError (the ingress's 504 run_timeout: the run goes on).
func (c *HTTP) Run(ctx context.Context, req orch.RunRequest) (orch.RunResult, error) {
	resp, err := c.post(ctx, req, false)
	if err != nil {
		return orch.RunResult{}, err
	}
	defer resp.Body.Close()
	var res Response
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return orch.RunResult{}, fmt.Errorf("runclient: POST /agent/run: decode the answer: %w", err)
	}
	out := res.result(req)
	if resp.StatusCode == http.StatusAccepted {
		out.TerminalCode = "" // parked: no code yet
	}
	return out, nil
}

// Stream posts req as a streamed run, calls onChunk with every chunk
// before the last (progress and answer chunks) and returns the run's
// result, which the last chunk carries. If the connection drops before
// the result, Stream resumes from the last chunk it had (GET
// /agent/runs/{run_id}/stream with Last-Event-ID), up to maxResumes
// times: no chunk is lost or repeated.
func (c *HTTP) Stream(ctx context.Context, req orch.RunRequest, onChunk func(Chunk)) (orch.RunResult, error) {
	resp, err := c.post(ctx, req, true)
	if err != nil {
		return orch.RunResult{}, err
	}
	runID := resp.Header.Get("X-Run-Id")
	if c.started != nil {
		c.started(runID)
	}
	var last string
	for resumes := 0; ; resumes++ {
		res, ended, err := readStream(req, resp.Body, onChunk, &last)
		resp.Body.Close()
		if res.RunID == "" {
			res.RunID, res.PlanID = runID, orch.PlanID(runID)
		}
		if ended || ctx.Err() != nil || runID == "" || resumes == maxResumes {
			return res, err
		}
		if resp, err = c.resume(ctx, req.TenantID, runID, last); err != nil {
			return orch.RunResult{}, err
		}
	}
}

// maxResumes bounds the reconnections of one Stream.
const maxResumes = 3

// readStream reads SSE chunks from body until the result chunk (ended),
// keeping the id of the last chunk read in last.
func readStream(req orch.RunRequest, body io.Reader, onChunk func(Chunk), last *string) (orch.RunResult, bool, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			*last = id
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ch Chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return orch.RunResult{}, true, fmt.Errorf("runclient: bad chunk: %w", err)
		}
		if !ch.EndOfDialog {
			onChunk(ch)
			continue
		}
		res, err := lastChunk(req, ch)
		return res, true, err
	}
	if err := sc.Err(); err != nil {
		return orch.RunResult{}, false, fmt.Errorf("runclient: read the stream: %w", err)
	}
	return orch.RunResult{}, false, ErrNoResult
}

// resume reopens a run's stream after the chunk with SSE id last.
func (c *HTTP) resume(ctx context.Context, tenantID, runID, last string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/agent/runs/"+url.PathEscape(runID)+"/stream", nil)
	if err != nil {
		return nil, fmt.Errorf("runclient: %w", err)
	}
	if tenantID != "" {
		hreq.Header.Set("X-Tenant-Id", tenantID)
	}
	if last != "" {
		hreq.Header.Set("Last-Event-ID", last)
	}
	return c.do(hreq, http.StatusOK)
}

// lastChunk reads the result a stream ends with: the answer as JSON, or
// the reason there is none (the run timed out).
func lastChunk(req orch.RunRequest, ch Chunk) (orch.RunResult, error) {
	if ch.MessageType == ChunkAwaitingGate {
		var g orch.GatePacket
		if err := json.Unmarshal([]byte(ch.Content), &g); err != nil {
			return orch.RunResult{}, fmt.Errorf("runclient: bad gate chunk: %w", err)
		}
		status := orch.PlanAwaitingGate
		if g.Kind == orch.GateInterrupt {
			status = orch.PlanPaused
		}
		return ParkedResult(orch.RunParked{RunID: req.RunID, TenantID: req.TenantID, SessionID: req.SessionID,
			PlanID: orch.PlanID(req.RunID), Status: status, Gate: g}), nil
	}
	if ch.MessageType == "error" && !strings.HasPrefix(ch.Content, "{") {
		return orch.RunResult{}, fmt.Errorf("runclient: %s", ch.Content)
	}
	var res Response
	if err := json.Unmarshal([]byte(ch.Content), &res); err != nil {
		return orch.RunResult{}, fmt.Errorf("runclient: bad result chunk: %w", err)
	}
	return res.result(req), nil
}

// post sends the request; any status but 200 OK is a *StatusError.
func (c *HTTP) post(ctx context.Context, req orch.RunRequest, stream bool) (*http.Response, error) {
	body, err := json.Marshal(Request{TenantID: req.TenantID, UserID: req.UserID, SessionID: req.SessionID,
		Message: req.Message, Stream: stream, Budget: req.Budget, AgentID: req.AgentID})
	if err != nil {
		return nil, fmt.Errorf("runclient: encode the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/agent/run", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("runclient: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if stream {
		return c.do(hreq, http.StatusOK)
	}
	return c.do(hreq, http.StatusOK, http.StatusAccepted)
}

// do sends hreq with the credential; any status but ok is a *StatusError.
func (c *HTTP) do(hreq *http.Request, ok ...int) (*http.Response, error) {
	what := hreq.Method + " " + hreq.URL.Path
	if c.bearer != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("runclient: %s: %w", what, err)
	}
	if slices.Contains(ok, resp.StatusCode) {
		return resp, nil
	}
	defer resp.Body.Close()
	serr := &StatusError{Request: what, StatusCode: resp.StatusCode}
	var e APIError
	if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && json.Unmarshal(b, &e) == nil {
		serr.Code, serr.Message = e.Error.Code, e.Error.Message
	}
	return nil, serr
}
