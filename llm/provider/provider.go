// Package provider opens a model from a "provider:model" spec: offline,
// openai:<model> (any OpenAI-compatible server), anthropic:<model> or
// bedrock:<model>. Every model it returns is Metered (latency, call count,
// cost from the price table) and, with a fallback, wrapped so that the
// offline model answers while the provider is unavailable.
package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/anthropic"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/llm/openai"
	"github.com/agentbus/agentbus/store"
)

// Provider names.
const (
	Offline   = "offline"
	OpenAI    = "openai"
	Anthropic = "anthropic"
	Bedrock   = "bedrock"
)

// ErrSpec marks a model spec that cannot be opened.
var ErrSpec = errors.New("provider: invalid model spec")

// Parse splits a spec into provider and model id: "offline", or
// "openai:<model>", "anthropic:<model>", "bedrock:<model>".
func Parse(spec string) (name, model string, err error) {
	name, model, _ = strings.Cut(strings.TrimSpace(spec), ":")
	switch name {
	case Offline:
		if model != "" {
			return "", "", fmt.Errorf("%w: %q: offline takes no model id", ErrSpec, spec)
		}
		return name, "", nil
	case OpenAI, Anthropic, Bedrock:
		if model == "" {
			return "", "", fmt.Errorf("%w: %q: name the model, as in %s:<model id>", ErrSpec, spec, name)
		}
		return name, model, nil
	}
	return "", "", fmt.Errorf("%w: %q: use offline, openai:<model>, anthropic:<model> or bedrock:<model>", ErrSpec, spec)
}

// Options are the settings every opened model shares.
type Options struct {
	// Provider carries the connection settings; its Model is ignored (the
	// spec names the model).
	Provider llm.ProviderConfig
	// Fallback is "" or "offline": the model that answers while the
	// provider is unavailable.
	Fallback string
	Prices   llm.Prices
	// Concurrency, when set, bounds the calls in flight per provider
	// (openai, anthropic, bedrock) across every model it opens.
	Concurrency *Concurrency
}

// Open returns the model spec names, metered, with the fallback if set.
func Open(ctx context.Context, spec string, o Options) (llm.Model, error) {
	name, id, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	if o.Prices == nil {
		o.Prices = llm.DefaultPrices()
	}
	off := llm.Metered{Model: offline.New(), Prices: o.Prices}
	if name == Offline {
		return off, nil
	}
	pc := o.Provider
	pc.Model = id
	var m llm.Model
	switch name {
	case OpenAI:
		m, err = openai.New(pc)
	case Anthropic:
		m, err = anthropic.New(pc)
	case Bedrock:
		m, err = anthropic.NewBedrock(ctx, pc)
	}
	if err != nil {
		return nil, fmt.Errorf("provider: %s: %w", spec, err)
	}
	if o.Concurrency != nil {
		m = llm.Limited{Model: m, Slots: o.Concurrency.For(name)}
	}
	metered := llm.Metered{Model: m, Prices: o.Prices, ID: id}
	switch o.Fallback {
	case "":
		return metered, nil
	case Offline:
		return llm.Fallback{Primary: metered, Secondary: off}, nil
	}
	return nil, fmt.Errorf("%w: fallback %q: only offline is supported", ErrSpec, o.Fallback)
}

// OpenEmbedder returns the embedder spec names: "offline" (the hashed
// n-gram embedder) or "openai:<model>" (an OpenAI-compatible embeddings
// endpoint), producing vectors of dim dimensions.
func OpenEmbedder(spec string, pc llm.ProviderConfig, dim int) (store.Embedder, error) {
	name, id, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	switch name {
	case Offline:
		return store.NewHashEmbedder(dim), nil
	case OpenAI:
		pc.Model = id
		return openai.NewEmbedder(pc, dim)
	}
	return nil, fmt.Errorf("%w: %q: embeddings come from offline or openai:<model>", ErrSpec, spec)
}

// Concurrency bounds the model calls in flight to each provider from one
// process: every model Open makes with it shares its provider's Max
// slots, whatever the model id or role. Waiting callers honour their
// context. OnWait, when set, is told of each wait (see llm.Slots).
type Concurrency struct {
	Max    int
	OnWait func(provider string, waited time.Duration)

	mu    sync.Mutex
	slots map[string]*llm.Slots
}

// For returns the provider's slots.
func (c *Concurrency) For(provider string) *llm.Slots {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots == nil {
		c.slots = map[string]*llm.Slots{}
	}
	s, ok := c.slots[provider]
	if !ok {
		s = llm.NewSlots(provider, c.Max)
		s.OnWait = c.OnWait
		c.slots[provider] = s
	}
	return s
}
