package handlerstest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/api/apitest"
	"github.com/agentbus/agentbus/handlers/ingress"
)

// NewIngressServer serves an ingress on env until the test ends. Every
// request and answer is held to api/openapi.yaml: one that drifts fails t.
func NewIngressServer(t testing.TB, env *Env, cfg ingress.IngressConfig) *httptest.Server {
	t.Helper()
	g := ingress.NewIngress(env.JS, env.Store, NopLog, cfg)
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(g.Stop)
	srv := httptest.NewServer(apitest.Wrap(t, g.Handler()))
	t.Cleanup(srv.Close)
	return srv
}

// HTTPCase is one request to the ingress and the answer it must get.
type HTTPCase struct {
	Name       string
	Method     string
	Path       string
	Body       string
	Headers    map[string]string
	WantStatus int
	WantCode   string // error code; "" for a success body
}

// DoRequest sends tc and returns the status and the JSON body.
func DoRequest(t *testing.T, srv *httptest.Server, tc HTTPCase) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(Ctx(t), tc.Method, srv.URL+tc.Path, strings.NewReader(tc.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tc.Headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", tc.Method, tc.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json (body %s)", ct, b)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, b)
	}
	return resp.StatusCode, body
}

// CheckHTTP sends tc and checks its status and error code; it returns
// the body.
func CheckHTTP(t *testing.T, srv *httptest.Server, tc HTTPCase) map[string]any {
	t.Helper()
	status, body := DoRequest(t, srv, tc)
	if status != tc.WantStatus {
		t.Errorf("status = %d, want %d (body %v)", status, tc.WantStatus, body)
	}
	errObj, _ := body["error"].(map[string]any)
	if tc.WantCode == "" {
		if errObj != nil {
			t.Errorf("unexpected error body %v", body)
		}
		return body
	}
	if errObj == nil || errObj["code"] != tc.WantCode {
		t.Errorf("error = %v, want code %q", body, tc.WantCode)
	} else if msg, _ := errObj["message"].(string); msg == "" {
		t.Errorf("error %v has no message", errObj)
	}
	return body
}

// AsTenant names the tenant of a read.
func AsTenant(tenant string) map[string]string { return map[string]string{"X-Tenant-Id": tenant} }
