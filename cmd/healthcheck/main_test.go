package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestCheck: a 2xx answer passes; another status, a server that is not
// there and one slower than the timeout fail.
func TestCheck(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if err := check(srv.URL+"/ok", time.Second); err != nil {
		t.Errorf("/ok: %v", err)
	}
	for _, path := range []string{"/down", "/slow"} {
		if err := check(srv.URL+path, 200*time.Millisecond); err == nil {
			t.Errorf("%s passed", path)
		}
	}
	dead := httptest.NewServer(mux)
	dead.Close()
	if err := check(dead.URL+"/ok", time.Second); err == nil {
		t.Error("a closed server passed")
	}
}
