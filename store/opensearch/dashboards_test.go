package opensearch

import (
	"bufio"
	"os"
	"regexp"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// TestDashboardsObjects_UseTheEventsMapping checks the OpenSearch
// Dashboards saved objects under deploy/ against the agent_events mapping
// they query: every line is a saved object; every reference names an
// object of the file of the right type; the index pattern's time field is
// the mapping's date; every field a visualization aggregates or filters on
// is mapped with an aggregatable type; the dashboard shows every
// visualization.
func TestDashboardsObjects_UseTheEventsMapping(t *testing.T) {
	mapping, err := Mapping(store.IndexEvents, Config{})
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for name, p := range mapping["properties"].(map[string]any) {
		if typ, ok := p.(map[string]any)["type"].(string); ok {
			fields[name] = typ
		}
	}
	aggregatable := map[string]bool{"keyword": true, "long": true, "integer": true, "double": true, "boolean": true, "date": true}

	f, err := os.Open("../../deploy/opensearch-dashboards/agentbus.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type object struct {
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
		References []struct {
			Name, Type, ID string
		} `json:"references"`
	}
	var objs []object
	byID := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var o object
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil || o.Type == "" || o.ID == "" || o.Attributes["title"] == nil {
			t.Fatalf("line %d is not a saved object: %v", len(objs)+1, err)
		}
		objs = append(objs, o)
		byID[o.ID] = o.Type
	}
	queryField := regexp.MustCompile(`([a-z_]+):`)
	var visualizations, panels int
	for _, o := range objs {
		for _, r := range o.References {
			if byID[r.ID] != r.Type {
				t.Errorf("%s references %s %s, which the file does not hold", o.ID, r.Type, r.ID)
			}
		}
		switch o.Type {
		case "index-pattern":
			if tf := o.Attributes["timeFieldName"].(string); fields[tf] != "date" {
				t.Errorf("index pattern time field %s is %q in the mapping", tf, fields[tf])
			}
		case "visualization":
			visualizations++
			var vs struct {
				Aggs []struct {
					Type   string         `json:"type"`
					Params map[string]any `json:"params"`
				} `json:"aggs"`
			}
			if err := json.Unmarshal([]byte(o.Attributes["visState"].(string)), &vs); err != nil || len(vs.Aggs) == 0 {
				t.Fatalf("%s: visState %v", o.ID, err)
			}
			for _, a := range vs.Aggs {
				if field, ok := a.Params["field"].(string); ok && !aggregatable[fields[field]] {
					t.Errorf("%s aggregates %s on %s, mapped as %q", o.ID, a.Type, field, fields[field])
				}
			}
			var ss struct {
				Query struct{ Query string } `json:"query"`
			}
			meta := o.Attributes["kibanaSavedObjectMeta"].(map[string]any)
			if err := json.Unmarshal([]byte(meta["searchSourceJSON"].(string)), &ss); err != nil {
				t.Fatalf("%s: searchSourceJSON %v", o.ID, err)
			}
			for _, m := range queryField.FindAllStringSubmatch(ss.Query.Query, -1) {
				if fields[m[1]] == "" {
					t.Errorf("%s filters on %s, which the mapping does not have", o.ID, m[1])
				}
			}
		case "dashboard":
			var ps []map[string]any
			if err := json.Unmarshal([]byte(o.Attributes["panelsJSON"].(string)), &ps); err != nil {
				t.Fatalf("%s: panelsJSON %v", o.ID, err)
			}
			panels += len(ps)
		}
	}
	if visualizations == 0 || panels != visualizations {
		t.Errorf("%d visualizations, %d dashboard panels", visualizations, panels)
	}
}
