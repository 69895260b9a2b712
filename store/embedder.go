package store

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// Embedder turns texts into vectors for similarity search.
type Embedder interface {
	// Embed returns one vector of length Dimension() per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimension is the length of every vector Embed returns.
	Dimension() int
}

// DefaultDimension is the dimension NewHashEmbedder uses when given a
// non-positive one.
const DefaultDimension = 256

// HashEmbedder is an offline, deterministic Embedder based on the hashing
// trick: the lower-cased text is split into word tokens; every token and
// every character 3-gram of " token " is hashed with 64-bit FNV-1a into one
// of Dimension() buckets with a hash-derived sign; the vector is then
// L2-normalised. Texts sharing words or word fragments get similar vectors.
// It is safe for concurrent use.
type HashEmbedder struct {
	dim int
}

var _ Embedder = (*HashEmbedder)(nil)

// NewHashEmbedder returns a HashEmbedder producing vectors of length dim
// (DefaultDimension if dim <= 0).
func NewHashEmbedder(dim int) *HashEmbedder {
	if dim <= 0 {
		dim = DefaultDimension
	}
	return &HashEmbedder{dim: dim}
}

// Dimension returns the vector length.
func (h *HashEmbedder) Dimension() int { return h.dim }

// Embed embeds each text. It only fails if ctx is done.
func (h *HashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = h.embed(text)
	}
	return out, nil
}

func (h *HashEmbedder) embed(text string) []float32 {
	vec := make([]float32, h.dim)
	tokens := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
	for _, tok := range tokens {
		h.add(vec, "w:"+tok, 1)
		runes := []rune(" " + tok + " ")
		for i := 0; i+3 <= len(runes); i++ {
			h.add(vec, "g:"+string(runes[i:i+3]), 0.5)
		}
	}
	normalize(vec)
	return vec
}

// add hashes feature into a signed bucket of vec.
func (h *HashEmbedder) add(vec []float32, feature string, weight float32) {
	f := fnv.New64a()
	_, _ = f.Write([]byte(feature))
	sum := f.Sum64()
	bucket := int(sum % uint64(h.dim))
	if sum>>63 == 1 {
		weight = -weight
	}
	vec[bucket] += weight
}

func normalize(vec []float32) {
	var sq float64
	for _, v := range vec {
		sq += float64(v) * float64(v)
	}
	if sq == 0 {
		return
	}
	inv := 1 / math.Sqrt(sq)
	for i, v := range vec {
		vec[i] = float32(float64(v) * inv)
	}
}

// Cosine returns the cosine similarity of a and b, in [-1, 1]. It returns 0
// when the lengths differ or either vector is empty or all zeros.
func Cosine(a, b []float32) float32 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(dot / (math.Sqrt(na) * math.Sqrt(nb)))
}
