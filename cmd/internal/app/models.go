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
	fs.StringVar(&m.Default, "model", env("MODEL", "offline"),
		"model of every role: offline, openai:<model>, anthropic:<model> or bedrock:<model> (env MODEL)")
	fs.StringVar(&m.Router, "model-router", env("MODEL_ROUTER", ""), "routing model; default --model (env MODEL_ROUTER)")
	fs.StringVar(&m.Planner, "model-planner", env("MODEL_PLANNER", ""), "planning model; default --model (env MODEL_PLANNER)")
	fs.StringVar(&m.Executor, "model-executor", env("MODEL_EXECUTOR", ""), "executor model; default --model (env MODEL_EXECUTOR)")
	fs.StringVar(&m.Synthesiser, "model-synthesiser", env("MODEL_SYNTHESISER", ""), "answer-writing model; default --model (env MODEL_SYNTHESISER)")
	fs.StringVar(&m.BaseURL, "model-base-url", env("MODEL_BASE_URL", ""),
		"provider endpoint, e.g. a vLLM, Ollama or LiteLLM server's /v1 URL; default the provider's own (env MODEL_BASE_URL)")
	fs.StringVar(&m.KeyFile, "model-api-key-file", env("MODEL_API_KEY_FILE", ""),
		"file holding the provider API key; the key may instead be in env MODEL_API_KEY (env MODEL_API_KEY_FILE)")
	fs.StringVar(&m.Temperature, "model-temperature", env("MODEL_TEMPERATURE", ""), "sampling temperature; default the provider's (env MODEL_TEMPERATURE)")
	fs.StringVar(&m.Aliases, "model-aliases", env("MODEL_ALIASES", ""),
		"agent model names the provider serves, as name=model-id pairs separated by commas; an agent naming another model runs on the role's model (env MODEL_ALIASES)")
	fs.IntVar(&m.MaxTokens, "model-max-tokens", envInt("MODEL_MAX_TOKENS", 4096), "output tokens per model call (env MODEL_MAX_TOKENS)")
	fs.DurationVar(&m.Timeout, "model-timeout", envDuration("MODEL_TIMEOUT", 2*time.Minute), "timeout of one model request attempt (env MODEL_TIMEOUT)")
	fs.IntVar(&m.MaxRetries, "model-max-retries", envInt("MODEL_MAX_RETRIES", 2),
		"retries of a model call on 429, 5xx or a lost connection, with backoff, jitter and Retry-After (env MODEL_MAX_RETRIES)")
	fs.StringVar(&m.Fallback, "model-fallback", env("MODEL_FALLBACK", ""),
		"offline: answer with the offline model while the provider is unavailable, instead of ending the run UNAVAILABLE_DEP (env MODEL_FALLBACK)")
	fs.StringVar(&m.PricesFile, "model-prices", env("MODEL_PRICES_FILE", ""),
		`JSON price table added to the built-in one: {"<model>": {"input": USD/Mtok, "cached_input": …, "output": …}} (env MODEL_PRICES_FILE)`)
	fs.StringVar(&m.Region, "model-region", env("BEDROCK_REGION", ""), "Bedrock AWS region; default the AWS chain's (env BEDROCK_REGION)")
	fs.StringVar(&m.Embedder, "embedder", env("EMBEDDER", provider.Offline),
		"memory embeddings: offline (hashed n-grams) or openai:<model> at --model-base-url (env EMBEDDER)")
	fs.IntVar(&m.EmbeddingDimension, "embedding-dimension", envInt("EMBEDDING_DIMENSION", DefaultEmbeddingDimension),
		"length of the memory embeddings; with the opensearch store it is also the knn_vector dimension (env EMBEDDING_DIMENSION)")
	fs.IntVar(&m.MaxConcurrency, "model-max-concurrency", envInt("MODEL_MAX_CONCURRENCY", DefaultModelConcurrency),
		"model calls in flight to each provider (openai, anthropic, bedrock) from this process; further calls wait. "+
			"Per process: set it to the provider's limit divided by the processes that call it (env MODEL_MAX_CONCURRENCY)")
	m.apiKey = os.Getenv("MODEL_API_KEY")
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
func (m *ModelConfig) aliases() (map[string]string, error) {
	if strings.TrimSpace(m.Aliases) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, pair := range strings.Split(m.Aliases, ",") {
		name, id, ok := strings.Cut(strings.TrimSpace(pair), "=")
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		if !ok || name == "" || id == "" {
			return nil, fmt.Errorf("MODEL_ALIASES %q: each entry must be name=model-id", pair)
		}
		out[name] = id
	}
	return out, nil
}

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
