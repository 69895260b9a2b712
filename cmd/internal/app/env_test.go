package app

import (
	"errors"
	"flag"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parseErrorFor returns the *ParseError of err (joined) that names name.
func parseErrorFor(err error, name string) *ParseError {
	for _, e := range unjoin(err) {
		var pe *ParseError
		if errors.As(e, &pe) && pe.Name == name {
			return pe
		}
	}
	return nil
}

// TestMalformedVariables: a value that does not have its variable's form
// is reported, naming the variable, the value and the form, for every
// kind of variable; the typed handle falls back to the default.
func TestMalformedVariables(t *testing.T) {
	for _, c := range []struct {
		name, value, form string
		fallback          func() bool // the handle's value is the default
	}{
		{"MAX_TURNS", "ten", formInt, func() bool { return envMaxTurns.Value() == 6 }},
		{"MAX_TURNS", "6.5", formInt, func() bool { return envMaxTurns.Value() == 6 }},
		{"ACK_WAIT", "30", formDuration, func() bool { return envAckWait.Value() == 30*time.Second }},
		{"SANDBOX_ALLOW_UNSAFE", "yes", formBool, func() bool { return !envSandboxUnsafe.Value() }},
		{"MODEL_TEMPERATURE", "warm", "a number from 0 to 2", func() bool { return envModelTemperature.Value() == "" }},
		{"MODEL_TEMPERATURE", "3", "a number from 0 to 2", nil},
		{"STORE", "mongo", "one of embedded, opensearch", func() bool { return envStore.Value() == "embedded" }},
		{"SKILL_SERVICE_URL", "ftp://skills.example", "an http(s) URL", nil},
		{"OPENSEARCH_URL", "http://a:9200,b", "http(s) URLs separated by commas", nil},
		{"NATS_URL", "nats://", "NATS URLs (nats://host:port) separated by commas", nil},
		{"METRICS_ADDR", "9464", "a host:port address", nil},
		{"MODEL_ALIASES", "fast", "name=model-id pairs separated by commas", nil},
		{"MODEL", "gpt-4.1", "offline, openai:<model>, anthropic:<model> or bedrock:<model>", nil},
		{"SKILL_COMMAND", `["server"`, "words separated by spaces, or a JSON array of strings", nil},
		{"LOG_LEVEL", "loud", "a log level: debug, info, warn or error (also trace, fatal, panic, disabled)", nil},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			err := CheckEnv()
			pe := parseErrorFor(err, c.name)
			if pe == nil {
				t.Fatalf("CheckEnv() = %v, want a ParseError for %s", err, c.name)
			}
			if pe.Value != c.value || pe.Form != c.form {
				t.Errorf("ParseError %+v, want value %q, form %q", pe, c.value, c.form)
			}
			if msg := pe.Error(); !strings.Contains(msg, c.name) || !strings.Contains(msg, strconv.Quote(c.value)) || !strings.Contains(msg, c.form) {
				t.Errorf("message %q does not name the variable, the value and the form", msg)
			}
			if c.fallback != nil && !c.fallback() {
				t.Error("the handle's value is not the default")
			}
		})
	}
}

// TestWellFormedVariables: well-formed values are taken as they always
// were, and an empty variable counts as unset.
func TestWellFormedVariables(t *testing.T) {
	t.Setenv("MAX_TURNS", "9")
	t.Setenv("ACK_WAIT", "45s")
	t.Setenv("SANDBOX_ALLOW_UNSAFE", "1")
	t.Setenv("MODEL_TEMPERATURE", "0.2")
	t.Setenv("NATS_URL", "nats://a:4222, nats://b:4222")
	t.Setenv("OPENSEARCH_URL", "http://a:9200,https://b:9200")
	t.Setenv("METRICS_ADDR", ":9464")
	t.Setenv("MODEL_ALIASES", "fast=gpt-4.1-mini, smart=gpt-4.1")
	t.Setenv("CONCURRENCY", "")
	if err := CheckEnv(); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig("router", "test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTurns != 9 || c.AckWait != 45*time.Second || !c.SandboxUnsafe || c.Models.Temperature != "0.2" ||
		c.NATSURL != "nats://a:4222, nats://b:4222" || c.MetricsAddr != ":9464" || c.Concurrency != 16 {
		t.Fatalf("config %+v", c)
	}
	if cfg := openSearchConfig(); len(cfg.URLs) != 2 || cfg.URLs[1] != "https://b:9200" {
		t.Fatalf("OpenSearch URLs %v", cfg.URLs)
	}
	// The flag wins over the variable.
	if c, err = ParseConfig("router", "test", []string{"--max-turns", "3"}, nil); err != nil || c.MaxTurns != 3 {
		t.Fatalf("--max-turns 3: %v, %d", err, c.MaxTurns)
	}
}

// TestEgressAllow: EGRESS_ALLOW opens the addresses and names it lists
// to webhook tools and to the skill client's OAuth requests, and nothing
// else; a malformed entry stops the process naming the variable.
func TestEgressAllow(t *testing.T) {
	t.Setenv("EGRESS_ALLOW", "10.20.0.0/16, hooks.internal")
	c, err := ParseConfig("executor", "test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.EgressPolicy()
	if err != nil || p.Check("", netip.MustParseAddr("10.20.1.2")) != nil || !p.AllowsHost("hooks.internal") ||
		p.Check("", netip.MustParseAddr("10.21.1.2")) == nil || p.Check("", netip.MustParseAddr("169.254.169.254")) == nil {
		t.Fatalf("policy of %q: %v", c.EgressAllow, err)
	}
	sc, err := c.SkillsConfig()
	if err != nil || sc.Egress == nil || !sc.Egress.AllowsHost("hooks.internal") {
		t.Fatalf("skills config: %+v, %v", sc.Egress, err)
	}
	t.Setenv("EGRESS_ALLOW", "10.20.0.0/33")
	if _, err := ParseConfig("executor", "test", nil, nil); parseErrorFor(err, "EGRESS_ALLOW") == nil {
		t.Fatalf("malformed EGRESS_ALLOW: %v", err)
	}
}

// TestMalformedVariablesReportedTogether: every malformed variable is
// reported at once, not only the first.
func TestMalformedVariablesReportedTogether(t *testing.T) {
	t.Setenv("MAX_TURNS", "ten")
	t.Setenv("HANDLE_TIMEOUT", "forever")
	t.Setenv("INGRESS_API_KEYS", "on")
	_, err := ParseConfig("router", "test", nil, nil)
	for _, name := range []string{"MAX_TURNS", "HANDLE_TIMEOUT", "INGRESS_API_KEYS"} {
		if parseErrorFor(err, name) == nil {
			t.Errorf("%s not reported in %v", name, err)
		}
	}
}

// TestMalformedSecretsAreNotPrinted: the value of a secret, or the
// password in a URL, never shows in the message.
func TestMalformedSecretsAreNotPrinted(t *testing.T) {
	t.Setenv("MCP_CONFORMANCE_CONTEXT", `{"client_secret": "hunter2"`)
	t.Setenv("NATS_URL", "nats://admin:hunter2@")
	err := CheckEnv()
	for _, name := range []string{"MCP_CONFORMANCE_CONTEXT", "NATS_URL"} {
		if parseErrorFor(err, name) == nil {
			t.Fatalf("%s not reported in %v", name, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("message shows a secret: %v", err)
	}
}

// TestMalformedFlags: a flag's value that does not parse is reported
// naming the flag, the value and the form, for every kind of flag.
func TestMalformedFlags(t *testing.T) {
	for _, c := range []struct {
		args       []string
		name, form string
	}{
		{[]string{"--max-turns", "ten"}, "--max-turns", formInt},
		{[]string{"--ack-wait=30"}, "--ack-wait", formDuration},
		{[]string{"--sandbox-unsafe=maybe"}, "--sandbox-unsafe", formBool},
		{[]string{"--store", "mongo"}, "--store", "one of embedded, opensearch"},
		{[]string{"--log-level", "loud"}, "--log-level", logLevel.Text},
		{[]string{"--rate", "fast"}, "--rate", formNumber},
		{[]string{"--egress-allow", "10.0.0.0/8,https://hooks.internal"}, "--egress-allow", egressList.Text},
	} {
		_, err := ParseConfig("router", "test", c.args, func(fs *flag.FlagSet) { fs.Float64("rate", 1, "a number flag") })
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Name != c.name || pe.Form != c.form || pe.Value != strings.TrimPrefix(c.args[len(c.args)-1], c.name+"=") {
			t.Errorf("%v: %v (%+v), want a ParseError for %s in the form %q", c.args, err, pe, c.name, c.form)
		}
	}
	// A flag the command does not have is named too; a boolean needs no value.
	if _, err := ParseConfig("router", "test", []string{"--max-turn", "6"}, nil); err == nil || !strings.Contains(err.Error(), "max-turn") {
		t.Errorf("unknown flag: %v", err)
	}
	if c, err := ParseConfig("router", "test", []string{"--sandbox-unsafe"}, nil); err != nil || !c.SandboxUnsafe {
		t.Errorf("--sandbox-unsafe: %v", err)
	}
}

// TestDurationDefaultsAreShort: the documented defaults read as written.
func TestDurationDefaultsAreShort(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", 30 * time.Second: "30s", 720 * time.Hour: "720h",
		90 * time.Minute: "1h30m", time.Hour: "1h", 0: "0s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestDailyTokensByModel: DEFAULT_DAILY_TOKENS of -1 gives seed 002's
// 100,000 tokens a day when any role's model is a real one, none with the
// offline model only; a set value is taken as it is.
func TestDailyTokensByModel(t *testing.T) {
	c := Config{DefaultDailyTokens: -1, Models: ModelConfig{Default: "offline"}}
	if n := c.DailyTokens(); n != 0 {
		t.Fatalf("offline models: %d, want none", n)
	}
	c.Models.Planner = "openai:gpt-4.1-mini"
	if n := c.DailyTokens(); n != SeedDailyTokens {
		t.Fatalf("a real planner model: %d, want %d", n, SeedDailyTokens)
	}
	c.DefaultDailyTokens = 0
	if n := c.DailyTokens(); n != 0 {
		t.Fatalf("0 set: %d", n)
	}
	c.DefaultDailyTokens = 5000
	if n := c.DailyTokens(); n != 5000 {
		t.Fatalf("5000 set: %d", n)
	}
}
