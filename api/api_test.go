package api_test

import (
	"bytes"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"go.yaml.in/yaml/v4"

	"github.com/agentbus/agentbus/api"
)

// TestJSONIsTheYAML: the served JSON holds exactly what openapi.yaml says,
// its keys in the order written.
func TestJSONIsTheYAML(t *testing.T) {
	raw, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if err := yaml.Unmarshal(api.YAML, &fromYAML); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(fromJSON)
	b, _ := json.Marshal(fromYAML)
	if !bytes.Equal(a, b) {
		t.Fatal("the JSON document differs from openapi.yaml")
	}
	if !bytes.HasPrefix(raw, []byte(`{"openapi":"3.1.0","info":`)) {
		t.Fatalf("keys out of order: %.40s", raw)
	}
}

// TestPage: the reference page names every operation and every schema,
// loads nothing (no script, stylesheet or image) and escapes the text.
func TestPage(t *testing.T) {
	page, err := api.Page()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := api.JSON()
	var doc struct {
		Paths      map[string]map[string]struct{ OperationID string } `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if !strings.Contains(html, `id="op-`+op.OperationID+`"`) || !strings.Contains(html, strings.ToUpper(method)+" "+path) {
				t.Errorf("the page lacks %s %s (%s)", method, path, op.OperationID)
			}
		}
	}
	for name := range doc.Components.Schemas {
		if !strings.Contains(html, `id="schema-`+name+`"`) {
			t.Errorf("the page lacks schema %s", name)
		}
	}
	for _, banned := range []string{"<script", "<link", "<img", "<iframe", "http://", "style="} {
		if strings.Contains(html, banned) {
			t.Errorf("the page holds %q", banned)
		}
	}
	if !strings.Contains(html, "<code>abk_&lt;id&gt;_&lt;secret&gt;</code>") && !strings.Contains(html, "abk_&lt;id&gt;_&lt;secret&gt;") {
		t.Error("the page does not escape the document's text")
	}
}
