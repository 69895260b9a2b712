package runclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	json "github.com/go-json-experiment/json/v1"
)

// Definition sends one request of the definitions API (seed 002: agents,
// skills, triggers and tools under /agent/<kind>s) as tenantID: method on
// path with body (nil for none) and, when version is above 0, If-Match:
// version. It answers the response body. An error status is a
// *StatusError.
func (c *HTTP) Definition(ctx context.Context, tenantID, method, path string, body []byte, version int64) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("runclient: %w", err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if version > 0 {
		hreq.Header.Set("If-Match", strconv.Quote(strconv.FormatInt(version, 10)))
	}
	if tenantID != "" {
		hreq.Header.Set("X-Tenant-Id", tenantID)
	}
	resp, err := c.do(hreq, http.StatusOK, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("runclient: %s %s: read the answer: %w", method, path, err)
	}
	return b, nil
}
