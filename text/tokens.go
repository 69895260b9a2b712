package text

import (
	"sort"
	"strings"
	"unicode"
)

// stopwords carry no meaning for relevance and are dropped by Tokens.
var stopwords = map[string]bool{
	"a": true, "all": true, "an": true, "and": true, "are": true, "as": true, "at": true,
	"be": true, "by": true, "each": true, "every": true, "for": true, "from": true,
	"get": true, "i": true, "in": true, "is": true, "it": true, "its": true, "me": true,
	"my": true, "of": true, "on": true, "or": true, "our": true, "show": true, "that": true,
	"the": true, "their": true, "them": true, "this": true, "to": true, "what": true,
	"which": true, "with": true,
}

// Tokens splits s into lower-case, lightly stemmed words. Anything but a
// letter or a digit separates words (so skill_names tokenize like their
// descriptions); one-letter words, stopwords and the words in extra
// (compared lower-cased, before stemming) are dropped. extra may be nil.
func Tokens(s string, extra map[string]bool) []string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := fields[:0]
	for _, f := range fields {
		if len(f) < 2 || stopwords[f] || extra[f] {
			continue
		}
		out = append(out, Stem(f))
	}
	return out
}

// Stem strips the most common English inflections of a lower-case word:
// plural "ies" and "s" (not "ss", "us" or "is": class, status, analysis)
// and "ing". Short words are kept whole.
func Stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 3 && strings.HasSuffix(w, "s") &&
		!strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// Stopwords returns the words Tokens drops, sorted.
func Stopwords() []string {
	out := make([]string, 0, len(stopwords))
	for w := range stopwords {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}
