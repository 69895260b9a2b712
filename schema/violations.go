package schema

import (
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var reasonPrinter = message.NewPrinter(language.English)

// leaf is one leaf of a validation error tree.
type leaf struct {
	path   []string
	reason string
}

// violations flattens the error tree to its leaves, ordered by instance
// location (stable, so equal locations keep the library's order) and
// without duplicates.
func violations(root *jsonschema.ValidationError) []Violation {
	var leaves []leaf
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, leafOf(e))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)
	if len(leaves) == 0 {
		return []Violation{{Reason: root.LocalizedError(reasonPrinter)}}
	}
	slices.SortStableFunc(leaves, func(a, b leaf) int { return comparePaths(a.path, b.path) })
	out := make([]Violation, 0, len(leaves))
	for _, l := range leaves {
		v := Violation{Field: pointer(l.path), Reason: l.reason}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// leafOf names the field a leaf error is about. For "required" and
// "additionalProperties" the offending property is appended to the
// location, since the instance location is the enclosing object.
func leafOf(e *jsonschema.ValidationError) leaf {
	path := slices.Clone(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			path = append(path, k.Missing[0])
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			path = append(path, k.Properties[0])
		}
	}
	return leaf{path: path, reason: e.ErrorKind.LocalizedString(reasonPrinter)}
}

// comparePaths orders instance locations token by token, comparing array
// indexes numerically; a prefix sorts first.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		ai, aerr := strconv.Atoi(a[i])
		bi, berr := strconv.Atoi(b[i])
		if aerr == nil && berr == nil {
			return ai - bi
		}
		return strings.Compare(a[i], b[i])
	}
	return len(a) - len(b)
}

// pointer renders path as a JSON Pointer.
func pointer(path []string) string {
	var sb strings.Builder
	for _, tok := range path {
		sb.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		sb.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return sb.String()
}
