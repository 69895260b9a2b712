package schema

import (
	"fmt"
	"strings"
)

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
func Derive(output, shape Shape) ([]Derivation, error) {
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

func deriveField(output Shape, name string, want Shape) (Derivation, bool) {
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

func compatible(have, want Shape) bool {
	if want.Type == "" || have.Type == "" || have.Type == want.Type {
		return true
	}
	return have.Type == "integer" && want.Type == "number"
}

func covers(s Shape, keys []string) bool {
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
