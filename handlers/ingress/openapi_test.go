package ingress_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/api"
	"github.com/agentbus/agentbus/api/apitest"
	"github.com/agentbus/agentbus/handlers/a2a"
	"github.com/agentbus/agentbus/handlers/chat"
	"github.com/agentbus/agentbus/handlers/ingress"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
)

// registeredRoutes are the "METHOD /path" patterns registered on a mux
// (HandleFunc or Handle with a literal pattern that names its method) by
// the non-test sources under dir: the ingress and every protocol adapter
// mounted on it. {$} ends a pattern that matches its path exactly.
func registeredRoutes(t *testing.T, dir string) []string {
	t.Helper()
	var routes []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			lit, isLit := call.Args[0].(*ast.BasicLit)
			if !ok || !isLit || lit.Kind != token.STRING || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			pattern, _ := strconv.Unquote(lit.Value)
			method, path, found := strings.Cut(pattern, " ")
			if found && method == strings.ToUpper(method) && strings.HasPrefix(path, "/") {
				routes = append(routes, method+" "+strings.TrimSuffix(path, "{$}"))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(routes)
	return slices.Compact(routes)
}

// TestOpenAPIRoutes: api/openapi.yaml documents every route the ingress
// and its adapters register and no other, and the ingress serves each
// documented operation (none falls through to its "no route" answer).
func TestOpenAPIRoutes(t *testing.T) {
	c, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range c.Doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(documented)
	registered := registeredRoutes(t, "..")
	if len(registered) < 40 {
		t.Fatalf("found only %d routes under handlers/: %v", len(registered), registered)
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is registered but not in api/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("api/openapi.yaml documents %s, which no source registers", d)
		}
	}

	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{Adapters: []ingress.Adapter{chat.Adapter{}, a2a.Adapter{}}})
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, d := range documented {
		method, path, _ := strings.Cut(d, " ")
		req, err := http.NewRequestWithContext(handlerstest.Ctx(t), method, srv.URL+param.ReplaceAllString(path, "x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Tenant-Id", "probe")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.Contains(string(body), `"no route `) {
			t.Errorf("%s is documented but the ingress does not serve it: %d %s", d, resp.StatusCode, body)
		}
	}
}

// TestReferenceIsServedWithoutCredentials: behind the service token, GET
// /openapi.json answers the embedded document and GET /docs its page,
// under the dashboard's Content-Security-Policy, without a credential;
// the API beside them still wants one.
func TestReferenceIsServedWithoutCredentials(t *testing.T) {
	env := handlerstest.NewEnv(t)
	srv := handlerstest.NewIngressServer(t, env, ingress.IngressConfig{ServiceToken: "svc-token"})
	doc, _ := api.JSON()
	page, _ := api.Page()
	for path, want := range map[string][]byte{"/openapi.json": doc, "/docs": page} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
			t.Fatalf("GET %s: %d, %d bytes, want the embedded %d", path, resp.StatusCode, len(body), len(want))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	handlerstest.CheckHTTP(t, srv, handlerstest.HTTPCase{Method: "GET", Path: "/agent/runs", Headers: handlerstest.AsTenant("acme"),
		WantStatus: http.StatusUnauthorized, WantCode: "unauthorized"})
}
