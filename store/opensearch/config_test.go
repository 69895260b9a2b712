package opensearch

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/agentbus/agentbus/store"
)

// These tests need no cluster.

// TestMappingsCoverDocuments proves the strict mappings cannot refuse the
// store's own documents: every JSON field of every document type (nested
// ones included) is mapped, and every mapped field is a document field
// and a property of the index's JSON Schema.
func TestMappingsCoverDocuments(t *testing.T) {
	docs := map[string]reflect.Type{
		store.IndexMemory:      reflect.TypeFor[store.Memory](),
		store.IndexPlans:       reflect.TypeFor[store.Plan](),
		store.IndexEvents:      reflect.TypeFor[store.Event](),
		store.IndexSouls:       reflect.TypeFor[store.Soul](),
		store.IndexSessions:    reflect.TypeFor[store.Session](),
		store.IndexDefinitions: reflect.TypeFor[store.Definition](),
		store.IndexExecutions:  reflect.TypeFor[store.Execution](),
	}
	for _, index := range store.Indexes() {
		m, err := Mapping(index, Config{})
		if err != nil {
			t.Fatalf("Mapping(%s): %v", index, err)
		}
		if m["dynamic"] != "strict" {
			t.Errorf("%s: dynamic %v, want strict", index, m["dynamic"])
		}
		compareFields(t, index, docs[index], m["properties"].(obj))

		raw, err := store.SchemaJSON(index)
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		if got, want := sortedKeys(m["properties"].(obj)), sortedKeys(schema.Properties); !slices.Equal(got, want) {
			t.Errorf("%s: mapping fields %v, JSON Schema fields %v", index, got, want)
		}
	}
}

// compareFields matches the JSON fields of typ with the mapping's
// properties, descending into object and nested fields.
func compareFields(t *testing.T, path string, typ reflect.Type, props obj) {
	t.Helper()
	fields := jsonFields(typ)
	for name, ft := range fields {
		p, ok := props[name].(obj)
		if !ok {
			t.Errorf("%s.%s: no mapping for the document field", path, name)
			continue
		}
		if sub, ok := p["properties"].(obj); ok {
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			compareFields(t, path+"."+name, ft, sub)
		} else if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			t.Errorf("%s.%s: struct field mapped without properties", path, name)
		}
	}
	for name := range props {
		if _, ok := fields[name]; !ok {
			t.Errorf("%s.%s: mapped but not a document field", path, name)
		}
	}
}

// jsonFields returns the JSON-encoded fields of a struct type.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestMappingEmbedding(t *testing.T) {
	m, err := Mapping(store.IndexMemory, Config{Dimension: 384, Engine: EngineFaiss})
	if err != nil {
		t.Fatal(err)
	}
	emb := m["properties"].(obj)["embedding"].(obj)
	method := emb["method"].(obj)
	if emb["type"] != "knn_vector" || emb["dimension"] != 384 || method["name"] != "hnsw" ||
		method["engine"] != EngineFaiss || method["space_type"] != "cosinesimil" {
		t.Fatalf("embedding mapping %v", emb)
	}
	if _, err := Mapping("agent_nope", Config{}); !errors.Is(err, store.ErrUnknownIndex) {
		t.Fatalf("unknown index: %v", err)
	}
	s := indexSettings(store.IndexMemory, Config{Shards: 2, Replicas: 0, RefreshInterval: 250 * time.Millisecond}, "")["index"].(obj)
	if s["knn"] != true || s["auto_expand_replicas"] != "0-1" || s["refresh_interval"] != "250ms" || s["number_of_shards"] != 2 {
		t.Fatalf("settings %v", s)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	ok := Config{
		URLs: []string{"https://a:9200", "http://b"}, Username: "u", Password: "p",
		IndexPrefix: "prod-1_", Dimension: 384, Engine: EngineFaiss, Shards: 3, Replicas: 1,
		ISM: ISMRequired, EventRetention: 90 * 24 * time.Hour, Timeout: time.Second,
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid Config: %v", err)
	}
	for name, cfg := range map[string]Config{
		"bad URL":          {URLs: []string{"127.0.0.1:9200"}},
		"user only":        {Username: "u"},
		"upper prefix":     {IndexPrefix: "Test_"},
		"underscore start": {IndexPrefix: "_x"},
		"dot prefix":       {IndexPrefix: "a.b"},
		"dimension":        {Dimension: -1},
		"engine":           {Engine: "nmslib"},
		"replicas":         {Replicas: -1},
		"refresh":          {RefreshInterval: time.Microsecond},
		"ism":              {ISM: "sometimes"},
		"retention":        {EventRetention: time.Second},
		"aws region":       {AWS: &AWSConfig{}},
		"aws service":      {AWS: &AWSConfig{Region: "eu-west-1", Service: "s3"}},
		"aws and basic":    {AWS: &AWSConfig{Region: "eu-west-1"}, Username: "u", Password: "p"},
	} {
		if err := cfg.Validate(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: Validate = %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestConfigStringRedactsPassword(t *testing.T) {
	cfg := Config{Username: "agentbus", Password: "hunter2"}
	for _, s := range []string{cfg.String(), fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%v", &cfg)} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "agentbus") {
			t.Fatalf("Config printed as %q", s)
		}
	}
}

// recorder is an HTTP transport that records requests and answers 200 [].
type recorder struct{ reqs []*http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.reqs = append(r.reqs, req)
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`[]`)), Request: req,
	}, nil
}

// TestSigV4SigningClient builds the client of an AWS SigV4 Config with
// static credentials from the environment and checks that its requests
// are signed for the region and service; nothing leaves the process.
func TestSigV4SigningClient(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, service := range []string{"", "aoss"} {
		rec := &recorder{}
		cfg := Config{
			URLs:      []string{"https://search-agentbus.eu-west-1.es.amazonaws.com"},
			AWS:       &AWSConfig{Region: "eu-west-1", Service: service},
			Transport: rec,
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		oc, err := clientConfig(t.Context(), cfg.withDefaults())
		if err != nil {
			t.Fatalf("clientConfig: %v", err)
		}
		if oc.Signer == nil {
			t.Fatal("no signer for an AWS config")
		}
		api, err := opensearchapi.NewClient(opensearchapi.Config{Client: oc})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := api.Cat.Plugins(t.Context(), nil)
		if err := check(resp.Inspect().Response, err, "cat plugins"); err != nil {
			t.Fatal(err)
		}
		_ = api.Client.Close()
		if len(rec.reqs) == 0 {
			t.Fatal("no request reached the transport")
		}
		want := "/eu-west-1/" + cmpOr(service, "es") + "/aws4_request"
		auth := rec.reqs[len(rec.reqs)-1].Header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, want) {
			t.Fatalf("Authorization %q, want a SigV4 signature for %s", auth, want)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestRetentionPolicyBody(t *testing.T) {
	p := RetentionPolicy(Config{IndexPrefix: "x_"})
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"default_state":"hot"`,
		`"rollover":{"min_index_age":"1d"}`,
		`"conditions":{"min_rollover_age":"30d"}`,
		`"delete":{}`,
		`"ism_template":[{"index_patterns":["x_agent_events-*"],"priority":100}]`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("policy %s lacks %s", data, want)
		}
	}
	short := RetentionPolicy(Config{EventRetention: 90 * time.Minute})
	if got := short.States[0].Actions[0].Rollover.MinIndexAge; got != "90m" {
		t.Errorf("rollover of a 90m retention after %s, want 90m", got)
	}
	for d, want := range map[time.Duration]string{
		48 * time.Hour: "2d", 36 * time.Hour: "36h", 61 * time.Second: "61s", 1500 * time.Millisecond: "1500ms",
	} {
		if got := ismDuration(d); got != want {
			t.Errorf("ismDuration(%v) = %s, want %s", d, got, want)
		}
	}
}
