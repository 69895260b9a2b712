package egress_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/egress/egresstest"
)

func get(t *testing.T, p *egress.Policy, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: p.Transport(nil)}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return nil
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

// TestDialRefusesBeforeConnecting: a connection to a refused address,
// given as an address or as a name that resolves to it, is refused
// before the socket connects (the listener accepts none); with the
// address or the name allow-listed it goes through.
func TestDialRefusesBeforeConnecting(t *testing.T) {
	srv := egresstest.NewServer(t, ok)
	for _, url := range []string{srv.URL, "http://localhost:" + srv.Port() + "/"} {
		err := get(t, egress.Default(), url)
		d, denied := egress.Denied(err)
		if !errors.Is(err, egress.ErrDenied) || !denied || d.Range != "loopback" || !strings.Contains(err.Error(), "egress_denied") {
			t.Fatalf("GET %s under the default policy: %v", url, err)
		}
		if strings.Contains(url, "localhost") && d.Host != "localhost" {
			t.Fatalf("the refusal names %q", d.Host)
		}
	}
	if n := srv.Accepted(); n != 0 {
		t.Fatalf("%d connections reached the refused address", n)
	}
	if err := get(t, egress.MustNew("127.0.0.0/8"), "http://localhost:"+srv.Port()+"/"); err != nil {
		t.Fatalf("allow-listed address: %v", err)
	}
	if err := get(t, egress.MustNew("localhost"), "http://localhost:"+srv.Port()+"/"); err != nil {
		t.Fatalf("allow-listed name: %v", err)
	}
	if n := srv.Accepted(); n != 2 {
		t.Fatalf("%d connections accepted, want 2", n)
	}
}

// TestDialRefusesRedirect: a redirect from an allowed host to a refused
// address is refused when it is dialled.
func TestDialRefusesRedirect(t *testing.T) {
	inner := egresstest.NewServer(t, ok)
	front := egresstest.NewServer(t, http.RedirectHandler(inner.URL+"/metadata", http.StatusFound))
	err := get(t, egress.MustNew("localhost"), "http://localhost:"+front.Port()+"/")
	if !errors.Is(err, egress.ErrDenied) {
		t.Fatalf("redirect to %s: %v", inner.URL, err)
	}
	if front.Accepted() != 1 || inner.Accepted() != 0 {
		t.Fatalf("accepted: front %d, inner %d", front.Accepted(), inner.Accepted())
	}
}

// TestCheckURL: a URL whose host is, or resolves only to, a refused
// address is refused when it is written; an allowed one, a public one
// and a name that does not resolve now pass.
func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"https://169.254.169.254/latest/meta-data/", "https://10.0.0.1/hook", "https://127.0.0.1:8443/hook",
		"https://[::1]/hook", "https://[::ffff:127.0.0.1]/hook", "https://[fe80::1]/hook", "https://0.0.0.0/", "https://[::]/",
		"https://100.64.0.1/", "https://224.0.0.1/", "https://localhost:9/hook"} {
		if err := egress.Default().CheckURL(ctx, url); !errors.Is(err, egress.ErrDenied) {
			t.Errorf("CheckURL(%s) = %v", url, err)
		}
	}
	for _, url := range []string{"https://93.184.216.34/hook", "https://[2606:4700:4700::1111]/", "https://hooks.example.invalid/x"} {
		if err := egress.Default().CheckURL(ctx, url); err != nil {
			t.Errorf("CheckURL(%s) = %v", url, err)
		}
	}
	allowed := egress.MustNew("127.0.0.1", "10.0.0.0/8", "localhost")
	for _, url := range []string{"https://127.0.0.1:8443/hook", "https://10.0.0.1/hook", "https://localhost:9/hook"} {
		if err := allowed.CheckURL(ctx, url); err != nil {
			t.Errorf("allow-listed CheckURL(%s) = %v", url, err)
		}
	}
	if err := egress.Default().CheckURL(ctx, "not a url"); err == nil || errors.Is(err, egress.ErrDenied) {
		t.Errorf("CheckURL of no URL: %v", err)
	}
}
