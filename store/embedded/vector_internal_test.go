package embedded

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentbus/agentbus/store"
)

// TestMemoryEmbeddingFormsRoundTrip: an embedding is stored in the shorter
// of its two forms (a sparse one for the offline embedder's vectors, a
// dense one for a vector with few zeros) and decodes to the same vector.
func TestMemoryEmbeddingFormsRoundTrip(t *testing.T) {
	vecs, err := store.NewHashEmbedder(1536).Embed(context.Background(), []string{"s1_ids: s1-1, s1-2, s1-3"})
	if err != nil {
		t.Fatal(err)
	}
	dense := []float32{0.5, -0.25, 0, 1, 0.125}
	for _, tc := range []struct {
		name string
		vec  []float32
		sep  byte
	}{
		{"offline embedder", vecs[0], sparseVector},
		{"mostly non-zero", dense, denseVector},
	} {
		m := store.Memory{ID: "t:s:k", Key: "t:s:k", TenantID: "t", SessionID: "s", Scope: store.ScopeSession,
			Text: "x", Embedding: tc.vec, CreatedAt: time.Now().UTC()}
		data, err := encodeMemory(m)
		if err != nil {
			t.Fatal(err)
		}
		doc, vec, ok := bytes.Cut(data, []byte{tc.sep})
		if !ok || bytes.ContainsAny(doc, "\x00\x01") {
			t.Fatalf("%s: not stored in form %d", tc.name, tc.sep)
		}
		if tc.sep == sparseVector && len(vec) >= len(tc.vec) { // a quarter of the dense form
			t.Fatalf("%s: sparse form of %d bytes for %d elements", tc.name, len(vec), len(tc.vec))
		}
		got, err := decodeMemoryValue("k", data, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Embedding, tc.vec) || got.Text != "x" {
			t.Fatalf("%s: decoded %v, want %v", tc.name, got.Embedding, tc.vec)
		}
	}
}

// TestMemoryEmbeddingDecodeRefusesDamage: a stored embedding that cannot
// be what encodeMemory wrote is an error naming the memory, never a
// vector read out of bounds.
func TestMemoryEmbeddingDecodeRefusesDamage(t *testing.T) {
	doc := []byte(`{"id":"t:s:k","key":"t:s:k","tenant_id":"t","scope":"session","text":"x"}`)
	u32 := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
		}
		return b
	}
	for name, tail := range map[string][]byte{
		"dense, not whole floats":   {denseVector, 1, 2, 3},
		"sparse, no dimension":      {sparseVector, 1},
		"sparse, half a pair":       append([]byte{sparseVector}, u32(100, 3)...),
		"sparse, index past end":    append([]byte{sparseVector}, u32(100, 100, 0)...),
		"sparse, longer than dense": append([]byte{sparseVector}, u32(1, 0, 0)...),
	} {
		if _, err := decodeMemoryValue("k", append(slices.Clone(doc), tail...), 1); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
