package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events/eventstest"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
	"github.com/agentbus/agentbus/skills"
)

// TestGatesCommand: agentbus gates changes the policy an executor's
// approval modes follow: a tenant set to gate nothing calls network
// skills ungated while the others keep the default; reset brings the
// default back. Misuse is a usage error (exit 2), and a server without
// the config bucket a clear failure (exit 1).
func TestGatesCommand(t *testing.T) {
	s := eventstest.Server(t)
	_, js := eventstest.Connect(t, s)
	url := s.ClientURL()
	gatesRun := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := gatesMain(t.Context(), append([]string{"--nats", url}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, errOut := gatesRun(); code != 1 || !strings.Contains(errOut, "no config bucket") {
		t.Fatalf("without the bucket: exit %d, %q", code, errOut)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: handlers.BucketConfig})
	if err != nil {
		t.Fatal(err)
	}
	modes := runctl.NewApprovalModes(kv)
	if err := modes.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	code, out, errOut := gatesRun()
	if code != 0 || !strings.Contains(out, "network, delegated, destructive (the default)") {
		t.Fatalf("show: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = gatesRun("--tenant", "acme", "--set", ""); code != 0 || !strings.Contains(out, "acme") {
		t.Fatalf("set: exit %d\n%s%s", code, out, errOut)
	}
	within("acme ungated", func() bool { return !modes.Gated("acme", skills.ModeNetwork) })
	if !modes.Gated("globex", skills.ModeNetwork) || !modes.Gated("acme", skills.ModeDestructive) {
		t.Fatal("another tenant lost the default, or a destructive call is ungated")
	}
	if code, _, errOut = gatesRun("--tenant", "*", "--set", "delegated, local_write"); code != 0 {
		t.Fatalf("set *: exit %d %s", code, errOut)
	}
	within("* applied", func() bool {
		return modes.Gated("globex", skills.ModeLocalWrite) && !modes.Gated("globex", skills.ModeNetwork)
	})
	if code, _, errOut = gatesRun("--tenant", "acme", "--reset"); code != 0 {
		t.Fatalf("reset: exit %d %s", code, errOut)
	}
	within("acme follows *", func() bool { return modes.Gated("acme", skills.ModeDelegated) })
	if code, out, _ = gatesRun(); code != 0 || strings.Contains(out, "acme") || !strings.Contains(out, "delegated, local_write, destructive") {
		t.Fatalf("show after reset: exit %d\n%s", code, out)
	}

	for _, args := range [][]string{
		{"--tenant", "acme"},
		{"--set", "network"},
		{"--tenant", "acme", "--set", "network", "--reset"},
		{"--tenant", "no spaces", "--set", ""},
	} {
		if code, _, errOut := gatesRun(args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
	if code, _, errOut := gatesRun("--tenant", "acme", "--set", "everything"); code != 1 || !strings.Contains(errOut, `"everything" is not one of`) {
		t.Errorf("unknown mode: exit %d, %q", code, errOut)
	}
}
