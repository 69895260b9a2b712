package offline

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/text"
)

// Field weights of the offline model's skill ranking: as skills.Rank,
// with the schemas' words counting as well, since the model sees them.
const (
	rankName        = 2
	rankDescription = 1
	rankSchema      = 0.5
	// writePenalty scales the relevance of a skill that changes things
	// when the task only reads: chosen only when nothing else fits.
	writePenalty = 0.3
	// companionShare is how relevant, against the best skill, another
	// skill must be to join the plan for words the best one lacks.
	companionShare = 0.3
)

// ranked is the offline model's ranking of the allowed skills for a task:
// BM25 over their names, descriptions and schema words, with synonyms;
// for a task that only reads, destructive skills are left out and skills
// that write count less.
type ranked struct {
	cands  []*planSkill
	corpus *text.Corpus
	terms  []string // the ranking's query terms
	pos    map[string]int
	all    []string // every skill looked at, for an infeasible answer
}

// argRE matches what a task passes as an argument rather than says it
// wants: paths and quoted text. The ranking reads the task without them.
var argRE = regexp.MustCompile(`(?:~|\.{1,2})?/[^\s'",;?]*|"[^"]*"|'[^']*'`)

func rankSkills(task string, skills []llm.SkillInfo) ranked {
	in := parseIntent(task)
	query := argRE.ReplaceAllString(task, " ")
	r := ranked{terms: text.Terms(query, nil), pos: map[string]int{}}
	docs := make([][]text.Field, len(skills))
	for i, s := range skills {
		docs[i] = []text.Field{{Text: s.Name, Weight: rankName}, {Text: s.Description, Weight: rankDescription},
			{Text: text.SchemaWords(s.InputSchema) + " " + text.SchemaWords(s.OutputSchema), Weight: rankSchema}}
		r.pos[s.Name] = i
		r.all = append(r.all, s.Name)
	}
	r.corpus = text.NewCorpus(docs)
	scores := r.corpus.Scores(strings.Join(r.terms, " "))
	for i, s := range skills {
		ps := &planSkill{info: s, relevance: scores[i]}
		var err error
		if ps.in, err = schema.ParseShape(s.InputSchema); err != nil {
			continue
		}
		if ps.out, err = schema.ParseShape(s.OutputSchema); err != nil {
			continue
		}
		if !in.write {
			switch verb := firstWord(s.Name); {
			case destructiveVerbs[verb]:
				continue
			case writeVerbs[verb]:
				ps.relevance *= writePenalty
			}
		}
		r.cands = append(r.cands, ps)
	}
	sort.SliceStable(r.cands, func(i, j int) bool { return r.cands[i].relevance > r.cands[j].relevance })
	return r
}

// firstWord is the first word of a skill name: its verb, when it has one.
func firstWord(name string) string {
	f := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return !(r >= 'a' && r <= 'z') })
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// adds reports whether skill s holds a query term, other than a verb
// every task uses, that none of the chosen skills holds: it answers part
// of the task they do not.
func (r ranked) adds(s *planSkill, chosen []*planSkill) bool {
	for _, t := range r.terms {
		if verbs[t] || !r.corpus.Has(r.pos[s.info.Name], t) {
			continue
		}
		covered := false
		for _, c := range chosen {
			covered = covered || r.corpus.Has(r.pos[c.info.Name], t)
		}
		if !covered {
			return true
		}
	}
	return false
}

// infeasible is the answer to a task no allowed skill serves: the skills
// looked at, and the way to a model that can do more.
func (r ranked) infeasible(reasons []string) string {
	looked := "none (no skill was discovered for it)"
	if len(r.all) > 0 {
		looked = strings.Join(r.all, ", ")
	}
	msg := "no discovered skill fits the task; the offline model looked at " + looked
	if len(reasons) > 0 {
		msg += " (" + strings.Join(reasons, "; ") + ")"
	}
	return msg + fmt.Sprintf(". It answers what its skills' names, descriptions and schemas cover; for other tasks run "+
		"a real model, e.g. MODEL=openai:gpt-4.1-mini MODEL_API_KEY=… (see docs/MODELS.md)")
}
