package schema

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// instanceCases are documents instance must read as jsonschema's own
// decoder does: values of every kind, escapes, duplicate names, invalid
// UTF-8, large and exotic numbers, and documents that are not JSON.
var instanceCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-1.5e+300`, `1e400`, `12345678901234567890123`, `"s"`,
	`{"a":1,"b":[1,"x",null,true,{"c":{}}],"d":"\u00e9\n\"q\""}`,
	`{"a":1,"a":2}`, "{\"a\":\"\xff\xfe\"}", "\"\xc3\"", ` {"a" : [ 1 , 2 ] } `,
	``, ` `, `{`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":1}{}`, `1 2`, `nul`, `01`, `"unterminated`, `{1:2}`, `[`, `]`,
	"{\"s1_ids\":[\"s1-1\",\"s1-2\"]}\n",
}

// TestInstanceMatchesJSONSchemaDecoder: instance decodes what
// jsonschema.UnmarshalJSON decodes, into the same values, and refuses
// what it refuses.
func TestInstanceMatchesJSONSchemaDecoder(t *testing.T) {
	for _, doc := range instanceCases {
		checkInstance(t, []byte(doc))
	}
}

func checkInstance(t *testing.T, doc []byte) {
	t.Helper()
	want, werr := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	got, gerr := instance(doc)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: error %v, jsonschema's decoder %v", doc, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded %#v, jsonschema's decoder %#v", doc, got, want)
	}
}

func FuzzInstance(f *testing.F) {
	for _, doc := range instanceCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkInstance)
}

var benchInstance = []byte(`{"s1_ids":["s1-1","s1-2","s1-3","s1-4","s1-5","s1-6","s1-7","s1-8"],"results":[{"item_id":"s5-1","name":"item s5-1","score":100,"rank":1},{"item_id":"s5-2","name":"item s5-2","score":90,"rank":2},{"item_id":"s5-3","name":"item s5-3","score":80.5,"rank":3}]}`)

// BenchmarkInstance compares instance with jsonschema's decoder on a
// step's output.
func BenchmarkInstance(b *testing.B) {
	b.Run("instance", func(b *testing.B) {
		for b.Loop() {
			if _, err := instance(benchInstance); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsonschema.UnmarshalJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(benchInstance)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
