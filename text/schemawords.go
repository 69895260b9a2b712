package text

import (
	"encoding/json"
	"sort"
	"strings"
)

// SchemaWords returns the words a JSON Schema document names: its
// property names, at any depth, and its string enum values, space
// separated in a stable order. A ranker reads them with a skill's name and
// description: a task asking for a price finds the skill whose output has
// one. A document that is not JSON has no words.
func SchemaWords(doc []byte) string {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return ""
	}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok {
				for k := range props {
					seen[k] = true
				}
			}
			if enum, ok := x["enum"].([]any); ok {
				for _, e := range enum {
					if s, ok := e.(string); ok {
						seen[s] = true
					}
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	words := make([]string, 0, len(seen))
	for w := range seen {
		words = append(words, w)
	}
	sort.Strings(words)
	return strings.Join(words, " ")
}
