package schema_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/schema"
)

// outletOutput is a skill output schema: a list of outlet records.
const outletOutput = `{"type":"object","properties":{
	"count":{"type":"integer"},
	"outlets":{"type":"array","items":{"type":"object","properties":{
		"outlet_id":{"type":"string"},"name":{"type":"string"},"score":{"type":"number"}}}}}}`

func mustShape(t *testing.T, raw string) schema.Shape {
	t.Helper()
	s, err := schema.ParseShape(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("ParseShape(%s): %v", raw, err)
	}
	return s
}

func TestParseShape(t *testing.T) {
	s := mustShape(t, outletOutput)
	if s.Type != "object" || s.Properties["outlets"].Items.Properties["score"].Type != "number" {
		t.Fatalf("shape = %+v", s)
	}
	if _, err := schema.ParseShape(nil); err == nil {
		t.Fatal("ParseShape(nil) succeeded")
	}
	if _, err := schema.ParseShape(json.RawMessage(`[`)); err == nil {
		t.Fatal("ParseShape([) succeeded")
	}
}

func TestDerive(t *testing.T) {
	out := mustShape(t, outletOutput)
	cases := []struct {
		name  string
		shape string
		want  []schema.Derivation
	}{
		{"same field", `{"properties":{"count":{"type":"integer"}}}`,
			[]schema.Derivation{{Field: "count", Source: "count"}}},
		{"integer as number", `{"properties":{"count":{"type":"number"}}}`,
			[]schema.Derivation{{Field: "count", Source: "count"}}},
		{"items of a list", `{"properties":{"outlet_ids":{"type":"array","items":{"type":"string"}}}}`,
			[]schema.Derivation{{Field: "outlet_ids", Source: "outlets", Item: "outlet_id"}}},
		{"records projected", `{"properties":{"outlets":{"type":"array","items":{"type":"object","properties":{"name":{},"outlet_id":{}}}}}}`,
			[]schema.Derivation{{Field: "outlets", Source: "outlets", Keep: []string{"name", "outlet_id"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := schema.Derive(out, mustShape(t, tc.shape))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Derive = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, shape := range []string{
		`{"properties":{"missing":{"type":"string"}}}`,
		`{"properties":{"count":{"type":"string"}}}`,
		`{"properties":{"outlets":{"type":"array","items":{"type":"object","properties":{"city":{}}}}}}`,
	} {
		if _, err := schema.Derive(out, mustShape(t, shape)); !errors.Is(err, schema.ErrNotDerivable) {
			t.Errorf("Derive(%s) = %v, want ErrNotDerivable", shape, err)
		}
	}
}

func TestApplyAndScripts(t *testing.T) {
	ds := []schema.Derivation{
		{Field: "count", Source: "count"},
		{Field: "outlet_ids", Source: "outlets", Item: "outlet_id"},
		{Field: "named", Source: "outlets", Keep: []string{"name"}},
	}
	var output map[string]any
	if err := json.Unmarshal([]byte(`{"count":2,"outlets":[{"outlet_id":"a","name":"A","score":1},{"outlet_id":"b","name":"B"}]}`), &output); err != nil {
		t.Fatal(err)
	}
	got, err := schema.Apply(output, ds)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if want := `{"count":2,"named":[{"name":"A"},{"name":"B"}],"outlet_ids":["a","b"]}`; string(b) != want {
		t.Fatalf("Apply = %s, want %s", b, want)
	}
	if _, err := schema.Apply(map[string]any{}, ds); !errors.Is(err, schema.ErrNotDerivable) {
		t.Fatalf("Apply on an empty output = %v, want ErrNotDerivable", err)
	}
	if want := `{"count": ."count", "outlet_ids": [."outlets"[]?."outlet_id"], "named": [."outlets"[]? | {"name"}]}`; schema.JQ(ds) != want {
		t.Fatalf("JQ = %s, want %s", schema.JQ(ds), want)
	}
	py := schema.Python(ds)
	for _, line := range []string{
		`out["count"] = data.get("count")`,
		`out["outlet_ids"] = [el.get("outlet_id") for el in data.get("outlets") or [] if isinstance(el, dict)]`,
		`out["named"] = [{k: el.get(k) for k in ("name",)} for el in data.get("outlets") or [] if isinstance(el, dict)]`,
	} {
		if !strings.Contains(py, line) {
			t.Errorf("Python script lacks %q:\n%s", line, py)
		}
	}
}

func TestSingular(t *testing.T) {
	for in, want := range map[string]string{"outlet_ids": "outlet_id", "categories": "category", "data": "data"} {
		if got := schema.Singular(in); got != want {
			t.Errorf("Singular(%q) = %q, want %q", in, got, want)
		}
	}
}
