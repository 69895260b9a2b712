package app

import (
	"errors"
	"flag"
	"testing"
)

// TestIngressBindNeedsAuthentication: loopback binds may stay open for
// local development; any other bind needs an authentication mode.
func TestIngressBindNeedsAuthentication(t *testing.T) {
	cases := []struct {
		addr          string
		authenticated bool
		want          error
	}{
		{"127.0.0.1:8080", false, nil},
		{"[::1]:8080", false, nil},
		{"localhost:8080", false, nil},
		{"0.0.0.0:8080", false, ErrAuthRequired},
		{":8080", false, ErrAuthRequired},
		{"10.1.2.3:8080", false, ErrAuthRequired},
		{"0.0.0.0:8080", true, nil},
	}
	for _, c := range cases {
		if err := checkBind(c.addr, c.authenticated); !errors.Is(err, c.want) {
			t.Errorf("checkBind(%q, %v) = %v, want %v", c.addr, c.authenticated, err, c.want)
		}
	}
}

// TestIngressAuthFlags: the JWKS flag picks a file or a URL, and the
// HS256 secret comes from the environment only.
func TestIngressAuthFlags(t *testing.T) {
	for _, c := range []struct {
		args           []string
		secret         string
		file, url      string
		enabled, hs256 bool
	}{
		{args: nil},
		{args: []string{"--jwt-jwks", "/etc/agentbus/jwks.json"}, file: "/etc/agentbus/jwks.json", enabled: true},
		{args: []string{"--jwt-jwks", "https://idp.example/jwks"}, url: "https://idp.example/jwks", enabled: true},
		{secret: "0123456789abcdef0123456789abcdef", enabled: true, hs256: true},
	} {
		t.Setenv("INGRESS_JWT_HS256_SECRET", c.secret)
		var o IngressOptions
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		o.RegisterAuth(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		cfg, enabled := o.jwtConfig()
		if enabled != c.enabled || cfg.JWKSFile != c.file || cfg.JWKSURL != c.url || (len(cfg.HS256Secret) > 0) != c.hs256 {
			t.Errorf("%v (secret set: %v): jwks file %q url %q hs256 %v, enabled %v", c.args, c.secret != "", cfg.JWKSFile, cfg.JWKSURL, len(cfg.HS256Secret) > 0, enabled)
		}
	}
}
