package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/events"
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
	key := memoryKey(m.Key)
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
	rev, err := s.memory.Create(ctx, memoryKey(m.Key), data)
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
	e, err := getEntry(ctx, s.memory, memoryKey(key), fmt.Sprintf("memory %q", key))
	if err != nil {
		return store.Memory{}, err
	}
	return decodeMemory(e)
}

// QueryMemory returns the TopK memories q matches (store.MemoryQuery)
// most similar to q.Vector by exact cosine similarity, best first; ties
// are broken by key. Memories without an embedding, or with one of a
// different dimension, are never returned. A query with Within reads only
// the selected memories, by their keys' prefixes, in one batched request
// (withinMemories); any other scans the whole bucket.
func (s *Store) QueryMemory(ctx context.Context, q store.MemoryQuery) ([]store.MemoryHit, error) {
	if q.TenantID == "" {
		return nil, fmt.Errorf("embedded: memory query without tenant: %w", store.ErrInvalidArgument)
	}
	if len(q.Vector) == 0 {
		return nil, fmt.Errorf("embedded: memory query without vector: %w", store.ErrInvalidArgument)
	}
	if err := q.CheckWithin(); err != nil {
		return nil, err
	}
	topK := q.TopK
	if topK <= 0 {
		topK = store.DefaultTopK
	}
	at := q.Time()
	var hits []store.MemoryHit
	keep := func(m store.Memory) {
		if q.Match(m, at) && len(m.Embedding) == len(q.Vector) {
			hits = append(hits, store.MemoryHit{Memory: m, Score: store.Cosine(q.Vector, m.Embedding)})
		}
	}
	var err error
	if len(q.Within) > 0 {
		err = s.withinMemories(ctx, q, keep)
	} else {
		err = scan(ctx, s.memory, func(e jetstream.KeyValueEntry) error {
			m, err := decodeMemory(e)
			if err == nil {
				keep(m)
			}
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: query memory: %w", err)
	}
	slices.SortFunc(hits, store.CompareHits)
	if len(hits) > topK {
		hits = hits[:topK]
	}
	return hits, nil
}

// withinMemories hands keep every memory under the key prefixes of
// q.Within: one batched direct get of the last value of each key the
// prefixes' filters match (a query that matches nothing costs one
// request and its answer), or, past the server's limit of one batch, a
// watch of those filters.
func (s *Store) withinMemories(ctx context.Context, q store.MemoryQuery, keep func(store.Memory)) error {
	filters := make([]string, len(q.Within))
	for i, sel := range q.Within {
		filters[i] = memoryKey(strings.TrimSuffix(sel.KeyPrefix(q.TenantID), ":")) + ".>"
	}
	bucket := s.memory.Bucket()
	vals, err := events.LastEntries(ctx, s.js, bucket, filters)
	if err == nil {
		for key, v := range vals {
			m, err := decodeMemoryValue(key, v.Value, v.Revision)
			if err != nil {
				return err
			}
			keep(m)
		}
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	w, err := s.memory.WatchFiltered(ctx, filters, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("embedded: watcher closed before initial values were delivered")
			case e == nil:
				return nil
			}
			m, err := decodeMemory(e)
			if err != nil {
				return err
			}
			keep(m)
		}
	}
}

// PruneMemory deletes every memory whose ttl_at is at or before before
// and returns how many it deleted. It scans the whole bucket; a memory
// written again since the scan read it is left alone.
func (s *Store) PruneMemory(ctx context.Context, before time.Time) (int, error) {
	type entry struct {
		key string
		rev uint64
	}
	var expired []entry
	err := scan(ctx, s.memory, func(e jetstream.KeyValueEntry) error {
		m, err := decodeMemory(e)
		if err == nil && m.Expired(before) {
			expired = append(expired, entry{e.Key(), e.Revision()})
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("embedded: prune memory: %w", err)
	}
	n := 0
	for _, e := range expired {
		err := s.memory.Delete(ctx, e.key, jetstream.LastRevision(e.rev))
		switch {
		case kvcas.IsConflict(err):
		case err != nil:
			return n, fmt.Errorf("embedded: prune memory %s: %w", e.key, err)
		default:
			n++
		}
	}
	return n, nil
}

// memoryKey is the bucket key of a memory key: each of its ":"-separated
// parts escaped (an empty part as emptyToken), joined with ".", so the
// keys of a tenant, a user or a session share a subject prefix a filter
// selects (withinMemories).
func memoryKey(key string) string {
	parts := strings.Split(key, ":")
	for i, p := range parts {
		parts[i] = optionalToken(p)
	}
	return strings.Join(parts, ".")
}

// migrateMemoryKeys moves the memories stored under the key of one
// escaped token that earlier versions wrote (a key with ":" in it) to
// their memoryKey. Several processes may run it at once: a memory moved
// already is left as it is.
func (s *Store) migrateMemoryKeys(ctx context.Context) error {
	return scanKeys(ctx, s.memory, "*", func(e jetstream.KeyValueEntry) error {
		key, err := unescape(e.Key())
		if err != nil || !strings.Contains(key, ":") {
			return nil // not an old key: one without ":" is the same either way
		}
		if _, err := s.memory.Create(ctx, memoryKey(key), e.Value()); err != nil && !kvcas.IsConflict(err) {
			return fmt.Errorf("embedded: migrate memory %q: %w", key, err)
		}
		return s.memory.Delete(ctx, e.Key(), jetstream.LastRevision(e.Revision()))
	})
}

// How the embedded store keeps an agent_memory document: its JSON without
// the embedding, then, when it has one, a separator byte and the embedding
// in binary. A vector of decimals (or of base64) costs more to format, scan
// and parse than the rest of a hop; JSON never holds a raw control byte, so
// the split is unambiguous, and documents stored as plain JSON with a
// decimal "embedding" still decode.
//
// The embedding is kept in whichever of two forms is shorter:
//   - dense: a zero byte, then every element as a little-endian float32;
//   - sparse: a one byte, the dimension as a little-endian uint32, then each
//     non-zero element as its index (uint32) and value (float32). The
//     offline embedder sets a few dozen of its 1,536 buckets, so a memory
//     is a few hundred bytes to store and copy instead of 6 KB.
const (
	denseVector  = 0
	sparseVector = 1
)

func encodeMemory(m store.Memory) ([]byte, error) {
	vec := m.Embedding
	m.Embedding = nil
	data, err := store.Encode(store.IndexMemory, m)
	if err != nil || len(vec) == 0 {
		return data, err
	}
	nonZero := 0
	for _, f := range vec {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("embedded: memory %q: embedding holds %v: %w", m.Key, f, store.ErrSchema)
		}
		if f != 0 {
			nonZero++
		}
	}
	if sparse := 4 + 8*nonZero; sparse < 4*len(vec) {
		data = append(slices.Grow(data, 1+sparse), sparseVector)
		data = binary.LittleEndian.AppendUint32(data, uint32(len(vec)))
		for i, f := range vec {
			if f != 0 {
				data = binary.LittleEndian.AppendUint32(data, uint32(i))
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
			}
		}
		return data, nil
	}
	data = append(slices.Grow(data, 1+4*len(vec)), denseVector)
	for _, f := range vec {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
	}
	return data, nil
}

// decodeVector decodes the embedding encodeMemory wrote after separator sep.
func decodeVector(sep byte, vec []byte) ([]float32, error) {
	if sep == denseVector {
		if len(vec)%4 != 0 {
			return nil, fmt.Errorf("%d embedding bytes", len(vec))
		}
		out := make([]float32, len(vec)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(vec[4*i:]))
		}
		return out, nil
	}
	if len(vec) < 4 || (len(vec)-4)%8 != 0 {
		return nil, fmt.Errorf("%d sparse embedding bytes", len(vec))
	}
	// A sparse form is only written when it is shorter than the dense one.
	dim := binary.LittleEndian.Uint32(vec)
	if uint64(dim)*4 <= uint64(len(vec)) {
		return nil, fmt.Errorf("a sparse embedding of dimension %d in %d bytes", dim, len(vec))
	}
	out := make([]float32, dim)
	for p := vec[4:]; len(p) > 0; p = p[8:] {
		i := binary.LittleEndian.Uint32(p)
		if i >= dim {
			return nil, fmt.Errorf("sparse embedding index %d of dimension %d", i, dim)
		}
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4:]))
	}
	return out, nil
}

func decodeMemory(e jetstream.KeyValueEntry) (store.Memory, error) {
	return decodeMemoryValue(e.Key(), e.Value(), e.Revision())
}

// decodeMemoryValue decodes the value stored under key at revision rev.
func decodeMemoryValue(key string, value []byte, rev uint64) (store.Memory, error) {
	doc, vec := value, []byte(nil)
	if i := bytes.IndexAny(value, "\x00\x01"); i >= 0 {
		doc, vec = value[:i], value[i:]
	}
	var m store.Memory
	if err := json.Unmarshal(doc, &m); err != nil {
		return store.Memory{}, fmt.Errorf("embedded: decode memory %s: %w", key, err)
	}
	if len(vec) > 0 {
		e, err := decodeVector(vec[0], vec[1:])
		if err != nil {
			return store.Memory{}, fmt.Errorf("embedded: decode memory %s: %w", key, err)
		}
		m.Embedding = e
	}
	m.Version = versionOf(rev)
	return m, nil
}
