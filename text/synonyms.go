package text

// synonymGroups are the words that mean the same thing to relevance, each
// group's first word its canonical form. The words are stems (as Stem
// returns them). They are the everyday words a user types for what skill
// descriptions and schemas name: a user asks for stores, a catalog lists
// outlets.
var synonymGroups = [][]string{
	{"outlet", "store", "shop", "location", "branch", "venue", "site", "restaurant"},
	{"item", "dish", "product", "food", "meal"},
	{"price", "cost", "costly", "pricey", "priciest", "pricy", "expensive", "cheap", "cheapest", "cheaper", "dear"},
	{"engagement", "engag", "engaged", "engage"},
	{"active", "open", "operat", "operating"},
	{"inactive", "closed", "shut", "disabled", "dormant"},
	{"category", "kind", "section"},
	{"directory", "folder", "dir"},
	{"sum", "add", "plus", "total", "addition"},
	{"rank", "sort", "sorted", "order", "ordered"},
}

// synonyms maps each word of synonymGroups to its group's canonical form.
var synonyms = func() map[string]string {
	m := map[string]string{}
	for _, g := range synonymGroups {
		for _, w := range g {
			m[w] = g[0]
		}
	}
	return m
}()

// Canonical returns the canonical form of a stemmed word: the first word
// of its synonym group, else the word itself.
func Canonical(stem string) string {
	if c, ok := synonyms[stem]; ok {
		return c
	}
	return stem
}

// Terms are the Tokens of s, each in its Canonical form: the words two
// texts are compared by when synonyms should match.
func Terms(s string, extra map[string]bool) []string {
	toks := Tokens(s, extra)
	for i, t := range toks {
		toks[i] = Canonical(t)
	}
	return toks
}

// Synonyms returns a copy of the synonym table: each word's canonical
// form. An extraction script written for another runtime carries it, so
// that it matches words as Terms does.
func Synonyms() map[string]string {
	m := make(map[string]string, len(synonyms))
	for k, v := range synonyms {
		m[k] = v
	}
	return m
}
