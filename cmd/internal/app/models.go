package app

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/provider"
	"github.com/agentbus/agentbus/metrics"
	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/tracing"
)

// DefaultEmbeddingDimension is the embedding length of seed 000's
// agent_memory mapping.
const DefaultEmbeddingDimension = 1536

// ModelConfig selects the model of each role and how to reach it. The API
// key comes from the environment (MODEL_API_KEY) or a file, never a flag,
// so it does not show in a process listing; with neither, each provider's
// SDK reads its own variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, the AWS
// credential chain).
type ModelConfig struct {
	Default     string // MODEL: offline, openai:<id>, anthropic:<id>, bedrock:<id>
	Router      string // MODEL_ROUTER; "" uses Default
	Planner     string // MODEL_PLANNER
	Executor    string // MODEL_EXECUTOR
	Synthesiser string // MODEL_SYNTHESISER
	BaseURL     string
	KeyFile     string
	Temperature string // "" leaves the provider default
	// Aliases maps the model names agents may ask for to the provider's
	// model ids ("fast=gpt-4.1-mini,smart=gpt-4.1"): an agent's model is
	// used when it is the role's configured model or listed here, the
	// role's model otherwise.
	Aliases    string
	MaxTokens  int
	Timeout    time.Duration
	MaxRetries int
	Fallback   string // "" or offline
	PricesFile string
	Region     string
	// Embedder embeds memory for the semantic query: offline (hashed
	// n-grams) or openai:<model>, with EmbeddingDimension dimensions.
	Embedder           string
	EmbeddingDimension int
	// MaxConcurrency bounds the calls in flight to each provider from
	// this process (MODEL_MAX_CONCURRENCY).
	MaxConcurrency int
	apiKey         string
}

// Register adds the model flags to fs, with defaults from the environment.
func (m *ModelConfig) Register(fs *flag.FlagSet) {
	envModel.Bind(fs, &m.Default)
	envModelRouter.Bind(fs, &m.Router)
	envModelPlanner.Bind(fs, &m.Planner)
	envModelExecutor.Bind(fs, &m.Executor)
	envModelSynthesiser.Bind(fs, &m.Synthesiser)
	envModelBaseURL.Bind(fs, &m.BaseURL)
	envModelAPIKeyFile.Bind(fs, &m.KeyFile)
	envModelTemperature.Bind(fs, &m.Temperature)
	envModelAliases.Bind(fs, &m.Aliases)
	envModelMaxTokens.Bind(fs, &m.MaxTokens)
	envModelTimeout.Bind(fs, &m.Timeout)
	envModelMaxRetries.Bind(fs, &m.MaxRetries)
	envModelFallback.Bind(fs, &m.Fallback)
	envModelPrices.Bind(fs, &m.PricesFile)
	envBedrockRegion.Bind(fs, &m.Region)
	envEmbedder.Bind(fs, &m.Embedder)
	envEmbeddingDimension.Bind(fs, &m.EmbeddingDimension)
	envModelConcurrency.Bind(fs, &m.MaxConcurrency)
	m.apiKey = envModelAPIKey.Value()
}

// DefaultModelConcurrency is the default bound of the calls in flight to
// one provider from one process.
const DefaultModelConcurrency = 32

// Validate checks every spec and setting, and reads the key file.
func (m *ModelConfig) Validate() error {
	for _, r := range m.roles() {
		if _, _, err := provider.Parse(r.spec); err != nil {
			return fmt.Errorf("%s: %w", r.env, err)
		}
	}
	if m.Fallback != "" && m.Fallback != provider.Offline {
		return fmt.Errorf("MODEL_FALLBACK %q is not supported (use offline, or leave it empty)", m.Fallback)
	}
	if _, err := m.temperature(); err != nil {
		return err
	}
	if m.MaxConcurrency < 0 {
		return fmt.Errorf("MODEL_MAX_CONCURRENCY must be at least 1 (0 takes the default)")
	}
	if m.MaxTokens < 1 {
		return fmt.Errorf("MODEL_MAX_TOKENS must be at least 1")
	}
	if m.KeyFile != "" {
		b, err := os.ReadFile(m.KeyFile)
		if err != nil {
			return fmt.Errorf("MODEL_API_KEY_FILE: %w", err)
		}
		m.apiKey = strings.TrimSpace(string(b))
	}
	if _, err := llm.LoadPrices(m.PricesFile); err != nil {
		return fmt.Errorf("MODEL_PRICES_FILE: %w", err)
	}
	m.Embedder = cmp.Or(m.Embedder, provider.Offline)
	if name, _, err := provider.Parse(m.Embedder); err != nil || (name != provider.Offline && name != provider.OpenAI) {
		return fmt.Errorf("EMBEDDER %q: use offline or openai:<model>", m.Embedder)
	}
	m.EmbeddingDimension = cmp.Or(m.EmbeddingDimension, DefaultEmbeddingDimension)
	if m.EmbeddingDimension < 1 || m.EmbeddingDimension > 16000 {
		return fmt.Errorf("EMBEDDING_DIMENSION must be from 1 to 16000")
	}
	return nil
}

// OpenEmbedder opens the memory embedder.
func (m *ModelConfig) OpenEmbedder() (store.Embedder, error) {
	return provider.OpenEmbedder(cmp.Or(m.Embedder, provider.Offline), llm.ProviderConfig{
		BaseURL: m.BaseURL, APIKey: m.apiKey, Timeout: m.Timeout, MaxRetries: m.MaxRetries},
		cmp.Or(m.EmbeddingDimension, DefaultEmbeddingDimension))
}

// Summary names each role's model, for a start-up banner.
func (m *ModelConfig) Summary() string {
	rs := m.roles()
	s := fmt.Sprintf("router %s, planner %s, executor %s, synthesiser %s", rs[1].spec, rs[2].spec, rs[3].spec, rs[4].spec)
	if m.Fallback != "" {
		s += ", fallback " + m.Fallback
	}
	return s
}

type roleSpec struct{ env, spec string }

// roles lists each role's spec, defaulted to MODEL.
func (m *ModelConfig) roles() []roleSpec {
	or := func(s string) string {
		if s == "" {
			return m.Default
		}
		return s
	}
	return []roleSpec{{"MODEL", m.Default}, {"MODEL_ROUTER", or(m.Router)}, {"MODEL_PLANNER", or(m.Planner)},
		{"MODEL_EXECUTOR", or(m.Executor)}, {"MODEL_SYNTHESISER", or(m.Synthesiser)}}
}

// aliases parses MODEL_ALIASES.
func (m *ModelConfig) aliases() (map[string]string, error) { return parseAliases(m.Aliases) }

func (m *ModelConfig) temperature() (*float64, error) {
	if m.Temperature == "" {
		return nil, nil
	}
	t, err := strconv.ParseFloat(m.Temperature, 64)
	if err != nil || t < 0 || t > 2 {
		return nil, fmt.Errorf("MODEL_TEMPERATURE %q must be a number from 0 to 2", m.Temperature)
	}
	return &t, nil
}

// Models are the models of the roles.
type Models struct {
	Router, Planner, Executor, Synthesiser llm.Model
}

// Open opens each role's model; roles with the same spec share one.
func (m *ModelConfig) Open(ctx context.Context) (Models, error) {
	if m.Default == "" {
		m.Default = provider.Offline
	}
	temp, err := m.temperature()
	if err != nil {
		return Models{}, err
	}
	prices, err := llm.LoadPrices(m.PricesFile)
	if err != nil {
		return Models{}, err
	}
	aliases, err := m.aliases()
	if err != nil {
		return Models{}, err
	}
	opts := provider.Options{Fallback: m.Fallback, Prices: prices, Provider: llm.ProviderConfig{
		BaseURL: m.BaseURL, APIKey: m.apiKey, Temperature: temp, Models: aliases, MaxTokens: m.MaxTokens, Timeout: m.Timeout,
		MaxRetries: m.MaxRetries, Region: m.Region},
		Concurrency: &provider.Concurrency{Max: cmp.Or(m.MaxConcurrency, DefaultModelConcurrency), OnWait: metrics.ModelSlotWait}}
	if opts.Provider.MaxRetries == 0 {
		opts.Provider.MaxRetries = -1 // 0 means none here; the providers read 0 as their default
	}
	opened := map[string]llm.Model{}
	open := func(spec string) (llm.Model, error) {
		if mod, ok := opened[spec]; ok {
			return mod, nil
		}
		mod, err := provider.Open(ctx, spec, opts)
		if err == nil && tracing.Enabled() {
			mod = tracing.Model(mod)
		}
		opened[spec] = mod
		return mod, err
	}
	rs := m.roles()
	var out Models
	for i, dst := range []*llm.Model{&out.Router, &out.Planner, &out.Executor, &out.Synthesiser} {
		if *dst, err = open(rs[i+1].spec); err != nil {
			return Models{}, fmt.Errorf("%s: %w", rs[i+1].env, err)
		}
	}
	return out, nil
}
