package opensearch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/opensearch-project/opensearch-go/v4/plugins/ism"

	"github.com/agentbus/agentbus/store"
	"github.com/agentbus/agentbus/store/storetest"
)

// The contract: *Store is a storage backend. (Checked here rather than in
// the package so that binaries do not link storetest and testing.)
var _ storetest.Backend = (*Store)(nil)

// nodeConfig is the configuration of the test node: OPENSEARCH_URL
// (comma-separated) and its credentials (OPENSEARCH_USERNAME,
// OPENSEARCH_PASSWORD, OPENSEARCH_CA_FILE, OPENSEARCH_INSECURE_SKIP_VERIFY),
// else the local node of `make opensearch`. (The processes read these
// variables in cmd/internal/app; the package reads no environment.)
func nodeConfig(t *testing.T) Config {
	t.Helper()
	var cfg Config
	for u := range strings.SplitSeq(os.Getenv("OPENSEARCH_URL"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.URLs = append(cfg.URLs, u)
		}
	}
	cfg.Username, cfg.Password, cfg.CAFile = os.Getenv("OPENSEARCH_USERNAME"), os.Getenv("OPENSEARCH_PASSWORD"), os.Getenv("OPENSEARCH_CA_FILE")
	if v := os.Getenv("OPENSEARCH_INSECURE_SKIP_VERIFY"); v != "" {
		var err error
		if cfg.InsecureSkipVerify, err = strconv.ParseBool(v); err != nil {
			t.Fatalf("OPENSEARCH_INSECURE_SKIP_VERIFY=%q: %v", v, err)
		}
	}
	cfg.Dimension = storetest.Dimension
	// Writes wait for a refresh; refresh often so the suite stays fast.
	cfg.RefreshInterval = 50 * time.Millisecond
	return cfg
}

// requireNode fails the test (never skips it) unless the node answers.
func requireNode(t *testing.T, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	oc, err := clientConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("client config: %v", err)
	}
	api, err := opensearchapi.NewClient(opensearchapi.Config{Client: oc})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer api.Client.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := api.Info(ctx, nil)
	if err := check(resp.Inspect().Response, err, "info"); err != nil {
		t.Fatalf("OpenSearch is not reachable at %v: %v\n"+
			"Start the development node with `make opensearch` (deploy/opensearch/run.sh start), "+
			"or point OPENSEARCH_URL at a cluster.", cfg.URLs, err)
	}
}

// uniquePrefix returns an index prefix no other test run uses.
func uniquePrefix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("rand: %v", err)
	}
	return "test" + hex.EncodeToString(b) + "_"
}

// freshConfig returns a node config with a new prefix whose indices,
// template and policy are deleted when t ends.
func freshConfig(t *testing.T) Config {
	t.Helper()
	cfg := nodeConfig(t)
	requireNode(t, cfg)
	cfg.IndexPrefix = uniquePrefix(t)
	t.Cleanup(func() { dropPrefix(t, cfg) })
	return cfg
}

// open returns a Store for cfg, closed when t ends.
func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// dropPrefix deletes everything New created for cfg.IndexPrefix.
func dropPrefix(t *testing.T, cfg Config) {
	s := &Store{cfg: cfg.withDefaults(), names: newNames(cfg.IndexPrefix)}
	oc, err := clientConfig(context.Background(), s.cfg)
	if err == nil {
		s.api, err = opensearchapi.NewClient(opensearchapi.Config{Client: oc})
	}
	if err != nil {
		t.Errorf("cleanup client: %v", err)
		return
	}
	defer s.api.Client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Explicit names: a cluster may forbid wildcard deletes.
	var indices []string
	for _, name := range s.IndexNames() {
		if name != s.names.events && name != s.names.executions {
			indices = append(indices, name)
		}
	}
	get, err := s.api.Indices.Get(ctx, opensearchapi.IndicesGetReq{Indices: []string{s.names.events + "-*", s.names.executions + "-*"}})
	if err := check(get.Inspect().Response, err, "list event indices"); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if get.IndicesGetRespData != nil {
		for name := range *get.IndicesGetRespData {
			indices = append(indices, name)
		}
	}
	del, err := s.api.Indices.Delete(ctx, opensearchapi.IndicesDeleteReq{
		Indices: indices, Params: opensearchapi.IndicesDeleteParams{IgnoreUnavailable: new(true)},
	})
	if err := check(del.Inspect().Response, err, "delete indices"); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, tmpl := range []string{s.names.eventsTemplate, s.names.executions} {
		tdel, err := s.api.IndexTemplate.Delete(ctx, opensearchapi.IndexTemplateDeleteReq{IndexTemplate: tmpl})
		if st := status(tdel.Inspect().Response); st != http.StatusOK && st != http.StatusNotFound {
			t.Errorf("cleanup: delete template %s: %v", tmpl, err)
		}
	}
	if ic, err := ism.NewClient(ism.Config{Client: oc}); err == nil {
		for _, policy := range []string{s.names.eventsPolicy, s.names.executionsPolicy} {
			pdel, err := ic.Policies.Delete(ctx, ism.PoliciesDeleteReq{Policy: policy})
			// 404: no such policy; 400/405: no ISM plugin.
			if st := status(pdel.Inspect().Response); st >= 500 || st == 0 {
				t.Errorf("cleanup: delete ISM policy %s: %v", policy, err)
			}
		}
		_ = ic.Client.Close()
	}
}

func TestContract(t *testing.T) {
	cfg := freshConfig(t)
	// One set of indices for the whole suite (its ids are random); every
	// sub-test gets its own Store, so New runs on existing indices too.
	storetest.Run(t, func(t *testing.T) storetest.Backend { return open(t, cfg) })
}

func TestNewIsIdempotent(t *testing.T) {
	cfg := freshConfig(t)
	a := open(t, cfg)
	b := open(t, cfg) // same prefix: every resource exists already
	ctx := t.Context()
	m := store.Memory{ID: "1", TenantID: "t", Key: "t:s:task:label", Text: "{}", CreatedAt: time.Now().UTC()}
	put, err := a.PutMemory(ctx, m)
	if err != nil {
		t.Fatalf("PutMemory: %v", err)
	}
	got, err := b.GetMemory(ctx, m.Key)
	if err != nil || got.Version != put.Version {
		t.Fatalf("GetMemory via second store = %+v, %v; want version %+v", got.Version, err, put.Version)
	}

	// Another dimension is an incompatible mapping: New refuses it.
	other := cfg
	other.Dimension = cfg.Dimension + 1
	if _, err := New(ctx, other); err == nil {
		t.Fatalf("New with dimension %d on a %d-dimension index succeeded", other.Dimension, cfg.Dimension)
	}
}

func TestMappingsAreStrict(t *testing.T) {
	cfg := freshConfig(t)
	s := open(t, cfg)
	ctx := t.Context()
	resp, err := s.api.Indices.Mapping.Get(ctx, &opensearchapi.MappingGetReq{Indices: s.IndexNames()})
	if err := check(resp.Inspect().Response, err, "get mappings"); err != nil {
		t.Fatal(err)
	}
	type mapping struct {
		Dynamic    string                     `json:"dynamic"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	got := map[string]mapping{}
	for name, idx := range resp.GetIndices() {
		var m mapping
		if err := json.Unmarshal(idx.Mappings, &m); err != nil {
			t.Fatalf("decode mapping of %s: %v", name, err)
		}
		got[name] = m
	}
	if len(got) != len(store.Indexes()) {
		t.Fatalf("mappings of %d indices, want %d: %v", len(got), len(store.Indexes()), keys(got))
	}
	for name, m := range got {
		if m.Dynamic != "strict" {
			t.Errorf("index %s: dynamic %q, want strict", name, m.Dynamic)
		}
	}
	var emb struct {
		Type      string `json:"type"`
		Dimension int    `json:"dimension"`
		Method    struct {
			Engine    string `json:"engine"`
			SpaceType string `json:"space_type"`
		} `json:"method"`
	}
	if err := json.Unmarshal(got[s.names.memory].Properties["embedding"], &emb); err != nil {
		t.Fatalf("decode embedding mapping: %v", err)
	}
	if emb.Type != "knn_vector" || emb.Dimension != cfg.Dimension || emb.Method.Engine != EngineLucene || emb.Method.SpaceType != "cosinesimil" {
		t.Fatalf("embedding mapping %+v", emb)
	}

	// Bypass validation: the cluster itself refuses an unknown field.
	docs := map[string]string{
		s.names.memory:   `{"id":"1","tenant_id":"t","key":"k","text":"x","created_at":"2025-01-01T00:00:00Z","unknown_field":1}`,
		s.names.plans:    `{"plan_id":"p","tenant_id":"t","session_id":"s","status":"pending","steps":[{"step_index":0,"bogus":true}]}`,
		s.names.events:   `{"event_id":"e","tenant_id":"t","event_type":"x","ts":"2025-01-01T00:00:00Z","unknown_field":1}`,
		s.names.souls:    `{"id":"1","tenant_id":"t","persona":{"mood":"x"}}`,
		s.names.sessions: `{"session_id":"s","tenant_id":"t","unknown_field":1}`,
	}
	for index, doc := range docs {
		resp, err := s.api.Index(ctx, opensearchapi.IndexReq{Index: index, DocumentID: "strict", Body: strings.NewReader(doc)})
		if st := status(resp.Inspect().Response); st != http.StatusBadRequest || errorType(err) != "strict_dynamic_mapping_exception" {
			t.Errorf("index %s accepted or mis-refused an unknown field: status %d, %v", index, st, err)
		}
	}
}

func TestBulkItemErrorsSurface(t *testing.T) {
	cfg := freshConfig(t)
	s := open(t, cfg)
	ctx := t.Context()
	good := store.Event{EventID: "good", TenantID: "t", SessionID: "s", EventType: "x", TS: time.Now().UTC()}
	data, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	docs := []bulkDoc{
		{id: "good", routing: "t", source: data},
		{id: "bad", routing: "t", source: []byte(`{"event_id":"bad","tenant_id":"t","event_type":"x","ts":"2025-01-01T00:00:00Z","extra":1}`)},
		{id: "good", routing: "t", source: data}, // repeated: already stored, not an error
	}
	err = s.bulkCreate(ctx, s.names.events, docs)
	var be *BulkError
	if !errors.As(err, &be) {
		t.Fatalf("bulk with a strict-mapping violation: %v, want *BulkError", err)
	}
	if len(be.Items) != 1 || be.Items[0].ID != "bad" || be.Items[0].Status != http.StatusBadRequest ||
		be.Items[0].Type != "strict_dynamic_mapping_exception" {
		t.Fatalf("BulkError items %+v, want only the bad document", be.Items)
	}
	trace, err := s.Trace(ctx, store.TraceQuery{TenantID: "t", SessionID: "s"})
	if err != nil || len(trace) != 1 || trace[0].EventID != "good" {
		t.Fatalf("Trace = %v, %v; want the good event once", eventIDs(trace), err)
	}
	// Appending it again is a no-op, not an error.
	if err := s.AppendEvents(ctx, []store.Event{good}); err != nil {
		t.Fatalf("AppendEvents of a stored event: %v", err)
	}
}

func TestEmbeddingsTheIndexCannotHold(t *testing.T) {
	cfg := freshConfig(t)
	s := open(t, cfg)
	ctx := t.Context()
	m := store.Memory{ID: "1", TenantID: "t", Key: "t:s:task:dim", Text: "{}", CreatedAt: time.Now().UTC()}
	for name, emb := range map[string][]float32{
		"wrong dimension": {1, 2, 3},
		"all zeros":       make([]float32, cfg.Dimension),
	} {
		m.Embedding = emb
		_, err := s.PutMemory(ctx, m)
		var se *store.SchemaError
		if !errors.As(err, &se) || se.Field != "/embedding" {
			t.Errorf("PutMemory with %s embedding: %v, want schema error on /embedding", name, err)
		}
	}
	if _, err := s.GetMemory(ctx, m.Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rejected memory stored: %v", err)
	}

	// Queries: another dimension matches nothing; a zero vector lists the
	// candidates by key with score 0.
	for _, label := range []string{"b", "a"} {
		m := m
		m.Key, m.Embedding = "t:s:task:"+label, make([]float32, cfg.Dimension)
		m.Embedding[0] = 1
		if _, err := s.PutMemory(ctx, m); err != nil {
			t.Fatalf("PutMemory: %v", err)
		}
	}
	hits, err := s.QueryMemory(ctx, store.MemoryQuery{TenantID: "t", Vector: []float32{1, 0, 0}})
	if err != nil || len(hits) != 0 {
		t.Fatalf("QueryMemory of another dimension = %d hits, %v; want none", len(hits), err)
	}
	hits, err = s.QueryMemory(ctx, store.MemoryQuery{TenantID: "t", Vector: make([]float32, cfg.Dimension)})
	if err != nil || len(hits) != 2 || hits[0].Key != "t:s:task:a" || hits[0].Score != 0 || hits[1].Score != 0 {
		t.Fatalf("QueryMemory of a zero vector = %+v, %v; want a then b with score 0", hits, err)
	}
}

func TestTraceAcrossRollover(t *testing.T) {
	cfg := freshConfig(t)
	s := open(t, cfg)
	ctx := t.Context()
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ev := func(id string, sec int) store.Event {
		return store.Event{EventID: id, TenantID: "t", SessionID: "s", EventType: "x", TS: base.Add(time.Duration(sec) * time.Second)}
	}
	if err := s.AppendEvents(ctx, []store.Event{ev("first", 1), ev("same-ts-1", 5)}); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	// What ISM does daily: a new write index from the template.
	rr, err := s.api.Indices.Rollover(ctx, opensearchapi.IndicesRolloverReq{Alias: s.names.events})
	if err := check(rr.Inspect().Response, err, "rollover"); err != nil {
		t.Fatal(err)
	}
	if rr.NewIndex != s.names.events+"-000002" {
		t.Fatalf("rolled over to %q", rr.NewIndex)
	}
	// A repeat of "first" lands in the new index; Trace keeps it once.
	if err := s.AppendEvents(ctx, []store.Event{ev("same-ts-2", 5), ev("first", 1), ev("last", 9)}); err != nil {
		t.Fatalf("AppendEvents after rollover: %v", err)
	}
	trace, err := s.Trace(ctx, store.TraceQuery{TenantID: "t", SessionID: "s"})
	if err != nil {
		t.Fatalf("Trace: %v", err)
	}
	want := []string{"first", "same-ts-1", "same-ts-2", "last"}
	if got := eventIDs(trace); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("trace %v, want %v", got, want)
	}
	// The new backing index got the strict mapping from the template.
	resp, err := s.api.Index(ctx, opensearchapi.IndexReq{Index: s.names.events, Body: strings.NewReader(`{"event_id":"x","unknown_field":1}`)})
	if errorType(err) != "strict_dynamic_mapping_exception" {
		t.Fatalf("new backing index accepted an unknown field: status %d, %v", status(resp.Inspect().Response), err)
	}
	// New after a rollover finds the alias and leaves it alone.
	open(t, cfg)
}

func TestRetentionPolicy(t *testing.T) {
	cfg := freshConfig(t)
	cfg.EventRetention = 7 * 24 * time.Hour
	s := open(t, cfg)
	ctx := t.Context()
	if !s.ISMEnabled() {
		// The integration-test distribution has no ISM plugin and Maven
		// Central does not publish it; prove the fallback instead.
		t.Logf("the node has no %s plugin: retention unmanaged (ISMAuto)", ismPluginName)
		required := cfg
		required.ISM = ISMRequired
		if _, err := New(ctx, required); !errors.Is(err, ErrISMUnavailable) {
			t.Fatalf("New with ISMRequired on a node without ISM: %v, want ErrISMUnavailable", err)
		}
		return
	}
	got, err := s.ism.Policies.Get(ctx, &ism.PoliciesGetReq{Policy: s.names.eventsPolicy})
	if err := check(got.Inspect().Response, err, "get policy"); err != nil || got.Policy == nil {
		t.Fatalf("retention policy %s missing: %v", s.names.eventsPolicy, err)
	}
	if got.Policy.Description != policyDescription(s.cfg) {
		t.Fatalf("policy description %q, want %q", got.Policy.Description, policyDescription(s.cfg))
	}
	explain, err := s.ism.Explain(ctx, &ism.ExplainReq{Indices: []string{s.names.firstEventsIndex()}})
	if err := check(explain.Inspect().Response, err, "explain"); err != nil {
		t.Fatal(err)
	}
	item := explain.Indices[s.names.firstEventsIndex()]
	if item.PluginPolicyID == nil || *item.PluginPolicyID != s.names.eventsPolicy {
		t.Fatalf("write index not managed by %s: %+v", s.names.eventsPolicy, item)
	}
	// A changed retention updates the policy in place.
	cfg.EventRetention = 14 * 24 * time.Hour
	s2 := open(t, cfg)
	got, err = s2.ism.Policies.Get(ctx, &ism.PoliciesGetReq{Policy: s.names.eventsPolicy})
	if err != nil || got.Policy == nil || got.Policy.Description != policyDescription(s2.cfg) {
		t.Fatalf("policy not updated to 14d: %+v, %v", got.Policy, err)
	}
}

func eventIDs(evs []store.Event) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventID
	}
	return ids
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestExecutionPolicy: the execution records' ISM policy deletes a day
// index once it is ExecutionTTL + 1 day old and attaches itself to every
// day index; with ISM on the node it is installed and manages today's
// index (this node has no ISM plugin: the policy's content is checked,
// and the store's read-side TTL is what TestContract's ExecutionsListed
// proves on the node).
func TestExecutionPolicy(t *testing.T) {
	cfg := freshConfig(t)
	cfg.ExecutionTTL = 7 * 24 * time.Hour
	p := ExecutionPolicy(cfg)
	if len(p.States) != 2 || p.DefaultState != "hot" || p.States[1].Actions[0].Delete == nil {
		t.Fatalf("policy states %+v", p.States)
	}
	if c := (*p.States[0].Transitions)[0].Conditions; c.MinIndexAge != "8d" {
		t.Fatalf("min_index_age %q, want 8d", c.MinIndexAge)
	}
	if pat := p.Template[0].IndexPatterns; len(pat) != 1 || pat[0] != cfg.IndexPrefix+"agent_executions-*" {
		t.Fatalf("ism_template patterns %v", pat)
	}
	s := open(t, cfg)
	ctx := t.Context()
	today := s.names.executionIndex(time.Now())
	if ok, err := s.exists(ctx, today); err != nil || !ok {
		t.Fatalf("today's execution index %s: exists %v, %v", today, ok, err)
	}
	if !s.ISMEnabled() {
		t.Logf("the node has no %s plugin: execution retention by read-side TTL only", ismPluginName)
		return
	}
	got, err := s.ism.Policies.Get(ctx, &ism.PoliciesGetReq{Policy: s.names.executionsPolicy})
	if err := check(got.Inspect().Response, err, "get policy"); err != nil || got.Policy == nil {
		t.Fatalf("execution policy %s missing: %v", s.names.executionsPolicy, err)
	}
	if got.Policy.Description != executionPolicyDescription(s.cfg) {
		t.Fatalf("policy description %q", got.Policy.Description)
	}
	explain, err := s.ism.Explain(ctx, &ism.ExplainReq{Indices: []string{today}})
	if err := check(explain.Inspect().Response, err, "explain"); err != nil {
		t.Fatal(err)
	}
	if item := explain.Indices[today]; item.PluginPolicyID == nil || *item.PluginPolicyID != s.names.executionsPolicy {
		t.Fatalf("today's index not managed by %s: %+v", s.names.executionsPolicy, item)
	}
}

// TestExecutionDaysPastTheTTLAreDeleted: without ISM as with it, the day
// indices whose every record is past the TTL are deleted when the store
// opens and on each new day's first write; younger days stay.
func TestExecutionDaysPastTheTTLAreDeleted(t *testing.T) {
	cfg := freshConfig(t)
	cfg.ExecutionTTL = 48 * time.Hour
	s := open(t, cfg)
	ctx := t.Context()
	now := time.Now().UTC()
	rec := func(id string, at time.Time) store.Execution {
		return store.Execution{ExecutionID: id, TenantID: "acme", AgentID: "agent-a", Status: store.ExecutionSuccess,
			TerminalCode: "SUCCESS", CreatedAt: at}
	}
	old, yesterday, today := now.Add(-5*24*time.Hour), now.Add(-24*time.Hour), now
	// The old record's day is created by its write (the clean-up runs
	// before a new day's index is created, so it stays until the next).
	if err := s.PutExecution(ctx, rec("run-old", old)); err != nil {
		t.Fatal(err)
	}
	exists := func(at time.Time) bool {
		ok, err := s.exists(ctx, s.names.executionIndex(at))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !exists(old) {
		t.Fatal("the old record's day index was not created")
	}
	// Yesterday's first write is a new day: the old day goes.
	if err := s.PutExecution(ctx, rec("run-yesterday", yesterday)); err != nil {
		t.Fatal(err)
	}
	if exists(old) {
		t.Fatalf("day index %s, past the %s TTL, still exists", s.names.executionIndex(old), cfg.ExecutionTTL)
	}
	if !exists(yesterday) || !exists(today) {
		t.Fatal("a day within the TTL was deleted")
	}
	if _, err := s.GetExecution(ctx, "acme", "run-yesterday"); err != nil {
		t.Fatalf("yesterday's record: %v", err)
	}
	// Two days on, yesterday's day is past the TTL too; today's is not.
	gone, err := s.DeleteExpiredExecutions(ctx, now.Add(2*24*time.Hour))
	if err != nil || len(gone) != 1 || gone[0] != s.names.executionIndex(yesterday) {
		t.Fatalf("DeleteExpiredExecutions two days on = %v, %v; want only yesterday's index", gone, err)
	}
	if !exists(today) {
		t.Fatal("today's index was deleted")
	}
}
