package text_test

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/text"
)

func TestTokens(t *testing.T) {
	cases := []struct {
		in    string
		extra map[string]bool
		want  []string
	}{
		{"List the brand's outlets (stores), ranking_status", nil, []string{"list", "brand", "outlet", "store", "rank", "status"}},
		{"List the brand's outlets", map[string]bool{"list": true}, []string{"brand", "outlet"}},
		{"outlet_list: Engagement-SCORES for the outlets", nil, []string{"outlet", "list", "engagement", "score", "outlet"}},
		{"", nil, []string{}},
		{"a I x of the", nil, []string{}},
		{"Café prices, 42 items", nil, []string{"café", "price", "42", "item"}},
	}
	for _, tc := range cases {
		if got := text.Tokens(tc.in, tc.extra); !slices.Equal(got, tc.want) {
			t.Errorf("Tokens(%q, %v) = %q, want %q", tc.in, tc.extra, got, tc.want)
		}
	}
}

func TestStem(t *testing.T) {
	for in, want := range map[string]string{
		"outlets": "outlet", "categories": "category", "ranking": "rank", "status": "status",
		"class": "class", "analysis": "analysis", "ties": "tie", "sing": "sing", "bus": "bus",
		"items": "item", "its": "its", "id": "id",
	} {
		if got := text.Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
}
