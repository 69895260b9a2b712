package openai

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/agentbus/agentbus/llm"
)

// Embedder embeds texts with an OpenAI-compatible embeddings endpoint.
type Embedder struct {
	client sdk.Client
	cfg    llm.ProviderConfig
	dim    int
}

// NewEmbedder returns an embedder of model cfg.Model producing vectors of
// dim dimensions (sent as the request's dimensions).
func NewEmbedder(cfg llm.ProviderConfig, dim int) (*Embedder, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: no embedding model id")
	}
	if dim <= 0 {
		return nil, fmt.Errorf("openai: embedding dimension %d", dim)
	}
	cfg = cfg.Resolved()
	return &Embedder{client: sdk.NewClient(clientOptions(cfg)...), cfg: cfg, dim: dim}, nil
}

// Dimension is the length of every vector Embed returns.
func (e *Embedder) Dimension() int { return e.dim }

// Embed returns one vector per text, in order.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	resp, err := e.client.Embeddings.New(ctx, sdk.EmbeddingNewParams{
		Model: sdk.EmbeddingModel(e.cfg.Model), Input: sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		Dimensions: param.NewOpt(int64(e.dim)), EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat})
	if err != nil {
		return nil, (&Model{cfg: e.cfg}).failure(ctx, err)
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || int(d.Index) >= len(texts) || len(d.Embedding) != e.dim {
			return nil, fmt.Errorf("openai: %s: embedding %d has %d dimensions, want %d", e.cfg.Model, d.Index, len(d.Embedding), e.dim)
		}
		v := make([]float32, e.dim)
		for i, x := range d.Embedding {
			v[i] = float32(x)
		}
		out[d.Index] = v
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("openai: %s: no embedding for text %d", e.cfg.Model, i)
		}
	}
	return out, nil
}
