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
	if relevance("", "outlet_list", "anything") != 0 {
		t.Fatal("empty query must score 0")
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
