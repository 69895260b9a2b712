package runclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentbus/agentbus/orch"
)

// ErrNoResult reports a stream that ended without the run's result.
var ErrNoResult = errors.New("runclient: the stream ended without the run's result")

// StatusError is a POST /agent/run the ingress answered with an error
// status: the status and the error body's code and message.
type StatusError struct {
	StatusCode int
	Code       string
	Message    string
}

// Error describes the refusal: status, code and message.
func (e *StatusError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("runclient: POST /agent/run: %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("runclient: POST /agent/run: %d %s: %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Code, e.Message)
}

// HTTP submits runs to the ingress's POST /agent/run and awaits their
// results: the HTTP transport of what Client does on NATS. The ingress
// assigns the run id, so a request's RunID is not sent.
type HTTP struct {
	url    string
	hc     *http.Client
	bearer string
}

// NewHTTP returns a client of the ingress at baseURL (http://host:port).
// hc carries the timeouts; nil uses http.DefaultClient.
func NewHTTP(baseURL string, hc *http.Client) *HTTP {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &HTTP{url: strings.TrimRight(baseURL, "/") + "/agent/run", hc: hc}
}

// WithCredential returns a copy of c that authenticates as the holder of
// credential (a tenant API key, a JWT or the service token), sent as a
// bearer token.
func (c *HTTP) WithCredential(credential string) *HTTP {
	cp := *c
	cp.bearer = credential
	return &cp
}

// Run posts req and returns the run's result from the synchronous answer.
// An error status is a *StatusError (the ingress's 504 run_timeout: the
// run goes on).
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
	return res.result(req), nil
}

// Stream posts req as a streamed run, calls onChunk with every chunk
// before the last (progress and answer chunks) and returns the run's
// result, which the last chunk carries.
func (c *HTTP) Stream(ctx context.Context, req orch.RunRequest, onChunk func(Chunk)) (orch.RunResult, error) {
	resp, err := c.post(ctx, req, true)
	if err != nil {
		return orch.RunResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ch Chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return orch.RunResult{}, fmt.Errorf("runclient: bad chunk: %w", err)
		}
		if !ch.EndOfDialog {
			onChunk(ch)
			continue
		}
		return lastChunk(req, ch)
	}
	if err := sc.Err(); err != nil {
		return orch.RunResult{}, fmt.Errorf("runclient: read the stream: %w", err)
	}
	return orch.RunResult{}, ErrNoResult
}

// lastChunk reads the result a stream ends with: the answer as JSON, or
// the reason there is none (the run timed out).
func lastChunk(req orch.RunRequest, ch Chunk) (orch.RunResult, error) {
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
		Message: req.Message, Stream: stream})
	if err != nil {
		return nil, fmt.Errorf("runclient: encode the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("runclient: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.bearer != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("runclient: POST /agent/run: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	serr := &StatusError{StatusCode: resp.StatusCode}
	var e APIError
	if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && json.Unmarshal(b, &e) == nil {
		serr.Code, serr.Message = e.Error.Code, e.Error.Message
	}
	return nil, serr
}
