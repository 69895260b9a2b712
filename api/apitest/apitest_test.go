package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/api/apitest"
)

// TestDocumentIsOpenAPI31: the served document loads and validates as
// OpenAPI 3.1 (kin-openapi's validation, JSON Schema 2020-12 schemas).
func TestDocumentIsOpenAPI31(t *testing.T) {
	c, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Doc.OpenAPI != "3.1.0" || c.Doc.Paths.Len() == 0 {
		t.Fatalf("openapi %q with %d paths", c.Doc.OpenAPI, c.Doc.Paths.Len())
	}
}

// TestInvalidDocumentIsRefused: the validator is not a rubber stamp.
func TestInvalidDocumentIsRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"3.0":           `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{}}`,
		"no info":       `{"openapi":"3.1.0","paths":{}}`,
		"dangling ref":  `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"description":"x","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Nope"}}}}}}}}}`,
		"bad parameter": `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"paths":{"/a/{id}":{"get":{"responses":{"200":{"description":"x"}}}}}}`,
	} {
		if _, err := apitest.LoadDocument([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// fakeTB records what Wrap reports.
type fakeTB struct {
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (f *fakeTB) Cleanup(fn func())                 { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// exchange serves one request with answer behind Wrap and returns what
// the test would have been failed with.
func exchange(t *testing.T, method, path, body string, answer func(w http.ResponseWriter)) []string {
	t.Helper()
	tb := &fakeTB{}
	srv := httptest.NewServer(apitest.Wrap(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		answer(w)
	})))
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-Id", "acme")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	srv.Close()
	tb.end()
	return tb.errs
}

func answerJSON(status int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// TestDriftFails: an answer that drifts from the document fails the test
// that got it, and one that keeps to it does not.
func TestDriftFails(t *testing.T) {
	const cancel = "/agent/runs/r1/cancel"
	cases := []struct {
		name, method, path, body string
		answer                   func(w http.ResponseWriter)
		drift                    string // "" keeps to the document
	}{
		{"documented", "POST", cancel, "", answerJSON(202, `{"run_id":"r1","plan_id":"p1","status":"cancelling"}`), ""},
		{"field of another type", "POST", cancel, "", answerJSON(202, `{"run_id":1,"plan_id":"p1","status":"cancelling"}`), "run_id"},
		{"field missing", "POST", cancel, "", answerJSON(202, `{"run_id":"r1","status":"cancelling"}`), "plan_id"},
		{"undocumented status", "POST", cancel, "", answerJSON(201, `{"run_id":"r1","plan_id":"p1","status":"cancelling"}`), "201"},
		{"documented error", "POST", cancel, "", answerJSON(409, `{"error":{"code":"run_finished","message":"done"}}`), ""},
		{"common error", "POST", cancel, "", answerJSON(401, `{"error":{"code":"unauthorized","message":"no"}}`), ""},
		{"undocumented error code", "POST", cancel, "", answerJSON(409, `{"error":{"code":"gate_decided","message":"x"}}`), "gate_decided"},
		{"error without message", "POST", cancel, "", answerJSON(409, `{"error":{"code":"run_finished"}}`), "doesn't match"},
		{"request the document refuses, accepted", "POST", "/agent/runs/r1/steer", `{"message":"hi","extra":1}`,
			answerJSON(202, `{"run_id":"r1","plan_id":"p1","status":"steered"}`), "refuses the request"},
		{"request the document refuses, refused", "POST", "/agent/runs/r1/steer", `{"message":"hi","extra":1}`,
			answerJSON(400, `{"error":{"code":"unknown_field","message":"extra"}}`), ""},
		{"undocumented route", "GET", "/agent/nowhere", "", answerJSON(200, `{}`), "undocumented route"},
		{"unrouted path answered 404", "GET", "/agent/nowhere", "", answerJSON(404, `{"error":{"code":"not_found","message":"no route"}}`), ""},
		{"stream chunk drifted", "GET", "/agent/runs/r1/stream", "", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 1\nevent: chunk\ndata: {\"message_id\":\"m\",\"session_id\":\"s\",\"message_type\":\"answer\",\"content\":7,\"end_of_message\":true,\"end_of_dialog\":true}\n\n")
		}, "content"},
		{"stream chunk documented", "GET", "/agent/runs/r1/stream", "", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 1\nevent: chunk\ndata: {\"message_id\":\"m\",\"session_id\":\"s\",\"message_type\":\"answer\",\"content\":\"hi\",\"end_of_message\":true,\"end_of_dialog\":true}\n\n")
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := exchange(t, tc.method, tc.path, tc.body, tc.answer)
			switch {
			case tc.drift == "" && len(errs) > 0:
				t.Fatalf("failed a test that kept to the document: %v", errs)
			case tc.drift != "" && len(errs) == 0:
				t.Fatal("a drifted exchange passed")
			case tc.drift != "" && !strings.Contains(strings.Join(errs, "\n"), tc.drift):
				t.Fatalf("failure %v does not name %q", errs, tc.drift)
			}
		})
	}
}
