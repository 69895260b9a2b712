package text

import "math"

// BM25 parameters: term-frequency saturation and length normalisation.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Field is one weighted part of a document: a term of a field with weight
// w counts w times (a name may weigh more than a description).
type Field struct {
	Text   string
	Weight float64
}

// Corpus scores documents against queries with Okapi BM25 over their
// Terms (so synonyms match) or their Tokens, weighting each document's
// fields.
type Corpus struct {
	terms  func(string, map[string]bool) []string
	docs   []map[string]float64
	lens   []float64
	df     map[string]int
	avgLen float64
}

// NewCorpus indexes docs, each a list of weighted fields, by their Terms.
func NewCorpus(docs [][]Field) *Corpus { return newCorpus(docs, Terms) }

// NewExactCorpus indexes docs by their Tokens: no synonyms, for texts
// where a synonym would mislead (a task's "open" is not a task type's
// "open-ended").
func NewExactCorpus(docs [][]Field) *Corpus { return newCorpus(docs, Tokens) }

func newCorpus(docs [][]Field, terms func(string, map[string]bool) []string) *Corpus {
	c := &Corpus{terms: terms, df: map[string]int{}}
	total := 0.0
	for _, fields := range docs {
		tf := map[string]float64{}
		n := 0.0
		for _, f := range fields {
			for _, t := range terms(f.Text, nil) {
				tf[t] += f.Weight
				n += f.Weight
			}
		}
		for t := range tf {
			c.df[t]++
		}
		c.docs = append(c.docs, tf)
		c.lens = append(c.lens, n)
		total += n
	}
	if len(docs) > 0 {
		c.avgLen = total / float64(len(docs))
	}
	return c
}

// IDF is the inverse document frequency of term (a Canonical stem): high
// for a term few documents hold, never negative.
func (c *Corpus) IDF(term string) float64 {
	n, df := float64(len(c.docs)), float64(c.df[term])
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// Has reports whether document i holds term.
func (c *Corpus) Has(i int, term string) bool { return c.docs[i][term] > 0 }

// Scores returns the BM25 score of every document for query, normalised
// to [0, 1) by the score a document holding every query term at
// saturation would reach, so scores of different corpora compare.
func (c *Corpus) Scores(query string) []float64 {
	out := make([]float64, len(c.docs))
	terms := uniq(c.terms(query, nil))
	ideal := 0.0
	for _, t := range terms {
		ideal += c.IDF(t) * (bm25K1 + 1)
	}
	if ideal == 0 || c.avgLen == 0 {
		return out
	}
	for i, tf := range c.docs {
		norm := bm25K1 * (1 - bm25B + bm25B*c.lens[i]/c.avgLen)
		s := 0.0
		for _, t := range terms {
			if f := tf[t]; f > 0 {
				s += c.IDF(t) * f * (bm25K1 + 1) / (f + norm)
			}
		}
		out[i] = s / ideal
	}
	return out
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, w := range s {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
