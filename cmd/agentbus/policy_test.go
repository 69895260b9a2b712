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
)

// TestPolicyCommand: agentbus policy sets the per-tenant choices the
// roles follow: payload records kept for one tenant, an injection policy
// for every tenant not named; reset brings the default back. Misuse is a
// usage error (exit 2).
func TestPolicyCommand(t *testing.T) {
	s := eventstest.Server(t)
	_, js := eventstest.Connect(t, s)
	url := s.ClientURL()
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := policyMain(t.Context(), append([]string{"--nats", url}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, "no config bucket") {
		t.Fatalf("without the bucket: exit %d, %q", code, errOut)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: handlers.BucketConfig})
	if err != nil {
		t.Fatal(err)
	}
	records, untrusted := runctl.NewRecordPolicy(kv), runctl.NewUntrustedPolicy(kv)
	if err := records.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := untrusted.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5s", what)
			}
		}
	}
	code, out, errOut := run()
	if code != 0 || !strings.Contains(out, "PAYLOAD_RECORDS") || !strings.Contains(out, "off (default)") {
		t.Fatalf("show: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = run("--tenant", "acme", "--set", "payload_records=keep"); code != 0 || !strings.Contains(out, "acme") {
		t.Fatalf("set: exit %d\n%s%s", code, out, errOut)
	}
	within("acme keeps payloads", func() bool { return records.Keeps("acme") })
	if records.Keeps("globex") {
		t.Fatal("another tenant keeps payload records")
	}
	if code, _, errOut = run("--tenant", "*", "--set", "injection_policy=stop"); code != 0 {
		t.Fatalf("set *: exit %d %s", code, errOut)
	}
	within("* stops on injections", func() bool { return untrusted.InjectionStops("globex") && untrusted.InjectionStops("acme") })
	if code, _, errOut = run("--tenant", "acme", "--reset", "payload_records"); code != 0 {
		t.Fatalf("reset: exit %d %s", code, errOut)
	}
	within("acme back to the default", func() bool { return !records.Keeps("acme") })

	for _, args := range [][]string{
		{"--tenant", "acme"},
		{"--set", "payload_records=keep"},
		{"--tenant", "acme", "--set", "payload_records=keep", "--reset", "payload_records"},
		{"--tenant", "acme", "--set", "payload_records=always"},
		{"--tenant", "acme", "--set", "colour=blue"},
		{"--tenant", "no spaces", "--set", "taint_policy=relaxed"},
	} {
		if code, _, errOut := run(args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
}
