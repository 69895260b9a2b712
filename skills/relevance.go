package skills

import (
	"math"
	"sort"

	"github.com/agentbus/agentbus/text"
)

// Field weights of the ranking: a skill's name says most of what it does,
// its description the rest; the words of its schemas (parameter names,
// enum values, output fields) count least.
const (
	nameWeight        = 2
	descriptionWeight = 1
	keywordWeight     = 0.5
)

// Rank scores items by the relevance of their name, description and
// Keywords to query and returns those with a positive score, best first;
// ties are broken by name. Scores are BM25 over the items' words with
// synonyms (text.Corpus), in [0, 1). Client ranks plain MCP tools with it,
// and a Skill Service may rank its catalog with it for
// find_relevant_skills.
func Rank(query string, items []Summary) []Summary {
	docs := make([][]text.Field, len(items))
	for i, it := range items {
		docs[i] = []text.Field{{Text: it.Name, Weight: nameWeight}, {Text: it.Description, Weight: descriptionWeight},
			{Text: it.Keywords, Weight: keywordWeight}}
	}
	scores := text.NewCorpus(docs).Scores(query)
	out := make([]Summary, 0, len(items))
	for i, it := range items {
		if s := math.Round(scores[i]*10000) / 10000; s > 0 {
			out = append(out, Summary{Name: it.Name, Description: it.Description, Score: s})
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
