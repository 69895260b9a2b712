package handlerstest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"
)

// DefResponse is one answer of the definitions API.
type DefResponse struct {
	Status int
	Etag   string
	Body   map[string]any
}

// Call sends one request as tenant with extra headers ("" values are not
// sent) and decodes the JSON answer.
func Call(t *testing.T, srv *httptest.Server, tenant, method, path, body string, headers ...string) DefResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(Ctx(t), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", tenant)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := DefResponse{Status: resp.StatusCode, Etag: resp.Header.Get("ETag")}
	if err := json.Unmarshal(raw, &out.Body); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	return out
}

// Want fails unless the answer has status and, for an error, code (and,
// for a validation error, field).
func (r DefResponse) Want(t *testing.T, what string, status int, code ...string) DefResponse {
	t.Helper()
	errObj, _ := r.Body["error"].(map[string]any)
	switch {
	case r.Status != status:
		t.Fatalf("%s: status %d, want %d (%v)", what, r.Status, status, r.Body)
	case len(code) == 0 && errObj != nil:
		t.Fatalf("%s: unexpected error %v", what, errObj)
	case len(code) > 0 && (errObj == nil || errObj["code"] != code[0] || errObj["message"] == ""):
		t.Fatalf("%s: error %v, want code %s", what, r.Body, code[0])
	case len(code) > 1 && errObj["field"] != code[1]:
		t.Fatalf("%s: error on field %v, want %s", what, errObj["field"], code[1])
	}
	return r
}

// Str is the string field key of the body.
func (r DefResponse) Str(key string) string { s, _ := r.Body[key].(string); return s }

// Version is the body's version.
func (r DefResponse) Version() int64 { f, _ := r.Body["version"].(float64); return int64(f) }
