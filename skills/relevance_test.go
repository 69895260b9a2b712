package skills

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/text"
)

func TestRelevance(t *testing.T) {
	if got := text.Tokens("List the brand's outlets (stores), ranking_status", nil); !slices.Equal(got,
		[]string{"list", "brand", "outlet", "store", "rank", "status"}) {
		t.Fatalf("tokens = %v", got)
	}
	if got := Rank("", []Summary{{Name: "outlet_list", Description: "anything"}}); len(got) != 0 {
		t.Fatalf("an empty query ranks %+v", got)
	}
	items := []Summary{
		{Name: "b_skill", Description: "same words"},
		{Name: "a_skill", Description: "same words"},
		{Name: "other", Description: "unrelated"},
	}
	got := Rank("same words", items)
	if len(got) != 2 || got[0].Name != "a_skill" || got[1].Name != "b_skill" || got[0].Score != got[1].Score {
		t.Fatalf("Rank = %+v", got)
	}
}

// TestRankSynonymsAndKeywords: a task's everyday words find a skill by
// its synonyms (stores → outlets) and by the words of its schemas (a
// price field), and a rare word outweighs one every skill shares.
func TestRankSynonymsAndKeywords(t *testing.T) {
	items := []Summary{
		{Name: "outlet_list", Description: "List the brand's outlets with their status", Keywords: "status active inactive outlets city name"},
		{Name: "menu_catalog", Description: "Return the full menu catalog of an outlet", Keywords: "items price category"},
		{Name: "engagement_analytics", Description: "Score outlets by engagement", Keywords: "outlet_ids results score rank"},
	}
	cases := []struct{ query, want string }{
		{"Show me all our stores", "outlet_list"},
		{"Which locations are inactive?", "outlet_list"},
		{"What is the most expensive dish?", "menu_catalog"},
		{"least engaging shops", "engagement_analytics"},
	}
	for _, tc := range cases {
		got := Rank(tc.query, items)
		if len(got) == 0 || got[0].Name != tc.want || got[0].Score <= 0 || got[0].Score >= 1 {
			t.Errorf("Rank(%q) = %+v, want %s first with a score in (0, 1)", tc.query, got, tc.want)
		}
	}
}
