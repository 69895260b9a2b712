package demo

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/skills"
)

// TestSSESessionBoundToTenant: a message for an SSE session opened on
// one tenant's path is refused on another tenant's path.
func TestSSESessionBoundToTenant(t *testing.T) {
	srv := newTestEnv(t, Config{}, skills.Config{}, nil).srv
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/tenants/acme/sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var endpoint string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = strings.TrimSpace(data)
			break
		}
	}
	if !strings.HasPrefix(endpoint, "/tenants/acme/message?sessionId=acme.") {
		t.Fatalf("endpoint event = %q", endpoint)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for path, want := range map[string]int{
		strings.Replace(endpoint, "/tenants/acme/", "/tenants/beta/", 1): http.StatusNotFound,
		endpoint: http.StatusAccepted,
	} {
		r, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		if r.StatusCode != want {
			t.Fatalf("POST %s: status %d, want %d", path, r.StatusCode, want)
		}
	}
}
