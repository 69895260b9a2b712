package skills

import "testing"

// EverythingStdioConfig is, for the external tests, a Config running the
// reference MCP server (server-everything) over stdio; the test fails
// when it is not installed (deploy/mcp/setup.sh).
func EverythingStdioConfig(t *testing.T) Config {
	t.Helper()
	node, script := everythingScript(t)
	return Config{Transport: TransportStdio, Command: []string{node, script, "stdio"}}
}
