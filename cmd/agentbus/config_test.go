package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runBinary runs bin with args and env added to the environment, in a
// temporary directory, and returns its exit code and combined output.
func runBinary(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	return 0, ""
}

// TestMalformedConfigurationExits2: a malformed variable or flag stops
// agentbus up, and a role binary, with exit code 2 and a message naming
// it, its value and the form expected, before anything starts.
func TestMalformedConfigurationExits2(t *testing.T) {
	bin := binaries(t)
	agentbus, router := filepath.Join(bin, "agentbus"), filepath.Join(bin, "router")
	for _, c := range []struct {
		name string
		bin  string
		env  []string
		args []string
		want []string
	}{
		{"up, MAX_TURNS=ten", agentbus, []string{"MAX_TURNS=ten"}, []string{"up"},
			[]string{`agentbus up: MAX_TURNS="ten": expected an integer`}},
		{"up --max-turns ten", agentbus, nil, []string{"up", "--max-turns", "ten"},
			[]string{`agentbus up: --max-turns="ten": expected an integer`}},
		{"up --nats-port, a flag of up's own", agentbus, nil, []string{"up", "--nats-port=many"},
			[]string{`agentbus up: --nats-port="many": expected an integer`}},
		{"up, two variables at once", agentbus, []string{"ACK_WAIT=30", "STORE=mongo"}, []string{"up"},
			[]string{`ACK_WAIT="30": expected a duration`, `STORE="mongo": expected one of embedded, opensearch`}},
		{"router, SANDBOX_ALLOW_UNSAFE=yes", router, []string{"SANDBOX_ALLOW_UNSAFE=yes"}, nil,
			[]string{`router: SANDBOX_ALLOW_UNSAFE="yes": expected a boolean`}},
		{"router --handle-timeout", router, nil, []string{"--handle-timeout", "5"},
			[]string{`router: --handle-timeout="5": expected a duration`}},
		{"run, AGENTBUS_URL", agentbus, []string{"AGENTBUS_URL=localhost:8080"}, []string{"run", "hello"},
			[]string{`agentbus run: AGENTBUS_URL="localhost:8080": expected an http(s) URL`}},
		{"up, MAX_TURNS=0 well-formed but refused", agentbus, []string{"MAX_TURNS=0"}, []string{"up"},
			[]string{`agentbus up: max-turns must be at least 1`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := runBinary(t, c.bin, c.env, c.args...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "is up") || strings.Contains(out, "consuming") {
				t.Errorf("the process started:\n%s", out)
			}
		})
	}
}

// TestHelpListsFlagsAndVariables: --help of agentbus up and of the role
// binaries lists each flag with its type and variable, and exits 0.
func TestHelpListsFlagsAndVariables(t *testing.T) {
	bin := binaries(t)
	for _, c := range []struct {
		bin  string
		args []string
		want []string
	}{
		{"agentbus", []string{"up", "--help"}, []string{"-max-turns int", "(env MAX_TURNS) (default 6)", "-ack-wait duration",
			"-sync-always", "(env NATS_SYNC_ALWAYS)", "-http value", "-store value", "-token value", "(env INGRESS_TOKEN)"}},
		{"router", []string{"--help"}, []string{"router: the manager role", "-nats value", "(env NATS_URL)", "-max-turns int"}},
		{"ingress", []string{"-h"}, []string{"-rate-limit int", "(env RATE_LIMIT_PER_MINUTE)", "-run-timeout duration"}},
		{"agentbus", []string{"nats", "--help"}, []string{"-cluster value", "(env NATS_CLUSTER)", "-permissions"}},
	} {
		code, out := runBinary(t, filepath.Join(bin, c.bin), []string{"INGRESS_TOKEN=s3cret-token"}, c.args...)
		if code != 0 {
			t.Errorf("%s %v: exit code %d\n%s", c.bin, c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s %v lacks %q:\n%s", c.bin, c.args, w, out)
			}
		}
		if strings.Contains(out, "s3cret-token") {
			t.Errorf("%s %v shows the ingress token:\n%s", c.bin, c.args, out)
		}
	}
}
