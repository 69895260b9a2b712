package tools

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/skills"
)

// MaxResponseBytes caps a webhook's answer: a longer one is refused with
// a tool error the model sees.
const MaxResponseBytes = 1 << 20

// WebhookRequest is the JSON body a webhook tool receives.
type WebhookRequest struct {
	Tool   string `json:"tool"`
	ToolID string `json:"tool_id"`
	CallID string `json:"call_id"`
	// Attempt counts the deliveries of the call from 1: a retry is a new
	// signed request (a receiver's replay guard accepts it) with the same
	// call_id and Idempotency-Key, by which the receiver dedupes.
	Attempt   int             `json:"attempt"`
	TenantID  string          `json:"tenant_id"`
	RunID     string          `json:"run_id,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Arguments json.RawMessage `json:"arguments"`
}

// Webhooks calls tenants' webhook tools: a signed HTTPS POST per attempt,
// each bounded by the tool's timeout, retried with doubling backoff only
// when the tool is idempotent (network errors, 429 and 5xx answers,
// timeouts), with the same Idempotency-Key every time. Answers are read
// up to MaxResponseBytes. What it logs is redacted (Redact). Every
// connection is dialled through the egress policy: a refused address
// fails the call with an egress.ErrDenied, never retried.
type Webhooks struct {
	Secrets *Secrets
	// Egress is the policy every call's connection is checked against
	// when it is dialled; nil is egress.Default() (no allow-list).
	Egress *egress.Policy
	// RootCAs are the certificate authorities the calls trust; nil
	// trusts the system's. Tests name their server's.
	RootCAs *x509.CertPool
	Log     zerolog.Logger
	// Now is the clock of the timestamps; default time.Now.
	Now func() time.Time

	once   sync.Once
	client *http.Client
	// wrap, set by tests, wraps the client's transport.
	wrap func(http.RoundTripper) http.RoundTripper
}

// httpClient is the client of the calls, made once: TLS 1.2 at least,
// dialled through Egress, following no redirect (a redirect would carry
// a signed body elsewhere).
func (w *Webhooks) httpClient() *http.Client {
	w.once.Do(func() {
		tr := w.Egress.Transport(nil)
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: w.RootCAs}
		var rt http.RoundTripper = tr
		if w.wrap != nil {
			rt = w.wrap(rt)
		}
		w.client = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	})
	return w.client
}

// attemptError is a failed attempt: retryable or not, and whether it
// timed out.
type attemptError struct {
	err       error
	retryable bool
	timedOut  bool
}

// Call calls tool t for tenant with args; key is the call's idempotency
// key. A 2xx answer that is a JSON object is the result; another 2xx
// answer is {"text": answer}. A timeout (of every attempt) is
// skills.ErrTimeout; any other failure a skills.ErrSkillFailed the model
// sees.
func (w *Webhooks) Call(ctx context.Context, tenant string, t agents.Tool, args json.RawMessage, key string) ([]byte, error) {
	secret, err := w.Secrets.Get(ctx, tenant, t.ToolID)
	if err != nil {
		return nil, fmt.Errorf("%w: %s cannot be called: %v", skills.ErrSkillFailed, t.Name, err)
	}
	info := skills.CallInfoFrom(ctx)
	req := WebhookRequest{Tool: t.Name, ToolID: t.ToolID, CallID: key, TenantID: tenant,
		RunID: info.RunID, SessionID: info.SessionID, Arguments: args}
	log := w.Log.With().Str("tool", t.Name).Str("tool_id", t.ToolID).Str("tenant_id", tenant).
		Str("run_id", info.RunID).Str("call_id", key).Logger()
	attempts := 1 + t.Handler.Retries()
	backoff := t.Handler.Backoff()
	var last *attemptError
	for n := 1; n <= attempts; n++ {
		req.Attempt = n
		body, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", skills.ErrInvalidArguments, err)
		}
		start := time.Now()
		result, aerr := w.attempt(ctx, t, secret, body, key)
		ev := log.Debug()
		if aerr != nil {
			ev = log.Warn().Str("error", Redact(aerr.err.Error()))
		}
		ev.Int("attempt", n).Int64("duration_ms", time.Since(start).Milliseconds()).
			Str("arguments", Redact(string(args))).Msg("webhook tool call")
		if aerr == nil {
			return result, nil
		}
		last = aerr
		if !aerr.retryable || n == attempts || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, agents.MaxToolBackoff)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tools: %s: %w", t.Name, err)
	}
	if last.timedOut {
		return nil, fmt.Errorf("%w: webhook tool %s did not answer within %s", skills.ErrTimeout, t.Name, t.Handler.Timeout())
	}
	return nil, last.err
}

// attempt makes one signed request.
func (w *Webhooks) attempt(ctx context.Context, t agents.Tool, secret, body []byte, key string) ([]byte, *attemptError) {
	actx, cancel := context.WithTimeout(ctx, t.Handler.Timeout())
	defer cancel()
	timedOut := func(err error) *attemptError {
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return &attemptError{err: err, retryable: true, timedOut: true}
		}
		return nil
	}
	req, err := http.NewRequestWithContext(actx, http.MethodPost, t.Handler.URL, bytes.NewReader(body))
	if err != nil {
		return nil, &attemptError{err: fmt.Errorf("%w: %s: %v", skills.ErrSkillFailed, t.Name, err)}
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ts := now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentbus-webhook/1")
	req.Header.Set(agents.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(agents.HeaderWebhookSignature, agents.SignWebhook(secret, ts, body))
	req.Header.Set(agents.HeaderIdempotencyKey, key)
	resp, err := w.httpClient().Do(req)
	if err != nil {
		if d, ok := egress.Denied(err); ok {
			return nil, &attemptError{err: fmt.Errorf("%w: webhook tool %s: %w", skills.ErrSkillFailed, t.Name, d)}
		}
		if te := timedOut(err); te != nil {
			return nil, te
		}
		return nil, &attemptError{err: fmt.Errorf("%w: webhook tool %s unreachable: %v", skills.ErrSkillFailed, t.Name, errors.Unwrap(err)),
			retryable: true}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		if te := timedOut(err); te != nil {
			return nil, te
		}
		return nil, &attemptError{err: fmt.Errorf("%w: webhook tool %s: reading the answer: %v", skills.ErrSkillFailed, t.Name, err),
			retryable: true}
	}
	// The timeout is the tool's contract: an answer whose reading ended
	// after it (one the transport had in hand as it hung up) is a
	// timeout too, so a call's outcome never rests on that race.
	if te := timedOut(context.DeadlineExceeded); te != nil {
		return nil, te
	}
	if len(data) > MaxResponseBytes {
		return nil, &attemptError{err: fmt.Errorf("%w: tool_response_too_large: webhook tool %s answered more than %d bytes; the answer was refused",
			skills.ErrResultTooLarge, t.Name, MaxResponseBytes)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return nil, &attemptError{err: fmt.Errorf("%w: webhook tool %s answered HTTP %d: %s", skills.ErrSkillFailed, t.Name,
			resp.StatusCode, excerpt(data)), retryable: retry}
	}
	return resultOf(data), nil
}

// resultOf is a webhook's answer as a skill result: a JSON object as is,
// anything else as {"text": answer}.
func resultOf(data []byte) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) == nil && obj != nil {
		return data
	}
	out, _ := json.Marshal(map[string]string{"text": string(bytes.ToValidUTF8(data, []byte("\uFFFD")))})
	return out
}

// excerpt is the start of an error answer, as the model sees it.
func excerpt(data []byte) string {
	const limit = 300
	if len(data) > limit {
		data = data[:limit]
	}
	return string(bytes.ToValidUTF8(data, []byte("\uFFFD")))
}
