package text_test

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/text"
)

// TestCorpusScores: a rare word outweighs a common one, synonyms match,
// scores stay in [0, 1), and an empty query scores nothing.
func TestCorpusScores(t *testing.T) {
	c := text.NewCorpus([][]text.Field{
		{{Text: "outlet_list", Weight: 2}, {Text: "List the brand's outlets", Weight: 1}},
		{{Text: "menu_catalog", Weight: 2}, {Text: "The menu of an outlet", Weight: 1}, {Text: "price category", Weight: 0.5}},
	})
	s := c.Scores("the most expensive dish at our stores")
	if !(s[1] > s[0] && s[0] > 0 && s[1] < 1) {
		t.Fatalf("scores = %v: want the menu (price) above the outlets (stores), both in (0, 1)", s)
	}
	if s := c.Scores(""); !slices.Equal(s, []float64{0, 0}) {
		t.Fatalf("empty query scores %v", s)
	}
	if got := text.Terms("closed shops", nil); !slices.Equal(got, []string{"inactive", "outlet"}) {
		t.Fatalf("Terms = %v", got)
	}
	if got := text.SchemaWords([]byte(`{"properties":{"status":{"enum":["active","all"]},"items":{"items":{"properties":{"price":{}}}}}}`)); got != "active all items price status" {
		t.Fatalf("SchemaWords = %q", got)
	}
}
