package ingress_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/skills"
)

// TestIngressServesArtifactsToTheirTenant: GET /agent/artifacts/{sha256}
// answers the data an attachment reference names, with its Content-Type,
// to the tenant that holds it; another tenant (which may hold other
// content) and an unknown or malformed digest get 404, and a request
// without a tenant 400.
func TestIngressServesArtifactsToTheirTenant(t *testing.T) {
	env := handlerstest.NewEnv(t)
	ctx := handlerstest.Ctx(t)
	store, err := handlers.NewAttachments(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("\x89PNG\r\n\x1a\n a tiny chart")
	ref, err := store.Put(ctx, handlerstest.Tenant, skills.Attachment{Kind: "image", MimeType: "image/png"}, data)
	if err != nil {
		t.Fatal(err)
	}
	digest := ref[strings.LastIndex(ref, "/")+1:]
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Artifacts: store})
	get := func(tenant, digest string) (int, string, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/agent/artifacts/"+digest, nil)
		if tenant != "" {
			req.Header.Set("X-Tenant-Id", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}
	if code, typ, body := get(handlerstest.Tenant, digest); code != http.StatusOK || typ != "image/png" || !bytes.Equal(body, data) {
		t.Fatalf("owner: %d %s %q", code, typ, body)
	}
	for name, c := range map[string]struct{ tenant, digest string }{
		"another tenant": {"gamma", digest}, "unknown": {handlerstest.Tenant, strings.Repeat("0", 64)},
		"malformed": {handlerstest.Tenant, "..%2Fgamma%2F" + digest},
	} {
		if code, _, body := get(c.tenant, c.digest); code != http.StatusNotFound || !strings.Contains(string(body), `"not_found"`) {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	if code, _, _ := get("", digest); code != http.StatusBadRequest {
		t.Errorf("no tenant: %d", code)
	}
}
