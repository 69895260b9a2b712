package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/kvcas"
	"github.com/agentbus/agentbus/store"
)

// primaryTerm is the constant PrimaryTerm of every embedded Version.
const primaryTerm = 1

func versionOf(rev uint64) store.Version {
	return store.Version{SeqNo: int64(rev), PrimaryTerm: primaryTerm}
}

// PutMemory validates m and writes it under m.Key. If m.Version is zero the
// write is unconditional (upsert). Otherwise it succeeds only if the stored
// revision equals m.Version.SeqNo, and fails with store.ErrConflict if the
// document changed or does not exist; PrimaryTerm is ignored. It returns m
// with its new Version. A schema violation returns *store.SchemaError and
// writes nothing.
func (s *Store) PutMemory(ctx context.Context, m store.Memory) (store.Memory, error) {
	data, err := encodeMemory(m)
	if err != nil {
		return store.Memory{}, err
	}
	key := escape(m.Key)
	var rev uint64
	if m.Version.IsZero() {
		rev, err = s.memory.Put(ctx, key, data)
	} else {
		if m.Version.SeqNo <= 0 {
			return store.Memory{}, fmt.Errorf("embedded: memory %q: version %d: %w", m.Key, m.Version.SeqNo, store.ErrConflict)
		}
		rev, err = s.memory.Update(ctx, key, data, uint64(m.Version.SeqNo))
		if kvcas.IsConflict(err) {
			return store.Memory{}, fmt.Errorf("embedded: memory %q: version %d: %w", m.Key, m.Version.SeqNo, store.ErrConflict)
		}
	}
	if err != nil {
		return store.Memory{}, fmt.Errorf("embedded: put memory %q: %w", m.Key, err)
	}
	m.Version = versionOf(rev)
	return m, nil
}

// CreateMemory validates m and writes it only if no document is stored
// under m.Key; otherwise it fails with store.ErrConflict. m.Version is
// ignored. It returns m with its new Version.
func (s *Store) CreateMemory(ctx context.Context, m store.Memory) (store.Memory, error) {
	data, err := encodeMemory(m)
	if err != nil {
		return store.Memory{}, err
	}
	rev, err := s.memory.Create(ctx, escape(m.Key), data)
	if kvcas.IsConflict(err) {
		return store.Memory{}, fmt.Errorf("embedded: memory %q exists: %w", m.Key, store.ErrConflict)
	}
	if err != nil {
		return store.Memory{}, fmt.Errorf("embedded: create memory %q: %w", m.Key, err)
	}
	m.Version = versionOf(rev)
	return m, nil
}

// GetMemory returns the memory stored under key with its Version, or
// store.ErrNotFound.
func (s *Store) GetMemory(ctx context.Context, key string) (store.Memory, error) {
	if key == "" {
		return store.Memory{}, fmt.Errorf("embedded: empty memory key: %w", store.ErrInvalidArgument)
	}
	e, err := getEntry(ctx, s.memory, escape(key), fmt.Sprintf("memory %q", key))
	if err != nil {
		return store.Memory{}, err
	}
	return decodeMemory(e)
}

// QueryMemory returns the TopK memories of q.TenantID (further filtered by
// q.Scope and q.UserID when set) most similar to q.Vector by exact cosine
// similarity, best first; ties are broken by key. Memories without an
// embedding, or with one of a different dimension, are never returned. It
// scans the whole bucket.
func (s *Store) QueryMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("embedded: memory query without tenant: %w", store.ErrInvalidArgument)
	}
	if len(q.Vector) == 0 {
		return nil, fmt.Errorf("embedded: memory query without vector: %w", store.ErrInvalidArgument)
	}
	topK := q.TopK
	if topK <= 0 {
		topK = store.DefaultTopK
	}
	var hits []store.MemoryHit
	err := scan(ctx, s.memory, func(e jetstream.KeyValueEntry) error {
		m, err := decodeMemory(e)
		if err != nil {
			return err
		}
		if m.TenantID != q.TenantID ||
			q.Scope != "" && m.Scope != q.Scope ||
			q.UserID != "" && m.UserID != q.UserID ||
			len(m.Embedding) != len(q.Vector) {
			return nil
		}
		hits = append(hits, store.MemoryHit{Memory: m, Score: store.Cosine(q.Vector, m.Embedding)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: query memory: %w", err)
	}
	slices.SortFunc(hits, func(a, b store.MemoryHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if len(hits) > topK {
		hits = hits[:topK]
	}
	return hits, nil
}

// How the embedded store keeps an agent_memory document: its JSON without
// the embedding, then, when it has one, a zero byte and the embedding as
// little-endian float32s. A vector of decimals (or of base64) costs more to
// format, scan and parse than the rest of a hop; JSON never holds a raw zero
// byte, so the split is unambiguous, and documents stored as plain JSON
// with a decimal "embedding" still decode.
func encodeMemory(m store.Memory) ([]byte, error) {
	vec := m.Embedding
	m.Embedding = nil
	data, err := store.Encode(store.IndexMemory, m)
	if err != nil || len(vec) == 0 {
		return data, err
	}
	data = append(data, 0)
	for _, f := range vec {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("embedded: memory %q: embedding holds %v: %w", m.Key, f, store.ErrSchema)
		}
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
	}
	return data, nil
}

func decodeMemory(e jetstream.KeyValueEntry) (store.Memory, error) {
	doc, vec, split := bytes.Cut(e.Value(), []byte{0})
	var m store.Memory
	if err := json.Unmarshal(doc, &m); err != nil {
		return store.Memory{}, fmt.Errorf("embedded: decode memory %s: %w", e.Key(), err)
	}
	if split {
		if len(vec)%4 != 0 {
			return store.Memory{}, fmt.Errorf("embedded: decode memory %s: %d embedding bytes", e.Key(), len(vec))
		}
		m.Embedding = make([]float32, len(vec)/4)
		for i := range m.Embedding {
			m.Embedding[i] = math.Float32frombits(binary.LittleEndian.Uint32(vec[4*i:]))
		}
	}
	m.Version = versionOf(e.Revision())
	return m, nil
}
