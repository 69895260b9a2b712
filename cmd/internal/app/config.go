package app

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/handlers/executor"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tools"
)

// Config is the configuration shared by every agentbus process. Each field
// has a flag and an environment variable; the flag wins.
type Config struct {
	NATSURL string
	// NATSUser and NATSPassword log in to a server that gives each role
	// its own permissions (agentbus nats --permissions); the password
	// comes from the environment or a file, never a flag.
	NATSUser        string
	NATSPassword    string
	natsPassFile    string
	Store           string
	StorePrefix     string
	ExecutionTTL    time.Duration // how long the store keeps execution records
	Models          ModelConfig
	SkillServiceURL string
	SkillAPIKey     string
	SkillTransport  string // streamable-http (default), sse or stdio
	SkillMode       string // auto (default), skill-service or plain
	SkillCommand    string // stdio server command line: words split on spaces, or a JSON array
	// SkillOAuthClientID, with the secret (environment only) or a private
	// key file, authenticates to a Skill Service that requires OAuth
	// client credentials.
	SkillOAuthClientID string
	skillOAuthSecret   string
	SkillOAuthKeyFile  string
	SkillOAuthScopes   string
	// SkillOAuthFile holds credentials per tenant (see oauthFile).
	SkillOAuthFile string
	SandboxUnsafe  bool // run extraction scripts without isolation (development only)
	SkillTimeout   time.Duration
	// BreakerFailures and BreakerCooldown configure each skill's circuit
	// breaker; RepeatCallLimit bounds identical calls in a step;
	// ContextTokens is a step's context budget.
	BreakerFailures int
	BreakerCooldown time.Duration
	RepeatCallLimit int
	ContextTokens   int
	LogLevel        string
	Concurrency     int
	MaxTurns        int // model turns of one step
	HandleTimeout   time.Duration
	// Replicas is the replica count of every stream and bucket (REPLICAS).
	// 0 leaves it to the server: 1 on a single server, ClusterReplicas on
	// a cluster. Every process of a deployment must come to the same
	// count: a process that finds another tries to change it back.
	Replicas   int
	AckWait    time.Duration
	MaxDeliver int
	// MetricsAddr, when set, is where a role process serves /metrics
	// (the ingress serves it on its own listener).
	MetricsAddr string
	// AlertWebhook, when set, receives every alert's change of state,
	// signed with the secret of ALERT_WEBHOOK_SECRET (environment only).
	AlertWebhook string
	alertSecret  string
	// SecretsKeyFile holds the base64 AES-256 key that seals the webhook
	// tools' secrets; the key may instead be in env SECRETS_KEY. Without
	// either, webhook tools cannot be created or called (the all-in-one
	// generates one in its data directory).
	SecretsKeyFile string
	secretsKey     string
	// inProcess, set by the all-in-one, is its embedded server: the
	// process connects to it in memory rather than over loopback TCP.
	inProcess nats.InProcessConnProvider
}

// Register adds the shared flags to fs, with defaults from the environment.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats", env("NATS_URL", "nats://127.0.0.1:4222"),
		"NATS server URL, or the comma-separated URLs of a cluster's nodes (env NATS_URL)")
	fs.StringVar(&c.NATSUser, "nats-user", env("NATS_USER", ""),
		"NATS user of this process on a server with per-role permissions (agentbus nats --permissions) (env NATS_USER)")
	fs.StringVar(&c.natsPassFile, "nats-password-file", env("NATS_PASSWORD_FILE", ""),
		"file holding the NATS user's password; it may instead be in env NATS_PASSWORD (env NATS_PASSWORD_FILE)")
	c.NATSPassword = os.Getenv("NATS_PASSWORD")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("METRICS_ADDR", ""),
		"serve Prometheus /metrics on this address, e.g. :9464 (the ingress also serves it on its own listener) (env METRICS_ADDR)")
	c.RegisterStack(fs)
}

// RegisterStack adds every shared flag but the NATS URL, for the
// all-in-one, which runs its own NATS server.
func (c *Config) RegisterStack(fs *flag.FlagSet) {
	fs.StringVar(&c.Store, "store", env("STORE", "embedded"), "storage backend: embedded (in JetStream) or opensearch (OPENSEARCH_URL and friends) (env STORE)")
	fs.DurationVar(&c.ExecutionTTL, "execution-record-ttl", envDuration("EXECUTION_RECORD_TTL", store.DefaultExecutionTTL),
		"how long execution records (GET /agent/executions) are kept: the embedded bucket's TTL, the OpenSearch ISM policy (env EXECUTION_RECORD_TTL)")
	fs.StringVar(&c.StorePrefix, "store-prefix", env("STORE_PREFIX", ""), "name prefix of the store's buckets and indices (env STORE_PREFIX)")
	c.Models.Register(fs)
	fs.StringVar(&c.SkillServiceURL, "skills", env("SKILL_SERVICE_URL", "http://127.0.0.1:7070/tenants/{tenant}/mcp"),
		"MCP server URL of the HTTP skill transports (.../sse for sse); {tenant}, if present, is replaced by the run's tenant (env SKILL_SERVICE_URL)")
	c.SkillAPIKey = os.Getenv("SKILL_SERVICE_API_KEY") // secrets come from the environment only
	fs.StringVar(&c.SkillTransport, "skill-transport", env("SKILL_TRANSPORT", skills.TransportStreamableHTTP),
		"MCP transport to the skills: streamable-http, sse or stdio (env SKILL_TRANSPORT)")
	fs.StringVar(&c.SkillMode, "skill-mode", env("SKILL_MODE", skills.ModeAuto),
		"auto, skill-service (find_relevant_skills/load_skill) or plain (any MCP server's tools) (env SKILL_MODE)")
	fs.StringVar(&c.SkillOAuthClientID, "skill-oauth-client-id", env("SKILL_OAUTH_CLIENT_ID", ""),
		"OAuth client id for a Skill Service that requires client credentials; the secret is read from env SKILL_OAUTH_CLIENT_SECRET only (env SKILL_OAUTH_CLIENT_ID)")
	c.skillOAuthSecret = os.Getenv("SKILL_OAUTH_CLIENT_SECRET") // secrets come from the environment only
	fs.StringVar(&c.SkillOAuthKeyFile, "skill-oauth-key-file", env("SKILL_OAUTH_KEY_FILE", ""),
		"PEM private key that signs a private_key_jwt assertion instead of a client secret (env SKILL_OAUTH_KEY_FILE)")
	fs.StringVar(&c.SkillOAuthFile, "skill-oauth-credentials", env("SKILL_OAUTH_CREDENTIALS_FILE", ""),
		`JSON file of OAuth client credentials per tenant ("*" for the others): {"acme": {"client_id": "...", "client_secret": "..." or "private_key_file": "...", "scopes": [...]}} (env SKILL_OAUTH_CREDENTIALS_FILE)`)
	fs.StringVar(&c.SkillOAuthScopes, "skill-oauth-scopes", env("SKILL_OAUTH_SCOPES", ""),
		"scopes to ask for when the Skill Service's challenge and metadata name none, space-separated (env SKILL_OAUTH_SCOPES)")
	fs.StringVar(&c.SkillCommand, "skill-command", env("SKILL_COMMAND", ""),
		"stdio MCP server command line, split on spaces or a JSON array; one server serves every tenant (env SKILL_COMMAND)")
	fs.DurationVar(&c.SkillTimeout, "skill-timeout", envDuration("SKILL_TIMEOUT", executor.DefaultSkillTimeout),
		"bound of one skill call: a call that takes longer fails its step, and the run replans around it (env SKILL_TIMEOUT)")
	fs.IntVar(&c.BreakerFailures, "breaker-failures", envInt("SKILL_BREAKER_FAILURES", 5),
		"consecutive failures of a skill that open its circuit: its calls then fail fast (env SKILL_BREAKER_FAILURES)")
	fs.DurationVar(&c.BreakerCooldown, "breaker-cooldown", envDuration("SKILL_BREAKER_COOLDOWN", 30*time.Second),
		"how long an open circuit fails calls fast before one trial call (env SKILL_BREAKER_COOLDOWN)")
	fs.IntVar(&c.RepeatCallLimit, "repeat-call-limit", envInt("REPEAT_CALL_LIMIT", executor.DefaultRepeatCallLimit),
		"identical calls (same skill, same arguments) one step may make; the next ends the run REPEATED_FAILURE (env REPEAT_CALL_LIMIT)")
	fs.IntVar(&c.ContextTokens, "context-tokens", envInt("CONTEXT_TOKENS", executor.DefaultContextTokens),
		"context budget of a step's turns in tokens; past 80 % older turns are compressed (env CONTEXT_TOKENS)")
	fs.BoolVar(&c.SandboxUnsafe, "sandbox-unsafe", env("SANDBOX_ALLOW_UNSAFE", "") == "1",
		"DEVELOPMENT ONLY: run extraction scripts without isolation when none is available (env SANDBOX_ALLOW_UNSAFE=1)")
	fs.StringVar(&c.AlertWebhook, "alert-webhook", env("ALERT_WEBHOOK_URL", ""),
		"POST every alert's change of state here, signed with ALERT_WEBHOOK_SECRET (env ALERT_WEBHOOK_URL)")
	c.alertSecret = os.Getenv("ALERT_WEBHOOK_SECRET") // secrets come from the environment only
	fs.StringVar(&c.SecretsKeyFile, "secrets-key-file", env("SECRETS_KEY_FILE", ""),
		"file holding the base64 32-byte key that encrypts webhook tools' secrets; the key may instead be in env SECRETS_KEY; "+
			"without one webhook tools cannot be created (env SECRETS_KEY_FILE)")
	c.secretsKey = os.Getenv("SECRETS_KEY") // secrets come from the environment only
	fs.StringVar(&c.LogLevel, "log-level", env("LOG_LEVEL", "info"), "log level: debug, info, warn, error (env LOG_LEVEL)")
	fs.IntVar(&c.Concurrency, "concurrency", envInt("CONCURRENCY", 16), "messages each role of the process handles at once; the projector reads in batches of up to 256 (env CONCURRENCY)")
	fs.IntVar(&c.MaxTurns, "max-turns", envInt("MAX_TURNS", 6), "model turns one step may take before it fails (env MAX_TURNS)")
	fs.DurationVar(&c.HandleTimeout, "handle-timeout", envDuration("HANDLE_TIMEOUT", 5*time.Minute), "deadline of one message's work (env HANDLE_TIMEOUT)")
	fs.DurationVar(&c.AckWait, "ack-wait", envDuration("ACK_WAIT", 30*time.Second), "JetStream ack wait of the role consumers (env ACK_WAIT)")
	fs.IntVar(&c.MaxDeliver, "max-deliver", envInt("MAX_DELIVER", 10), "deliveries before a message is dead-lettered (env MAX_DELIVER)")
	fs.IntVar(&c.Replicas, "replicas", envInt("REPLICAS", 0),
		"replicas of every stream and bucket; 0: 1 on a single server, 3 on a cluster; the same in every process (env REPLICAS)")
}

// Validate checks the values the process cannot run with.
func (c *Config) Validate() error {
	if c.Store != "embedded" && c.Store != "opensearch" {
		return fmt.Errorf("store %q is not supported (use embedded or opensearch)", c.Store)
	}
	if err := c.Models.Validate(); err != nil {
		return err
	}
	if _, err := c.SecretsKey(); err != nil {
		return err
	}
	if _, err := c.SkillsConfig(); err != nil {
		return err
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency must be at least 1")
	}
	if c.ExecutionTTL != 0 && (c.ExecutionTTL < time.Second || c.ExecutionTTL%time.Second != 0) {
		return fmt.Errorf("execution-record-ttl must be whole seconds, at least 1s")
	}
	if c.MaxTurns < 1 {
		return fmt.Errorf("max-turns must be at least 1")
	}
	if c.BreakerFailures < 1 || c.BreakerCooldown <= 0 || c.RepeatCallLimit < 1 || c.ContextTokens < 1000 {
		return fmt.Errorf("breaker-failures and repeat-call-limit must be at least 1, breaker-cooldown positive, context-tokens at least 1000")
	}
	if c.SkillTimeout < 0 || c.HandleTimeout > 0 && c.SkillTimeout >= c.HandleTimeout {
		return fmt.Errorf("skill-timeout must be shorter than handle-timeout (%s)", c.HandleTimeout)
	}
	if c.natsPassFile != "" {
		b, err := os.ReadFile(c.natsPassFile)
		if err != nil {
			return fmt.Errorf("NATS_PASSWORD_FILE: %w", err)
		}
		c.NATSPassword = strings.TrimSpace(string(b))
	}
	if c.NATSPassword != "" && c.NATSUser == "" {
		return fmt.Errorf("a NATS password needs NATS_USER")
	}
	return nil
}

// SkillsConfig is the skill client's configuration: the URL for the HTTP
// transports, the parsed command for stdio. It reports what skills.NewClient
// would refuse, naming the setting.
func (c *Config) SkillsConfig() (skills.Config, error) {
	sc := skills.Config{Transport: c.SkillTransport, Mode: c.SkillMode, APIKey: c.SkillAPIKey}
	switch c.SkillTransport {
	case "", skills.TransportStreamableHTTP, skills.TransportSSE:
		u := c.SkillServiceURL
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return sc, fmt.Errorf("SKILL_SERVICE_URL must be an http(s) URL")
		}
		sc.URL = u
	case skills.TransportStdio:
		cmd, err := splitCommand(c.SkillCommand)
		if err != nil {
			return sc, fmt.Errorf("SKILL_COMMAND: %w", err)
		}
		if len(cmd) == 0 {
			return sc, fmt.Errorf("SKILL_TRANSPORT=stdio needs SKILL_COMMAND (--skill-command)")
		}
		sc.Command = cmd
	default:
		return sc, fmt.Errorf("SKILL_TRANSPORT %q is not supported (use streamable-http, sse or stdio)", c.SkillTransport)
	}
	switch c.SkillMode {
	case "", skills.ModeAuto, skills.ModeSkillService, skills.ModePlain:
	default:
		return sc, fmt.Errorf("SKILL_MODE %q is not supported (use auto, skill-service or plain)", c.SkillMode)
	}
	if c.SkillOAuthClientID != "" {
		cc := &skills.ClientCredentials{ClientID: c.SkillOAuthClientID, ClientSecret: c.skillOAuthSecret,
			Scopes: strings.Fields(c.SkillOAuthScopes)}
		if c.SkillOAuthKeyFile != "" {
			key, err := os.ReadFile(c.SkillOAuthKeyFile)
			if err != nil {
				return sc, fmt.Errorf("SKILL_OAUTH_KEY_FILE: %w", err)
			}
			cc.PrivateKeyPEM = key
		}
		sc.OAuth = cc
	}
	if c.SkillOAuthFile != "" {
		byTenant, err := oauthFile(c.SkillOAuthFile)
		if err != nil {
			return sc, err
		}
		sc.OAuthByTenant = byTenant
	}
	if _, err := skills.NewClient(sc); err != nil { // validation only: a Client holds nothing until used
		return sc, err
	}
	return sc, nil
}

// splitCommand splits a command line: a JSON array of strings, or words
// separated by spaces (no quoting; use the JSON form for arguments with
// spaces).
func splitCommand(line string) ([]string, error) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "[") {
		var words []string
		if err := json.Unmarshal([]byte(line), &words); err != nil {
			return nil, fmt.Errorf("not a JSON array of strings: %w", err)
		}
		return words, nil
	}
	return strings.Fields(line), nil
}

// DefaultConfig is the configuration of a process started without flags:
// the defaults, with the environment's overrides.
func DefaultConfig() *Config {
	c := &Config{}
	c.Register(flag.NewFlagSet("defaults", flag.ContinueOnError))
	return c
}

// Parse registers the shared flags plus extra on a new flag set named
// name, parses args and validates. --help prints usage and exits 0.
func Parse(name, summary string, args []string, extra func(fs *flag.FlagSet)) *Config {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s: %s\n\nUsage: %s [flags]\n\nFlags:\n", name, summary, name)
		fs.PrintDefaults()
	}
	c := &Config{}
	c.Register(fs)
	if extra != nil {
		extra(fs)
	}
	_ = fs.Parse(args)
	if err := c.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	return c
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// Env returns the environment variable name, or def.
func Env(name, def string) string { return env(name, def) }

// oauthFile reads the OAuth client credentials per tenant of a
// SKILL_OAUTH_CREDENTIALS_FILE: a JSON object from tenant ("*" for any
// other) to {client_id, client_secret or private_key_file, scopes}. The
// file holds secrets: keep it readable by the process only.
func oauthFile(path string) (map[string]*skills.ClientCredentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("SKILL_OAUTH_CREDENTIALS_FILE: %w", err)
	}
	var entries map[string]struct {
		ClientID       string   `json:"client_id"`
		ClientSecret   string   `json:"client_secret"`
		PrivateKeyFile string   `json:"private_key_file"`
		Algorithm      string   `json:"signing_algorithm"`
		Scopes         []string `json:"scopes"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		// The decoder's message quotes no value of the file.
		return nil, fmt.Errorf("SKILL_OAUTH_CREDENTIALS_FILE %s: %w", path, err)
	}
	out := make(map[string]*skills.ClientCredentials, len(entries))
	for tenant, e := range entries {
		if tenant != "*" && !skills.ValidTenant(tenant) {
			return nil, fmt.Errorf("SKILL_OAUTH_CREDENTIALS_FILE: %q is not a tenant id", tenant)
		}
		cc := &skills.ClientCredentials{ClientID: e.ClientID, ClientSecret: e.ClientSecret, Algorithm: e.Algorithm, Scopes: e.Scopes}
		if e.PrivateKeyFile != "" {
			if cc.PrivateKeyPEM, err = os.ReadFile(e.PrivateKeyFile); err != nil {
				return nil, fmt.Errorf("SKILL_OAUTH_CREDENTIALS_FILE: tenant %s: %w", tenant, err)
			}
		}
		out[tenant] = cc
	}
	return out, nil
}

// SecretsKey is the key that seals the webhook tools' secrets: env
// SECRETS_KEY, else the contents of SecretsKeyFile, else none (nil).
func (c *Config) SecretsKey() ([]byte, error) {
	switch {
	case c.secretsKey != "":
		return tools.ParseKey(c.secretsKey)
	case c.SecretsKeyFile != "":
		b, err := os.ReadFile(c.SecretsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("secrets key: %w", err)
		}
		return tools.ParseKey(string(b))
	}
	return nil, nil
}
