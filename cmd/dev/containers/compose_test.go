package containers

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const composePath = "../../../deploy/compose/compose.yaml"

// TestLoadTheComposeFile: the deployment's Compose file loads strictly; the
// services start after what they depend on, the OpenSearch node only with
// its profile; variables take their defaults or the environment's value.
func TestLoadTheComposeFile(t *testing.T) {
	env := map[string]string{"NATS_PASSWORD_ROUTER": "p-router"}
	p, err := Load(composePath, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	order, err := p.Active()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(order, "opensearch") {
		t.Errorf("opensearch starts without its profile: %v", order)
	}
	at := func(s string) int { return slices.Index(order, s) }
	for _, role := range []string{"router", "planner", "executor", "aggregator", "ingress"} {
		if at(role) < at("setup") || at("setup") < at("nats-2") || at(role) < 0 {
			t.Errorf("order %v: %s must start after setup, and setup after the NATS nodes", order, role)
		}
	}
	if got := p.Services["router"].Env["NATS_PASSWORD"]; got != "p-router" {
		t.Errorf("router's NATS_PASSWORD = %q, want the environment's", got)
	}
	if got := p.Services["planner"].Env["NATS_PASSWORD"]; got != "REPLACE-ME-planner-password" {
		t.Errorf("planner's NATS_PASSWORD = %q, want the default", got)
	}
	if got := p.Services["executor"].Env["NATS_URL"]; !strings.Contains(got, "nats-2:4222") {
		t.Errorf("executor's NATS_URL = %q: agentbus.env is not read", got)
	}
	if g := p.Services["executor"].StopGrace; g != 45*time.Second {
		t.Errorf("executor's stop grace %s, want 45s", g)
	}
}

// TestRunArgs: a service's podman arguments carry its network name,
// mounts (relative paths made absolute, named volumes under the project),
// published ports, healthcheck, grace period and privileges.
func TestRunArgs(t *testing.T) {
	p, err := Load(composePath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	nats, err := p.RunArgs("nats-0", 1, "/env", true)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(nats, " ")
	conf, _ := filepath.Abs("../../../deploy/compose/nats.conf")
	for _, want := range []string{
		"--name agentbus-nats-0-1", "--network agentbus_default", "--network-alias nats-0", "--env-file /env",
		"--volume " + conf + ":/etc/nats/nats.conf:ro", "--volume agentbus_nats-0:/data",
		"--publish 127.0.0.1::4222", "--stop-timeout 60",
		`--health-cmd ["/healthcheck","http://127.0.0.1:8222/healthz"]`,
		"agentbus/nats:latest --config /etc/nats/nats.conf",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("nats-0: %s\nlacks %s", line, want)
		}
	}
	exec, err := p.RunArgs("executor", 2, "/env", false)
	if err != nil {
		t.Fatal(err)
	}
	line = strings.Join(exec, " ")
	for _, want := range []string{"--name agentbus-executor-2", "--read-only", "--tmpfs /tmp", "--security-opt"} {
		if !strings.Contains(line, want) {
			t.Errorf("executor: %s\nlacks %s", line, want)
		}
	}
}

// TestLoadRefusesWhatItDoesNotTranslate: an unknown key, an unknown
// depends_on condition and an undeclared named volume fail.
func TestLoadRefusesWhatItDoesNotTranslate(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key": "name: x\nservices:\n  a: {image: i, cap_add: [NET_ADMIN]}\n",
		"condition":   "name: x\nservices:\n  a: {image: i, depends_on: {b: {condition: later}}}\n  b: {image: i}\n",
		"no image":    "name: x\nservices:\n  a: {command: [x]}\n",
	} {
		path := filepath.Join(t.TempDir(), "compose.yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, func(string) string { return "" }); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	path := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(path, []byte("name: x\nservices:\n  a: {image: i, volumes: [\"data:/data\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.RunArgs("a", 1, "/env", false); err == nil {
		t.Error("an undeclared volume was mounted")
	}
}
