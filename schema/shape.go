package schema

import (
	"fmt"
	"sort"

	json "github.com/go-json-experiment/json/v1"
)

// Shape is the subset of JSON Schema agentbus reasons about when it chains
// skills and checks return_specs.
type Shape struct {
	Type       string           `json:"type,omitempty"`
	Properties map[string]Shape `json:"properties,omitempty"`
	Items      *Shape           `json:"items,omitempty"`
	Required   []string         `json:"required,omitempty"`
	Enum       []any            `json:"enum,omitempty"`
}

// ParseShape decodes a JSON Schema document into a Shape, ignoring the
// keywords Shape does not model. A document that is empty or not a JSON
// object wraps ErrCompile.
func ParseShape(raw json.RawMessage) (Shape, error) {
	var s Shape
	if len(raw) == 0 {
		return s, fmt.Errorf("%w: empty schema", ErrCompile)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("%w: shape: %w", ErrCompile, err)
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
