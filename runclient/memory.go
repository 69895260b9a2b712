package runclient

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// MemoryFact is the body of POST /agent/memory: a fact the tenant (scope
// tenant) or one of its users (scope user, UserID) wants later runs to
// recall, under its label.
type MemoryFact struct {
	Scope  string `json:"scope"` // user | tenant
	UserID string `json:"user_id,omitempty"`
	Label  string `json:"label"`
	Text   string `json:"text"`
}

// Remembered is the answer of POST /agent/memory: the fact's key, and
// when it expires (its scope's retention).
type Remembered struct {
	Key    string    `json:"key"`
	Scope  string    `json:"scope"`
	UserID string    `json:"user_id,omitempty"`
	TTLAt  time.Time `json:"ttl_at,omitzero"`
}

// MemoryHit is one result of GET /agent/memory/query.
type MemoryHit struct {
	Key       string  `json:"key"`
	Scope     string  `json:"scope"`
	UserID    string  `json:"user_id,omitempty"`
	SessionID string  `json:"session_id,omitempty"`
	Text      string  `json:"text"`
	Score     float32 `json:"score"`
	// TTLAt is when the memory expires (its scope's retention).
	TTLAt time.Time `json:"ttl_at,omitzero"`
}

// MemoryQuery is what GET /agent/memory/query searches: the memories of
// a scope (session, user or tenant; empty: every scope the caller may
// read) of a user most similar to Text, at most TopK (0: the server's
// default).
type MemoryQuery struct {
	UserID string
	Scope  string
	Text   string
	TopK   int
}

// Remember posts f to tenantID's memory. An error status is a
// *StatusError.
func (c *HTTP) Remember(ctx context.Context, tenantID string, f MemoryFact) (Remembered, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return Remembered{}, fmt.Errorf("runclient: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/agent/memory", bytes.NewReader(b))
	if err != nil {
		return Remembered{}, fmt.Errorf("runclient: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	var out Remembered
	return out, c.memoryCall(hreq, tenantID, &out)
}

// Recall runs q on tenantID's memory, best hit first. An error status is
// a *StatusError.
func (c *HTTP) Recall(ctx context.Context, tenantID string, q MemoryQuery) ([]MemoryHit, error) {
	v := url.Values{"query_text": {q.Text}}
	for name, val := range map[string]string{"user_id": q.UserID, "scope": q.Scope} {
		if val != "" {
			v.Set(name, val)
		}
	}
	if q.TopK > 0 {
		v.Set("top_k", strconv.Itoa(q.TopK))
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/agent/memory/query?"+v.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("runclient: %w", err)
	}
	var out struct {
		Hits []MemoryHit `json:"hits"`
	}
	return out.Hits, c.memoryCall(hreq, tenantID, &out)
}

// memoryCall sends a memory request as tenantID and decodes its answer.
func (c *HTTP) memoryCall(hreq *http.Request, tenantID string, out any) error {
	if tenantID != "" {
		hreq.Header.Set("X-Tenant-Id", tenantID)
	}
	resp, err := c.do(hreq, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("runclient: %s %s: decode the answer: %w", hreq.Method, hreq.URL.Path, err)
	}
	return nil
}
