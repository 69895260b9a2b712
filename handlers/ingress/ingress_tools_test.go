package ingress_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/agents"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/egress/egresstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tools"
)

const testToolSecret = "whsec-0123456789abcdef-PLAINTEXT"

// toolSecrets returns a secret store on env's bucket with a fresh key;
// without a key when keyed is false.
func toolSecrets(t *testing.T, env *handlerstest.Env, keyed bool) *tools.Secrets {
	t.Helper()
	kv, err := env.JS.KeyValue(handlerstest.Ctx(t), handlers.BucketToolSecrets)
	if err != nil {
		t.Fatal(err)
	}
	var key []byte
	if keyed {
		key = make([]byte, tools.KeyLen)
		_, _ = rand.Read(key)
	}
	s, err := tools.NewSecrets(kv, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func toolBody(name, extra string) string {
	return `{"name":"` + name + `","description":"Look up an order by id.","parameters":{"type":"object",` +
		`"properties":{"order_id":{"type":"string"}},"required":["order_id"]},` +
		`"handler":{"type":"webhook","url":"https://hooks.example.com/orders"` + extra + `}`
}

// TestIngressToolsCRUD: a webhook tool is created with its secret,
// listed with the system tools, read, replaced with optimistic
// concurrency and deleted; each validation rule answers its code; the
// system tools are read only; another tenant's tool is not found.
func TestIngressToolsCRUD(t *testing.T) {
	env := handlerstest.NewEnv(t)
	secrets := toolSecrets(t, env, true)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{ToolSecrets: secrets})
	const tenant = "acme"
	created := handlerstest.Call(t, srv, tenant, "POST", "/agent/tools", toolBody("lookup_order", `,"idempotent":true},"secret":"`+testToolSecret+`"`)).
		Want(t, "create", http.StatusCreated)
	id := created.Str("tool_id")
	h, _ := created.Body["handler"].(map[string]any)
	if !strings.HasPrefix(id, "tool-") || created.Version() != 1 || created.Etag != `"1"` || created.Str("type") != agents.ToolTypeCustom ||
		created.Str("status") != agents.StatusActive || h["timeout_ms"] != float64(10000) || h["max_retries"] != float64(2) ||
		h["backoff_ms"] != float64(200) {
		t.Fatalf("created %v", created.Body)
	}
	if _, ok := created.Body["secret"]; ok {
		t.Fatalf("the secret is answered: %v", created.Body)
	}
	if got, err := secrets.Get(handlerstest.Ctx(t), tenant, id); err != nil || string(got) != testToolSecret {
		t.Fatalf("stored secret %q, %v", got, err)
	}

	for _, c := range []struct{ name, body, code, field string }{
		{"no name", toolBody("", `},"secret":"`+testToolSecret+`"`), agents.CodeNameRequired, "name"},
		{"bad name", toolBody("look up", `},"secret":"`+testToolSecret+`"`), agents.CodeInvalidToolName, "name"},
		{"system name", toolBody("send_message", `},"secret":"`+testToolSecret+`"`), agents.CodeReservedToolName, "name"},
		{"no description", `{"name":"x","parameters":{"type":"object"},"handler":{"url":"https://h.example.com"},"secret":"` + testToolSecret + `"}`,
			agents.CodeDescriptionRequired, "description"},
		{"no parameters", `{"name":"x","description":"d","handler":{"url":"https://h.example.com"},"secret":"` + testToolSecret + `"}`,
			agents.CodeInvalidParameters, "parameters"},
		{"parameters not an object schema", `{"name":"x","description":"d","parameters":{"type":"string"},"handler":{"url":"https://h.example.com"}}`,
			agents.CodeInvalidParameters, "parameters.type"},
		{"parameters not a schema", `{"name":"x","description":"d","parameters":{"type":"object","properties":{"a":{"type":7}}},"handler":{"url":"https://h.example.com"}}`,
			agents.CodeInvalidParameters, "parameters"},
		{"lambda", `{"name":"x","description":"d","parameters":{"type":"object"},"handler":{"type":"lambda","url":"https://h.example.com"}}`,
			agents.CodeInvalidHandler, "handler.type"},
		{"http", `{"name":"x","description":"d","parameters":{"type":"object"},"handler":{"url":"http://h.example.com"}}`,
			agents.CodeInvalidURL, "handler.url"},
		{"credentials in url", `{"name":"x","description":"d","parameters":{"type":"object"},"handler":{"url":"https://u:p@h.example.com"}}`,
			agents.CodeInvalidURL, "handler.url"},
		{"timeout too long", toolBody("x", `,"timeout_ms":30001},"secret":"`+testToolSecret+`"`), agents.CodeInvalidTimeout, "handler.timeout_ms"},
		{"negative timeout", toolBody("x", `,"timeout_ms":-1},"secret":"`+testToolSecret+`"`), agents.CodeInvalidTimeout, "handler.timeout_ms"},
		{"retries not idempotent", toolBody("x", `,"max_retries":2},"secret":"`+testToolSecret+`"`), agents.CodeInvalidRetries, "handler.max_retries"},
		{"too many retries", toolBody("x", `,"idempotent":true,"max_retries":9},"secret":"`+testToolSecret+`"`), agents.CodeInvalidRetries, "handler.max_retries"},
		{"backoff too long", toolBody("x", `,"idempotent":true,"backoff_ms":60000},"secret":"`+testToolSecret+`"`), agents.CodeInvalidRetries, "handler.backoff_ms"},
		{"bad status", toolBody("x", `},"status":"draft","secret":"`+testToolSecret+`"`), agents.CodeInvalidStatus, "status"},
		{"no secret", toolBody("x", `}`), agents.CodeSecretRequired, "secret"},
		{"short secret", toolBody("x", `},"secret":"short"`), agents.CodeInvalidSecret, "secret"},
	} {
		handlerstest.Call(t, srv, tenant, "POST", "/agent/tools", c.body+"}").Want(t, c.name, http.StatusBadRequest, c.code, c.field)
	}
	handlerstest.Call(t, srv, tenant, "POST", "/agent/tools", toolBody("LOOKUP_ORDER", `},"secret":"`+testToolSecret+`"}`)).
		Want(t, "taken name", http.StatusConflict, agents.CodeToolNameTaken, "name")
	handlerstest.Call(t, srv, tenant, "POST", "/agent/tools", toolBody("x", `},"tool_id":"mine","secret":"`+testToolSecret+`"}`)).
		Want(t, "server-set field", http.StatusBadRequest, "unknown_field")

	// The system tools are listed first, read only.
	list := handlerstest.Call(t, srv, tenant, "GET", "/agent/tools", "").Want(t, "list", http.StatusOK)
	all := list.Body["tools"].([]any)
	if len(all) != len(agents.SystemTools)+1 || all[0].(map[string]any)["type"] != agents.ToolTypeSystem ||
		all[len(all)-1].(map[string]any)["tool_id"] != id {
		t.Fatalf("listed %v", list.Body)
	}
	if l := handlerstest.Call(t, srv, tenant, "GET", "/agent/tools?type=custom", "").Want(t, "list custom", http.StatusOK); len(l.Body["tools"].([]any)) != 1 {
		t.Fatalf("custom tools %v", l.Body)
	}
	sys := handlerstest.Call(t, srv, tenant, "GET", "/agent/tools/system-set_context", "").Want(t, "get a system tool", http.StatusOK)
	if sys.Str("name") != agents.ToolSetContext || sys.Body["parameters"] == nil {
		t.Fatalf("system tool %v", sys.Body)
	}
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/system-set_context", toolBody("x", `},"version":1}`)).
		Want(t, "put a system tool", http.StatusForbidden, "system_tool_read_only")
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/tools/system-send_message", "").Want(t, "delete a system tool", http.StatusForbidden, "system_tool_read_only")
	handlerstest.Call(t, srv, tenant, "GET", "/agent/tools/system-nothing", "").Want(t, "unknown system tool", http.StatusNotFound, "not_found")

	// Another tenant sees none of it.
	handlerstest.Call(t, srv, "globex", "GET", "/agent/tools/"+id, "").Want(t, "other tenant's get", http.StatusNotFound, "not_found")
	handlerstest.Call(t, srv, "globex", "PUT", "/agent/tools/"+id, toolBody("y", `},"version":1}`)).Want(t, "other tenant's put", http.StatusNotFound, "not_found")
	handlerstest.Call(t, srv, "globex", "DELETE", "/agent/tools/"+id, "").Want(t, "other tenant's delete", http.StatusNotFound, "not_found")
	if l := handlerstest.Call(t, srv, "globex", "GET", "/agent/tools?type=custom", "").Want(t, "other tenant's list", http.StatusOK); len(l.Body["tools"].([]any)) != 0 {
		t.Fatalf("globex lists %v", l.Body)
	}
	handlerstest.Call(t, srv, "globex", "POST", "/agent/tools", toolBody("lookup_order", `},"secret":"`+testToolSecret+`"}`)).
		Want(t, "the same name in another tenant", http.StatusCreated)

	// Replace: versioned; the secret is kept unless one is sent.
	update := toolBody("lookup_order", `,"timeout_ms":500},"status":"inactive"}`)
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+id, update).Want(t, "put without version", http.StatusPreconditionRequired, "version_required")
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+id, update, "If-Match", `"4"`).Want(t, "stale put", http.StatusConflict, "version_conflict")
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+id, strings.Replace(update, "https://", "ftp://", 1), "If-Match", `"1"`).
		Want(t, "invalid put", http.StatusBadRequest, agents.CodeInvalidURL, "handler.url")
	v2 := handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+id, update, "If-Match", `"1"`).Want(t, "put", http.StatusOK)
	if v2.Version() != 2 || v2.Str("status") != agents.StatusInactive || v2.Str("created_at") != created.Str("created_at") {
		t.Fatalf("updated %v", v2.Body)
	}
	if got, _ := secrets.Get(handlerstest.Ctx(t), tenant, id); string(got) != testToolSecret {
		t.Fatalf("secret after an update without one: %q", got)
	}
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+id, toolBody("lookup_order", `},"secret":"tiny","version":2}`)).
		Want(t, "put a short secret", http.StatusBadRequest, agents.CodeInvalidSecret, "secret")
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+id, toolBody("lookup_order", `},"secret":"a-rotated-secret-of-enough-bytes","version":2}`)).
		Want(t, "rotate the secret", http.StatusOK)
	if got, _ := secrets.Get(handlerstest.Ctx(t), tenant, id); string(got) != "a-rotated-secret-of-enough-bytes" {
		t.Fatalf("rotated secret %q", got)
	}

	// An agent that lists the tool keeps it.
	agent := handlerstest.Call(t, srv, tenant, "POST", "/agent/agents", `{"name":"Support","system_prompt":"Help.","tools":["lookup_order","send_message"]}`).
		Want(t, "agent with custom and system tools", http.StatusCreated)
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/tools/"+id, "").Want(t, "delete a used tool", http.StatusConflict, "tool_in_use")
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/agents/"+agent.Str("agent_id"), "").Want(t, "delete the agent", http.StatusOK)
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/tools/"+id, "", "If-Match", `"1"`).Want(t, "stale delete", http.StatusConflict, "version_conflict")
	handlerstest.Call(t, srv, tenant, "DELETE", "/agent/tools/"+id, "", "If-Match", `"3"`).Want(t, "delete", http.StatusOK)
	handlerstest.Call(t, srv, tenant, "GET", "/agent/tools/"+id, "").Want(t, "get deleted", http.StatusNotFound, "not_found")
	if _, err := secrets.Get(handlerstest.Ctx(t), tenant, id); err == nil {
		t.Fatal("the deleted tool's secret is still stored")
	}
}

// TestIngressToolSecretNeverStored: the secret is in no definition
// document, no event and no stream message in clear (the secrets bucket
// holds it sealed).
func TestIngressToolSecretNeverStored(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{ToolSecrets: toolSecrets(t, env, true)})
	created := handlerstest.Call(t, srv, "acme", "POST", "/agent/tools", toolBody("lookup_order", `},"secret":"`+testToolSecret+`"}`)).
		Want(t, "create", http.StatusCreated)
	d, err := env.Store.GetDefinition(handlerstest.Ctx(t), "acme", store.KindTool, created.Str("tool_id"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(d)
	if bytes.Contains(doc, []byte(testToolSecret)) || bytes.Contains(doc, []byte(`"secret"`)) {
		t.Fatalf("the definition holds the secret: %s", doc)
	}
	ctx := handlerstest.Ctx(t)
	streams := 0
	for name := range env.JS.StreamNames(ctx).Name() {
		s, err := env.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		streams++
		info := s.CachedInfo()
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted
			}
			if bytes.Contains(m.Data, []byte(testToolSecret)) || strings.Contains(m.Header.Get("secret"), testToolSecret) {
				t.Fatalf("stream %s message %d (%s) holds the secret in clear", name, seq, m.Subject)
			}
		}
	}
	if streams < 4 {
		t.Fatalf("scanned %d streams only", streams)
	}
	sealed, err := env.JS.KeyValue(ctx, handlers.BucketToolSecrets)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := sealed.Get(ctx, "acme."+created.Str("tool_id")); err != nil || len(e.Value()) == 0 {
		t.Fatalf("no sealed secret: %v", err)
	}
	var _ jetstream.KeyValue = sealed
}

// TestIngressToolWithoutSecretsKey: without a key a webhook tool cannot
// be created (503 secrets_unavailable), and nothing is stored.
func TestIngressToolWithoutSecretsKey(t *testing.T) {
	env := handlerstest.NewEnv(t)
	for name, cfg := range map[string]ingress.IngressConfig{"no store": {}, "no key": {ToolSecrets: toolSecrets(t, env, false)}} {
		srv := handlerstest.NewIngressServer(t, env, cfg)
		handlerstest.Call(t, srv, "acme", "POST", "/agent/tools", toolBody("lookup_order", `},"secret":"`+testToolSecret+`"}`)).
			Want(t, name, http.StatusServiceUnavailable, "secrets_unavailable")
	}
	if defs, err := env.Store.ListDefinitions(handlerstest.Ctx(t), "acme", store.KindTool); err != nil || len(defs) != 0 {
		t.Fatalf("stored %v, %v", defs, err)
	}
}

// TestIngressToolEgress: a webhook tool whose URL is, or resolves only
// to, an address the egress policy refuses (cloud metadata, private,
// loopback) is refused 400 egress_denied on create and on update, and
// nothing is stored; with the address allow-listed it is created.
func TestIngressToolEgress(t *testing.T) {
	env := handlerstest.NewEnv(t)
	secrets := toolSecrets(t, env, true)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{ToolSecrets: secrets})
	receiver := egresstest.NewTLSServer(t, http.NotFoundHandler())
	const tenant = "acme"
	withURL := func(url string) string {
		return strings.Replace(toolBody("lookup_order", `},"secret":"`+testToolSecret+`"`), "https://hooks.example.com/orders", url, 1)
	}
	for _, url := range []string{"https://169.254.169.254/latest/meta-data/iam", "https://10.0.0.1/hook", receiver.URL + "/hook",
		"https://localhost:" + receiver.Port() + "/hook", "https://[::ffff:127.0.0.1]/hook", "https://[fd00:ec2::254]/"} {
		r := handlerstest.Call(t, srv, tenant, "POST", "/agent/tools", withURL(url)).Want(t, "create at "+url, http.StatusBadRequest, egress.Code)
		if msg, _ := r.Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "handler.url") {
			t.Fatalf("create at %s: %v", url, r.Body)
		}
	}
	if l := handlerstest.Call(t, srv, tenant, "GET", "/agent/tools?type=custom", "").Want(t, "list", http.StatusOK); len(l.Body["tools"].([]any)) != 0 {
		t.Fatalf("refused tools were stored: %v", l.Body)
	}
	created := handlerstest.Call(t, srv, tenant, "POST", "/agent/tools", withURL("https://93.184.216.34/hook")).Want(t, "public", http.StatusCreated)
	handlerstest.Call(t, srv, tenant, "PUT", "/agent/tools/"+created.Str("tool_id"), strings.Replace(withURL("https://10.0.0.1/hook"), `"secret"`, `"version":1,"secret"`, 1)).
		Want(t, "update to a private address", http.StatusBadRequest, egress.Code)

	allowed := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{ToolSecrets: secrets, Egress: egress.MustNew("127.0.0.1", "10.0.0.0/8")})
	for name, url := range map[string]string{"lookup_local": receiver.URL + "/hook", "lookup_private": "https://10.0.0.1/hook"} {
		body := strings.Replace(withURL(url), `"name":"lookup_order"`, `"name":"`+name+`"`, 1)
		handlerstest.Call(t, allowed, tenant, "POST", "/agent/tools", body).Want(t, "allow-listed "+url, http.StatusCreated)
	}
	if n := receiver.Accepted(); n != 0 {
		t.Fatalf("writing a tool connected to its URL %d times", n)
	}
}
