package executor

import (
	"slices"
	"testing"
)

// TestIDValuesFindsIdentifiersAtAnyDepth collects the strings under
// members named id, *_id or *_ids, nested ones included, in order, and
// nothing from text that is not JSON.
func TestIDValuesFindsIdentifiersAtAnyDepth(t *testing.T) {
	for _, c := range []struct {
		data string
		want []string
	}{
		{`{"id":"a","name":"n"}`, []string{"a"}},
		{`{"results":[{"item_id":"i1","score":1},{"item_id":"i2","tags":["x"]}]}`, []string{"i1", "i2"}},
		{`{"s1_ids":["s1-1","s1-2"],"note":"s1-3"}`, []string{"s1-1", "s1-2"}},
		{`{"owner_id":{"kind":"user","value":"u7","n":2}}`, []string{"user", "u7"}},
		{`{"id_card":"no","paid":"no","ids":"no"}`, nil},
		{"{\"item_id\":\"made-up\xff\"}", []string{"made-up\ufffd"}},
		{`["id","x"]`, nil},
		{`"id"`, nil},
		{`{"id":"a"`, nil},
		{`not json`, nil},
		{``, nil},
	} {
		if got := idValues([]byte(c.data)); !slices.Equal(got, c.want) {
			t.Errorf("idValues(%s) = %q, want %q", c.data, got, c.want)
		}
	}
}

// TestJSONStringsVisitsEveryStringValue sees values, not member names,
// and says whether the text was one JSON value.
func TestJSONStringsVisitsEveryStringValue(t *testing.T) {
	var got []string
	ok := jsonStrings([]byte(`{"a":"x","b":[1,"y",{"c":"z","d":null}],"e":true}`), func(s string, _ bool) { got = append(got, s) })
	if !ok || !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("got %q, %v", got, ok)
	}
	for _, bad := range []string{`{"a":`, `{"a" "b"}`, `[1,]`, `plain text s1-1`} {
		if jsonStrings([]byte(bad), func(string, bool) {}) {
			t.Errorf("%s passed as JSON", bad)
		}
	}
}
