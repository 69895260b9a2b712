package llm

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// Price is a model's price in USD per million tokens. Cached input tokens
// are billed at CachedInput instead of Input.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
}

// Prices maps model ids (or id prefixes) to prices.
type Prices map[string]Price

//go:embed prices.json
var defaultPrices []byte

// DefaultPrices returns the built-in price table.
func DefaultPrices() Prices {
	p, err := parsePrices(defaultPrices)
	if err != nil {
		panic(err)
	}
	return p
}

// LoadPrices returns the built-in table with the entries of the JSON file
// at path added or replaced ({"model": {"input": …, "cached_input": …,
// "output": …}}). An empty path returns the built-in table.
func LoadPrices(path string) (Prices, error) {
	p := DefaultPrices()
	if path == "" {
		return p, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llm: prices: %w", err)
	}
	extra, err := parsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("llm: prices %s: %w", path, err)
	}
	for k, v := range extra {
		p[k] = v
	}
	return p, nil
}

func parsePrices(b []byte) (Prices, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	p := Prices{}
	for k, v := range raw {
		if strings.HasPrefix(k, "_") {
			continue
		}
		var pr Price
		dec := json.NewDecoder(strings.NewReader(string(v)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pr); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if pr.Input < 0 || pr.CachedInput < 0 || pr.Output < 0 {
			return nil, fmt.Errorf("%s: negative price", k)
		}
		p[k] = pr
	}
	return p, nil
}

// Lookup finds model's price: the entry named exactly, else the longest
// entry that prefixes the id; a region or vendor prefix ("us.", in Bedrock
// ids such as us.anthropic.claude-…) is tried away too.
func (p Prices) Lookup(model string) (Price, bool) {
	for id := model; id != ""; {
		if pr, ok := p[id]; ok {
			return pr, true
		}
		best, bestLen := Price{}, 0
		for k, pr := range p {
			if len(k) > bestLen && strings.HasPrefix(id, k) {
				best, bestLen = pr, len(k)
			}
		}
		if bestLen > 0 {
			return best, true
		}
		_, rest, ok := strings.Cut(id, ".")
		if !ok {
			break
		}
		id = rest
	}
	return Price{}, false
}

// Cost prices u for model; an unknown model costs 0.
func (p Prices) Cost(model string, u Usage) float64 {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0
	}
	cached := min(u.CachedInputTokens, u.InputTokens)
	return (float64(u.InputTokens-cached)*pr.Input + float64(cached)*pr.CachedInput + float64(u.OutputTokens)*pr.Output) / 1e6
}
