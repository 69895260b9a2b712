package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The per-tenant OAuth credentials file: each tenant's client (a secret,
// or a key file for private_key_jwt), "*" for the others; a malformed
// file is refused without quoting its secrets.
func TestOAuthFile_CredentialsPerTenant(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "acme.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "creds.json")
	if err := os.WriteFile(good, []byte(`{"acme": {"client_id": "acme-client", "private_key_file": "`+key+`", "scopes": ["skills:call"]},
		"*": {"client_id": "shared", "client_secret": "shh-secret"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := oauthFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if a := got["acme"]; a == nil || a.ClientID != "acme-client" || !strings.Contains(string(a.PrivateKeyPEM), "PRIVATE KEY") ||
		len(a.Scopes) != 1 || got["*"].ClientSecret != "shh-secret" {
		t.Fatalf("credentials %+v", got)
	}
	c := &Config{SkillTransport: "streamable-http", SkillServiceURL: "http://127.0.0.1:7070/tenants/{tenant}/mcp", SkillOAuthFile: good}
	sc, err := c.SkillsConfig()
	if err != nil || len(sc.OAuthByTenant) != 2 {
		t.Fatalf("SkillsConfig: %d tenants, %v", len(sc.OAuthByTenant), err)
	}
	for name, body := range map[string]string{
		"not a tenant":  `{"bad tenant!": {"client_id": "x", "client_secret": "shh-secret"}}`,
		"unknown field": `{"acme": {"client_id": "x", "secret": "shh-secret"}}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := oauthFile(p); err == nil || strings.Contains(err.Error(), "shh-secret") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
