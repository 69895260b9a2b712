package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/skills"
)

// conformanceTenant is the tenant the conformance client's calls run as:
// the suite's servers have one catalog.
const conformanceTenant = "conformance"

// conformanceProtocol is the MCP revision the suite tests.
const conformanceProtocol = "2025-11-25"

// conformanceClient is the client the MCP conformance suite
// (@modelcontextprotocol/conformance) launches for its client scenarios:
// it appends the scenario server's URL to the command line and names the
// scenario in MCP_CONFORMANCE_SCENARIO. Every scenario runs through
// agentbus's own skill client, the code the planner and the executor use:
// connect and initialize, list the tools, call them, answer elicitations
// (here with the requested schema's defaults, as a user who accepts them
// would), follow a dropped stream.
func conformanceClient(args []string) int {
	fs := flag.NewFlagSet("agentbus mcp-conformance-client", flag.ExitOnError)
	timeout := fs.Duration("timeout", 20*time.Second, "bound of the whole scenario")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: agentbus mcp-conformance-client [flags] <server-url>

The client the MCP conformance suite runs: the scenario comes from
MCP_CONFORMANCE_SCENARIO (initialize, tools_call,
elicitation-sep1034-client-defaults, sse-retry and the auth/ scenarios:
metadata discovery, registration, client id metadata documents, scopes and
step-up, token endpoint authentication, pre-registration, client credentials;
credentials in MCP_CONFORMANCE_CONTEXT), the server URL is the last argument.
In the authorization-code scenarios the user consents at once. deploy/mcp/conformance/setup.sh installs the suite.

Flags:
`)
		fs.PrintDefaults()
	}
	app.ParseFlags(fs, args)
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	scenario := app.EnvConformanceScenario.Value()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := runConformance(ctx, scenario, fs.Arg(0)); err != nil {
		fmt.Fprintf(os.Stderr, "agentbus mcp-conformance-client: %s: %v\n", scenario, err)
		return 1
	}
	return 0
}

func runConformance(ctx context.Context, scenario, url string) error {
	cfg := skills.Config{URL: url, Mode: skills.ModePlain, ProtocolVersion: conformanceProtocol, Timeout: 15 * time.Second}
	if strings.HasPrefix(scenario, "auth/") {
		// The client's OAuth identity: the scenario's credentials (a
		// client secret, or a private key that signs a private_key_jwt
		// assertion) when it has some, else its metadata document's URL,
		// else it registers itself.
		var sc struct {
			ClientID      string `json:"client_id"`
			ClientSecret  string `json:"client_secret"`
			PrivateKeyPEM string `json:"private_key_pem"`
			Algorithm     string `json:"signing_algorithm"`
		}
		if raw := app.EnvConformanceContext.Value(); raw != "" {
			if err := json.Unmarshal([]byte(raw), &sc); err != nil {
				return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
			}
		}
		cfg.OAuth = &skills.ClientCredentials{ClientID: sc.ClientID, ClientSecret: sc.ClientSecret,
			PrivateKeyPEM: []byte(sc.PrivateKeyPEM), Algorithm: sc.Algorithm, ClientMetadataURL: conformanceClientMetadata}
		cfg.OAuthAuthorizer, cfg.OAuthRedirectURI = consentingUser, conformanceRedirect
		// The suite's authorization servers run on this machine, beside
		// the scenario's server: the egress policy allows loopback here.
		cfg.Egress = egress.MustNew("127.0.0.0/8", "::1", "localhost")
	}
	c, err := skills.NewClient(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	tools, err := c.Tools(ctx, conformanceTenant)
	if err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	fmt.Printf("tools: %v\n", tools)
	call := func(name string, args any) error {
		b, err := json.Marshal(args)
		if err != nil {
			return err
		}
		e := skills.NewElicitor(nil)
		e.Fallback = acceptDefaults
		out, err := c.Call(skills.WithElicitor(ctx, e), conformanceTenant, name, b, "")
		if err != nil {
			return fmt.Errorf("call %s: %w", name, err)
		}
		fmt.Printf("%s: %s\n", name, out)
		return nil
	}
	switch scenario {
	case "initialize":
		return nil // connecting initialized the session, and tools/list ran on it
	case "tools_call":
		return call("add_numbers", map[string]any{"a": 2, "b": 3})
	case "elicitation-sep1034-client-defaults":
		return call("test_client_elicitation_defaults", map[string]any{})
	case "sse-retry":
		return call("test_reconnection", map[string]any{})
	case "":
		return errors.New("MCP_CONFORMANCE_SCENARIO is not set")
	default:
		if strings.HasPrefix(scenario, "auth/") {
			return call("test-tool", map[string]any{})
		}
		return fmt.Errorf("scenario %q is not supported by this client", scenario)
	}
}

// conformanceClientMetadata is the client id metadata document the
// suite's authorization servers know the client by, and
// conformanceRedirect its redirect URI.
const (
	conformanceClientMetadata = "https://conformance-test.local/client-metadata.json"
	conformanceRedirect       = "http://localhost:3000/callback"
)

// consentingUser is the user of the suite's authorization-code
// scenarios: they open the authorization URL and consent, and the
// authorization server redirects them at once to the redirect URI, whose
// URL (with the code and the state) it returns.
func consentingUser(ctx context.Context, authURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("the authorization endpoint answered %s with no redirect", resp.Status)
	}
	return loc.String(), nil
}

// acceptDefaults answers a question as a user who accepts every default
// its schema offers.
func acceptDefaults(q skills.Elicitation) (json.RawMessage, bool) {
	out, err := skills.WithDefaults(q.Schema, json.RawMessage(`{}`))
	return out, err == nil
}
