package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrNotDerivable marks a return_spec shape that a skill's output schema
// cannot satisfy.
var ErrNotDerivable = errors.New("skills: shape not derivable from output schema")

// Schema is the subset of JSON Schema agentbus reasons about when it
// chains skills and checks return_specs.
type Schema struct {
	Type       string            `json:"type,omitempty"`
	Properties map[string]Schema `json:"properties,omitempty"`
	Items      *Schema           `json:"items,omitempty"`
	Required   []string          `json:"required,omitempty"`
	Enum       []any             `json:"enum,omitempty"`
}

// ParseSchema decodes a JSON Schema document into a Schema.
func ParseSchema(raw json.RawMessage) (Schema, error) {
	var s Schema
	if len(raw) == 0 {
		return s, errors.New("skills: empty schema")
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("skills: schema: %w", err)
	}
	return s, nil
}

// Derivation says how one field of a shape is taken from a skill output:
// Field = Source, or Field = [Source[].Item] when Item is set, or
// Field = [Source[] projected to Keep] when Keep is set.
type Derivation struct {
	Field  string   `json:"field"`
	Source string   `json:"source"`
	Item   string   `json:"item,omitempty"`
	Keep   []string `json:"keep,omitempty"`
}

// Derive returns how every property of shape is derived from output, or
// ErrNotDerivable naming the first property that cannot be.
func Derive(output, shape Schema) ([]Derivation, error) {
	names := sortedKeys(shape.Properties)
	out := make([]Derivation, 0, len(names))
	for _, name := range names {
		d, ok := deriveField(output, name, shape.Properties[name])
		if !ok {
			return nil, fmt.Errorf("%w: field %q", ErrNotDerivable, name)
		}
		out = append(out, d)
	}
	return out, nil
}

func deriveField(output Schema, name string, want Schema) (Derivation, bool) {
	if have, ok := output.Properties[name]; ok && compatible(have, want) {
		// A list of records keeps only the record fields the shape asks for.
		if want.Type == "array" && want.Items != nil && want.Items.Type == "object" && len(want.Items.Properties) > 0 &&
			have.Items != nil && have.Items.Type == "object" {
			keep := sortedKeys(want.Items.Properties)
			if covers(*have.Items, keep) {
				return Derivation{Field: name, Source: name, Keep: keep}, true
			}
			return Derivation{}, false
		}
		return Derivation{Field: name, Source: name}, true
	}
	if want.Type != "array" || want.Items == nil {
		return Derivation{}, false
	}
	for _, src := range sortedKeys(output.Properties) {
		have := output.Properties[src]
		if have.Type != "array" || have.Items == nil || have.Items.Type != "object" {
			continue
		}
		if want.Items.Type == "object" {
			keep := sortedKeys(want.Items.Properties)
			if covers(*have.Items, keep) {
				return Derivation{Field: name, Source: src, Keep: keep}, true
			}
			continue
		}
		item := Singular(name)
		if p, ok := have.Items.Properties[item]; ok && compatible(p, *want.Items) {
			return Derivation{Field: name, Source: src, Item: item}, true
		}
	}
	return Derivation{}, false
}

func compatible(have, want Schema) bool {
	if want.Type == "" || have.Type == "" || have.Type == want.Type {
		return true
	}
	return have.Type == "integer" && want.Type == "number"
}

func covers(s Schema, keys []string) bool {
	for _, k := range keys {
		if _, ok := s.Properties[k]; !ok {
			return false
		}
	}
	return true
}

// Singular returns the item name of a plural field: outlet_ids → outlet_id.
func Singular(name string) string {
	switch {
	case strings.HasSuffix(name, "ies"):
		return strings.TrimSuffix(name, "ies") + "y"
	case strings.HasSuffix(name, "s"):
		return strings.TrimSuffix(name, "s")
	}
	return name
}

// Apply evaluates derivations on a decoded skill output.
func Apply(output map[string]any, ds []Derivation) (map[string]any, error) {
	res := make(map[string]any, len(ds))
	for _, d := range ds {
		v, ok := output[d.Source]
		if !ok {
			return nil, fmt.Errorf("%w: output has no %q", ErrNotDerivable, d.Source)
		}
		if d.Item == "" && len(d.Keep) == 0 {
			res[d.Field] = v
			continue
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not an array", ErrNotDerivable, d.Source)
		}
		vals := make([]any, 0, len(arr))
		for _, el := range arr {
			obj, _ := el.(map[string]any)
			if d.Item != "" {
				vals = append(vals, obj[d.Item])
				continue
			}
			kept := make(map[string]any, len(d.Keep))
			for _, k := range d.Keep {
				kept[k] = obj[k]
			}
			vals = append(vals, kept)
		}
		res[d.Field] = vals
	}
	return res, nil
}

// JQ renders derivations as one jq program, the cheap extraction script
// the executor can run in-process.
func JQ(ds []Derivation) string {
	parts := make([]string, 0, len(ds))
	for _, d := range ds {
		src := fmt.Sprintf(".%s", jqKey(d.Source))
		switch {
		case d.Item != "":
			parts = append(parts, fmt.Sprintf("%s: [%s[]?.%s]", jqKey(d.Field), src, jqKey(d.Item)))
		case len(d.Keep) > 0:
			keys := make([]string, len(d.Keep))
			for i, k := range d.Keep {
				keys[i] = jqKey(k)
			}
			parts = append(parts, fmt.Sprintf("%s: [%s[]? | {%s}]", jqKey(d.Field), src, strings.Join(keys, ", ")))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s", jqKey(d.Field), src))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func jqKey(k string) string {
	b, _ := json.Marshal(k)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Python renders derivations as a Python extraction script: it reads the
// JSON file named by argv[1] and prints only the derived fields as JSON.
func Python(ds []Derivation) string {
	var b strings.Builder
	b.WriteString("import json, sys\n\nwith open(sys.argv[1]) as f:\n    data = json.load(f)\nout = {}\n")
	for _, d := range ds {
		src, field := pyStr(d.Source), pyStr(d.Field)
		switch {
		case d.Item != "":
			fmt.Fprintf(&b, "out[%s] = [el.get(%s) for el in data.get(%s) or [] if isinstance(el, dict)]\n", field, pyStr(d.Item), src)
		case len(d.Keep) > 0:
			keys := make([]string, len(d.Keep))
			for i, k := range d.Keep {
				keys[i] = pyStr(k)
			}
			fmt.Fprintf(&b, "out[%s] = [{k: el.get(k) for k in (%s,)} for el in data.get(%s) or [] if isinstance(el, dict)]\n",
				field, strings.Join(keys, ", "), src)
		default:
			fmt.Fprintf(&b, "out[%s] = data.get(%s)\n", field, src)
		}
	}
	b.WriteString("print(json.dumps(out))\n")
	return b.String()
}

// pyStr quotes s as a Python string literal (JSON strings are valid ones).
func pyStr(s string) string { return jqKey(s) }
