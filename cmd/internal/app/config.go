package app

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the configuration shared by every agentbus process. Each field
// has a flag and an environment variable; the flag wins.
type Config struct {
	NATSURL         string
	Store           string
	StorePrefix     string
	Model           string
	SkillServiceURL string
	SkillAPIKey     string
	LogLevel        string
	Concurrency     int
	HandleTimeout   time.Duration
	AckWait         time.Duration
	MaxDeliver      int
}

// Register adds the shared flags to fs, with defaults from the environment.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats", env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL (env NATS_URL)")
	fs.StringVar(&c.Store, "store", env("STORE", "embedded"), "storage backend: embedded (env STORE)")
	fs.StringVar(&c.StorePrefix, "store-prefix", env("STORE_PREFIX", ""), "name prefix of the store's buckets and indices (env STORE_PREFIX)")
	fs.StringVar(&c.Model, "model", env("MODEL", "offline"), "model provider: offline (env MODEL)")
	fs.StringVar(&c.SkillServiceURL, "skills", env("SKILL_SERVICE_URL", "http://127.0.0.1:7070/tenants/{tenant}/mcp"),
		"Skill Service MCP URL; {tenant} is replaced by the run's tenant (env SKILL_SERVICE_URL)")
	c.SkillAPIKey = os.Getenv("SKILL_SERVICE_API_KEY") // secrets come from the environment only
	fs.StringVar(&c.LogLevel, "log-level", env("LOG_LEVEL", "info"), "log level: debug, info, warn, error (env LOG_LEVEL)")
	fs.IntVar(&c.Concurrency, "concurrency", envInt("CONCURRENCY", 16), "messages handled at once per process (env CONCURRENCY)")
	fs.DurationVar(&c.HandleTimeout, "handle-timeout", envDuration("HANDLE_TIMEOUT", 5*time.Minute), "deadline of one message's work (env HANDLE_TIMEOUT)")
	fs.DurationVar(&c.AckWait, "ack-wait", envDuration("ACK_WAIT", 30*time.Second), "JetStream ack wait of the role consumers (env ACK_WAIT)")
	fs.IntVar(&c.MaxDeliver, "max-deliver", envInt("MAX_DELIVER", 5), "deliveries before a message is dead-lettered (env MAX_DELIVER)")
}

// Validate checks the values the process cannot run with.
func (c *Config) Validate() error {
	if c.Store != "embedded" {
		return fmt.Errorf("store %q is not supported (use embedded)", c.Store)
	}
	if c.Model != "offline" {
		return fmt.Errorf("model %q is not supported (use offline)", c.Model)
	}
	if !strings.Contains(c.SkillServiceURL, "{tenant}") {
		return fmt.Errorf("SKILL_SERVICE_URL must contain {tenant}")
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency must be at least 1")
	}
	return nil
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
