package skills

import (
	"strings"
	"unicode"

	json "github.com/go-json-experiment/json/v1"
)

// destructiveWords are the words of a tool name that mark it destructive
// whatever its annotations say, unless it is declared read-only.
var destructiveWords = map[string]bool{
	"delete": true, "drop": true, "remove": true, "destroy": true,
	"purge": true, "erase": true, "truncate": true, "wipe": true,
}

// ReadOnly reports whether the skill declares that it does not modify its
// environment: true only when its readOnlyHint is explicitly true.
func (m Manifest) ReadOnly() bool {
	return m.Annotations != nil && isTrue(m.Annotations.ReadOnlyHint)
}

// Destructive reports whether the skill may delete or overwrite data. A
// read-only skill is not destructive. Otherwise it is when its
// destructiveHint is explicitly true, or when its name, split into words
// at "_", "-", "." (any rune that is neither a letter nor a digit) and at
// camelCase boundaries, holds one of delete, drop, remove, destroy, purge,
// erase, truncate or wipe in any case; the name wins over an explicit
// destructiveHint false. A skill with no annotations and no such word is
// not destructive (callers treat it as a networked side effect).
func (m Manifest) Destructive() bool {
	if m.ReadOnly() {
		return false
	}
	if m.Annotations != nil && isTrue(m.Annotations.DestructiveHint) {
		return true
	}
	for _, w := range nameWords(m.Name) {
		if destructiveWords[w] {
			return true
		}
	}
	return false
}

// OpenWorld reports whether the skill may reach entities outside its
// server: true unless its openWorldHint is explicitly false, as MCP
// defaults it to true.
func (m Manifest) OpenWorld() bool {
	return m.Annotations == nil || m.Annotations.OpenWorldHint == nil || *m.Annotations.OpenWorldHint
}

func isTrue(b *bool) bool {
	return b != nil && *b
}

// UnmarshalJSON decodes the hints leniently, so that odd annotations never
// make a manifest unreadable: a hint that is not a JSON boolean is unset,
// unknown fields are ignored, and annotations that are not a JSON object
// leave every hint unset.
func (a *Annotations) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		*a = Annotations{}
		return nil
	}
	*a = Annotations{
		ReadOnlyHint:    boolHint(raw["readOnlyHint"]),
		DestructiveHint: boolHint(raw["destructiveHint"]),
		IdempotentHint:  boolHint(raw["idempotentHint"]),
		OpenWorldHint:   boolHint(raw["openWorldHint"]),
	}
	return nil
}

// boolHint decodes a hint: nil when absent, null or not a boolean.
func boolHint(b json.RawMessage) *bool {
	var v *bool
	if len(b) == 0 || json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v
}

// nameWords splits a tool name into lower-case words at every rune that is
// neither a letter nor a digit and at camelCase boundaries: "dropTable",
// "drop-table" and "DROPTable" all give drop, table.
func nameWords(name string) []string {
	rs := []rune(name)
	var words []string
	start := -1 // start of the current word, -1 between words
	flush := func(end int) {
		if start >= 0 {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start >= 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			acronymEnd := unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if !unicode.IsUpper(prev) || acronymEnd {
				flush(i)
			}
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(rs))
	return words
}
