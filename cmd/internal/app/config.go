package app

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"

	"github.com/agentbus/agentbus/egress"
	"github.com/agentbus/agentbus/llm/provider"
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
	NATSUser     string
	NATSPassword string
	natsPassFile string
	Store        string
	StorePrefix  string
	ExecutionTTL time.Duration // how long the store keeps execution records
	// EventRetention is how long the store keeps trace events.
	EventRetention time.Duration
	// MemoryRetention is how long memories of each scope are kept.
	MemoryRetention store.MemoryRetention
	// RecallTopK and RecallTokens bound the memories a run recalls when
	// it starts (0 top k: none).
	RecallTopK   int
	RecallTokens int
	// DefaultDailyTokens is the daily token quota of the tenants the
	// budget policy gives none; -1 picks it from the models
	// (DailyTokens).
	DefaultDailyTokens int
	Models             ModelConfig
	SkillServiceURL    string
	SkillAPIKey        string
	SkillTransport     string // streamable-http (default), sse or stdio
	SkillMode          string // auto (default), skill-service or plain
	SkillCommand       string // stdio server command line: words split on spaces, or a JSON array
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
	// EgressAllow is the egress policy's allow-list (EGRESS_ALLOW): what
	// webhook tools and the OAuth requests to URLs a Skill Service names
	// may reach in the ranges the policy refuses by default.
	EgressAllow string
	// inProcess, set by the all-in-one, is its embedded server: the
	// process connects to it in memory rather than over loopback TCP.
	inProcess nats.InProcessConnProvider
}

// Register adds the shared flags to fs, with defaults from the environment
// (vars.go declares each variable).
func (c *Config) Register(fs *flag.FlagSet) {
	EnvNATSURL.Bind(fs, &c.NATSURL)
	EnvNATSUser.Bind(fs, &c.NATSUser)
	envNATSPasswordFile.Bind(fs, &c.natsPassFile)
	c.NATSPassword = EnvNATSPassword.Value()
	envMetricsAddr.Bind(fs, &c.MetricsAddr)
	c.RegisterStack(fs)
}

// RegisterStack adds every shared flag but the NATS URL, for the
// all-in-one, which runs its own NATS server.
func (c *Config) RegisterStack(fs *flag.FlagSet) {
	envStore.Bind(fs, &c.Store)
	envExecutionTTL.Bind(fs, &c.ExecutionTTL)
	envEventRetention.Bind(fs, &c.EventRetention)
	envMemoryTTLSession.Bind(fs, &c.MemoryRetention.Session)
	envMemoryTTLUser.Bind(fs, &c.MemoryRetention.User)
	envMemoryTTLTenant.Bind(fs, &c.MemoryRetention.Tenant)
	envRecallTopK.Bind(fs, &c.RecallTopK)
	envRecallTokens.Bind(fs, &c.RecallTokens)
	envDefaultDailyTokens.Bind(fs, &c.DefaultDailyTokens)
	envStorePrefix.Bind(fs, &c.StorePrefix)
	c.Models.Register(fs)
	EnvSkillServiceURL.Bind(fs, &c.SkillServiceURL)
	c.SkillAPIKey = envSkillAPIKey.Value() // secrets come from the environment only
	EnvSkillTransport.Bind(fs, &c.SkillTransport)
	envSkillMode.Bind(fs, &c.SkillMode)
	envSkillOAuthClientID.Bind(fs, &c.SkillOAuthClientID)
	c.skillOAuthSecret = envSkillOAuthSecret.Value()
	envSkillOAuthKeyFile.Bind(fs, &c.SkillOAuthKeyFile)
	envSkillOAuthFile.Bind(fs, &c.SkillOAuthFile)
	envSkillOAuthScopes.Bind(fs, &c.SkillOAuthScopes)
	envSkillCommand.Bind(fs, &c.SkillCommand)
	envSkillTimeout.Bind(fs, &c.SkillTimeout)
	envBreakerFailures.Bind(fs, &c.BreakerFailures)
	envBreakerCooldown.Bind(fs, &c.BreakerCooldown)
	envRepeatCallLimit.Bind(fs, &c.RepeatCallLimit)
	envContextTokens.Bind(fs, &c.ContextTokens)
	envSandboxUnsafe.Bind(fs, &c.SandboxUnsafe)
	envAlertWebhook.Bind(fs, &c.AlertWebhook)
	c.alertSecret = envAlertSecret.Value()
	envSecretsKeyFile.Bind(fs, &c.SecretsKeyFile)
	c.secretsKey = envSecretsKey.Value()
	envEgressAllow.Bind(fs, &c.EgressAllow)
	EnvLogLevel.Bind(fs, &c.LogLevel)
	envConcurrency.Bind(fs, &c.Concurrency)
	envMaxTurns.Bind(fs, &c.MaxTurns)
	envHandleTimeout.Bind(fs, &c.HandleTimeout)
	envAckWait.Bind(fs, &c.AckWait)
	envMaxDeliver.Bind(fs, &c.MaxDeliver)
	envReplicas.Bind(fs, &c.Replicas)
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
	if _, err := c.EgressPolicy(); err != nil {
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
	if r := c.MemoryRetention; c.EventRetention < 0 || r.Session < 0 || r.User < 0 || r.Tenant < 0 {
		return fmt.Errorf("event-retention and the memory-ttl settings must not be negative")
	}
	if c.RecallTopK < 0 || c.RecallTopK > 100 || c.RecallTokens < 1 {
		return fmt.Errorf("recall-top-k must be from 0 to 100, recall-tokens at least 1")
	}
	if c.DefaultDailyTokens < -1 {
		return fmt.Errorf("default-daily-tokens must be -1 (by model), 0 (none) or a number of tokens")
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

// EgressPolicy is the egress policy of webhook tools and of the OAuth
// requests to URLs a Skill Service names: the default refused ranges,
// opened by EGRESS_ALLOW.
func (c *Config) EgressPolicy() (*egress.Policy, error) {
	p, err := egress.Parse(c.EgressAllow)
	if err != nil {
		return nil, fmt.Errorf("EGRESS_ALLOW: %w", err)
	}
	return p, nil
}

// SkillsConfig is the skill client's configuration: the URL for the HTTP
// transports, the parsed command for stdio, the egress policy. It reports
// what skills.NewClient would refuse, naming the setting.
func (c *Config) SkillsConfig() (skills.Config, error) {
	sc := skills.Config{Transport: c.SkillTransport, Mode: c.SkillMode, APIKey: c.SkillAPIKey}
	policy, err := c.EgressPolicy()
	if err != nil {
		return sc, err
	}
	sc.Egress = policy
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
// name, parses args and validates. --help prints usage and exits 0; a
// malformed flag or environment variable, or a configuration the process
// cannot run with, exits ExitUsage naming it.
func Parse(name, summary string, args []string, extra func(fs *flag.FlagSet)) *Config {
	c, err := ParseConfig(name, summary, args, extra)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(ReportUsage(os.Stderr, name, err))
	}
	return c
}

// ParseConfig is Parse returning the error instead of exiting:
// flag.ErrHelp after --help printed the usage, *ParseErrors (joined) for
// malformed values, or what Validate refused.
func ParseConfig(name, summary string, args []string, extra func(fs *flag.FlagSet)) (*Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s: %s\n\nUsage: %s [flags]\n\nFlags:\n", name, summary, name)
		fs.PrintDefaults()
	}
	c := &Config{}
	c.Register(fs)
	if extra != nil {
		extra(fs)
	}
	if err := CheckFlags(fs, args); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

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

// SeedDailyTokens is seed 002's default daily token quota of a tenant.
const SeedDailyTokens = 100_000

// DailyTokens is the daily token quota of the tenants the budget policy
// gives none: DefaultDailyTokens, or with -1 the seed's 100,000 when a
// role's model is a real one and none with only the offline model, which
// costs nothing.
func (c Config) DailyTokens() int {
	if c.DefaultDailyTokens >= 0 {
		return c.DefaultDailyTokens
	}
	for _, r := range c.Models.roles()[1:] {
		if r.spec != provider.Offline {
			return SeedDailyTokens
		}
	}
	return 0
}
