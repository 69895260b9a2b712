package tools_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/tools"
)

// TestSecretsSealed: a secret is stored sealed (not in clear), opened
// only for its own tenant and tool and with its own key; without a key
// nothing is stored.
func TestSecretsSealed(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	if err := e.secrets.Put(ctx, "acme", "tool-1", hookSecret); err != nil {
		t.Fatal(err)
	}
	kv, _ := e.js.KeyValue(ctx, handlers.BucketToolSecrets)
	entry, err := kv.Get(ctx, "acme.tool-1")
	if err != nil || bytes.Contains(entry.Value(), []byte(hookSecret)) || len(entry.Value()) < len(hookSecret) {
		t.Fatalf("stored %q, %v", entry.Value(), err)
	}
	if got, err := e.secrets.Get(ctx, "acme", "tool-1"); err != nil || string(got) != hookSecret {
		t.Fatalf("opened %q, %v", got, err)
	}
	// Moved to another tool's key, it does not open.
	if _, err := kv.Put(ctx, "globex.tool-1", entry.Value()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.secrets.Get(ctx, "globex", "tool-1"); err == nil {
		t.Fatal("a secret moved to another tenant opens")
	}
	other := make([]byte, tools.KeyLen)
	_, _ = rand.Read(other)
	wrong, _ := tools.NewSecrets(kv, other)
	if _, err := wrong.Get(ctx, "acme", "tool-1"); err == nil {
		t.Fatal("a secret opens with another key")
	}
	if _, err := e.secrets.Get(ctx, "acme", "tool-2"); !errors.Is(err, tools.ErrSecretNotFound) {
		t.Fatalf("missing secret: %v", err)
	}
	if err := e.secrets.Delete(ctx, "acme", "tool-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.secrets.Get(ctx, "acme", "tool-1"); !errors.Is(err, tools.ErrSecretNotFound) {
		t.Fatalf("deleted secret: %v", err)
	}
	none, _ := tools.NewSecrets(kv, nil)
	if err := none.Put(ctx, "acme", "tool-3", hookSecret); !errors.Is(err, tools.ErrNoSecretsKey) || none.Ready() {
		t.Fatalf("keyless put: %v", err)
	}
	if _, err := tools.NewSecrets(kv, []byte("short")); err == nil {
		t.Fatal("a short key is accepted")
	}
}

// TestSecretsKeyFile: the all-in-one's key is created once with mode 0600
// and read back the same; ParseKey takes base64 of 32 bytes only.
func TestSecretsKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "secrets.key")
	k1, err := tools.LoadOrCreateKey(path)
	if err != nil || len(k1) != tools.KeyLen {
		t.Fatalf("created %d bytes, %v", len(k1), err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode(), err)
	}
	k2, err := tools.LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("reloaded another key: %v", err)
	}
	if k, err := tools.ParseKey(base64.RawURLEncoding.EncodeToString(k1)); err != nil || !bytes.Equal(k, k1) {
		t.Fatalf("url base64: %v", err)
	}
	if _, err := tools.ParseKey(base64.StdEncoding.EncodeToString(k1[:16])); err == nil {
		t.Fatal("a 16-byte key is accepted")
	}
}
