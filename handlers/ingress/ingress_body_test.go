package ingress_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
)

// TestIngressBodyTimeout: a client that sends its headers and then
// trickles, or stops sending, the body it announced gets 408
// body_timeout once BodyTimeout has passed, on every route that reads a
// body, instead of holding the handler.
func TestIngressBodyTimeout(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{BodyTimeout: 200 * time.Millisecond})
	for _, path := range []string{"PUT /agent/souls/" + handlerstest.Tenant, "POST /agent/run"} {
		method, target, _ := strings.Cut(path, " ")
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Half the announced body; the client gives up on the answer
		// long after the timeout.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, method+" "+target+" HTTP/1.1\r\nHost: ingress\r\nX-Tenant-Id: "+handlerstest.Tenant+
			"\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"tenant_id\":"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || body.Error.Code != "body_timeout" {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body.Error.Code)
		}
	}
}

// TestIngressBodyDeadlineLifted: once the body is decoded (what follows
// its JSON value read too), its deadline no longer applies to the
// connection, so a handler that answers (or streams) for longer than
// BodyTimeout keeps its request's context.
func TestIngressBodyDeadlineLifted(t *testing.T) {
	g := ingress.NewIngress(handlerstest.NewEnv(t).JS, nil, handlerstest.NopLog, ingress.IngressConfig{BodyTimeout: 100 * time.Millisecond})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := g.Body(w, r)
		var v map[string]any
		err := json.NewDecoder(in).Decode(&v)
		in.Done()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		case <-time.After(time.Second):
			_, _ = io.WriteString(w, "kept")
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{}`+"\n\n"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != "kept" {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
}
