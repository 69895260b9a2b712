package skills

import (
	"math"
	"sort"

	"github.com/agentbus/agentbus/text"
)

// termVector counts the tokens of s, each counting weight, into v.
func termVector(v map[string]float64, s string, weight float64) map[string]float64 {
	for _, t := range text.Tokens(s, nil) {
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
