package skills

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// stopwords are ignored when scoring relevance.
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true,
	"by": true, "each": true, "every": true, "for": true, "from": true, "get": true,
	"i": true, "in": true, "is": true, "it": true, "its": true, "me": true, "my": true,
	"of": true, "on": true, "or": true, "our": true, "show": true, "that": true,
	"the": true, "their": true, "them": true, "this": true, "to": true, "what": true,
	"which": true, "with": true, "all": true,
}

// tokens splits s into lower-case, lightly stemmed words, dropping stopwords
// and one-letter words. Underscores separate words, so skill names tokenize
// like their descriptions.
func tokens(s string) []string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if len(f) < 2 || stopwords[f] {
			continue
		}
		out = append(out, stem(f))
	}
	return out
}

// stem strips the most common English inflections: plural "s"/"ies" and
// "ing".
func stem(w string) string {
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

// termVector counts the tokens of text, each counting weight, into v.
func termVector(v map[string]float64, text string, weight float64) map[string]float64 {
	for _, t := range tokens(text) {
		v[t] += weight
	}
	return v
}

// cosine is the cosine similarity of two term vectors (0 if either is empty).
func cosine(a, b map[string]float64) float64 {
	var dot, na, nb float64
	for t, x := range a {
		na += x * x
		dot += x * b[t]
	}
	for _, y := range b {
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

// relevance scores how well a skill's name and description match query, in
// [0, 1]. Name words weigh twice as much as description words.
func relevance(query, name, description string) float64 {
	q := termVector(map[string]float64{}, query, 1)
	d := termVector(termVector(map[string]float64{}, name, 2), description, 1)
	return math.Round(cosine(q, d)*10000) / 10000
}

// Rank scores items by the relevance of their name and description to
// query and returns those with a positive score, best first; ties are
// broken by name. Client ranks plain MCP tools with it, and a Skill
// Service may rank its catalog with it for find_relevant_skills.
func Rank(query string, items []Summary) []Summary {
	out := make([]Summary, 0, len(items))
	for _, it := range items {
		if score := relevance(query, it.Name, it.Description); score > 0 {
			out = append(out, Summary{Name: it.Name, Description: it.Description, Score: score})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Name < out[j].Name
	})
	return out
}
