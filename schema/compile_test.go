package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/schema"
)

const recordSchema = `{"type":"object","required":["id","tags"],"additionalProperties":false,"properties":{
	"id":{"type":"string","minLength":1},
	"when":{"type":"string","format":"date-time"},
	"tags":{"type":"array","items":{"type":"string"}},
	"status":{"enum":["on","off"]}}}`

func TestCompileCaches(t *testing.T) {
	a, err := schema.Compile([]byte(recordSchema))
	if err != nil {
		t.Fatal(err)
	}
	b, err := schema.Compile([]byte(recordSchema))
	if err != nil || a != b {
		t.Fatalf("second Compile = %p, %v; want the cached %p", b, err, a)
	}
	c, err := schema.Compile([]byte(recordSchema), schema.AssertFormat())
	if err != nil || c == a {
		t.Fatalf("Compile with AssertFormat = %p, %v; want its own validator", c, err)
	}
}

func TestCompileInvalid(t *testing.T) {
	for _, doc := range []string{`{"type":42}`, `{`, ``, `{"$ref":"#/$defs/missing"}`} {
		if _, err := schema.Compile([]byte(doc)); !errors.Is(err, schema.ErrCompile) {
			t.Errorf("Compile(%q) = %v, want ErrCompile", doc, err)
		}
		if err := schema.Validate([]byte(doc), []byte(`{}`)); !errors.Is(err, schema.ErrCompile) {
			t.Errorf("Validate(%q) = %v, want ErrCompile", doc, err)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		data   string
		fields []string // nil: valid
	}{
		{"valid", `{"id":"a","tags":["x"],"status":"on"}`, nil},
		{"unasserted format", `{"id":"a","tags":[],"when":"yesterday"}`, nil},
		{"missing property", `{"id":"a"}`, []string{"/tags"}},
		{"unknown property", `{"id":"a","tags":[],"extra":1}`, []string{"/extra"}},
		{"bad enum", `{"id":"a","tags":[],"status":"maybe"}`, []string{"/status"}},
		{"not an object", `[1]`, []string{""}},
		{"indexes in numeric order", `{"id":"","tags":[0,1,2,3,4,5,6,7,8,9,"k",11]}`,
			[]string{"/id", "/tags/0", "/tags/1", "/tags/2", "/tags/3", "/tags/4", "/tags/5", "/tags/6", "/tags/7", "/tags/8", "/tags/9", "/tags/11"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := schema.Validate([]byte(recordSchema), []byte(tc.data))
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("err = %v, want valid", err)
				}
				return
			}
			var verr *schema.ValidationError
			if !errors.As(err, &verr) || !errors.Is(err, schema.ErrInvalid) {
				t.Fatalf("err = %v, want *ValidationError matching ErrInvalid", err)
			}
			var got []string
			for _, v := range verr.Violations {
				if v.Reason == "" {
					t.Errorf("violation %q has no reason", v.Field)
				}
				got = append(got, v.Field)
			}
			if strings.Join(got, " ") != strings.Join(tc.fields, " ") {
				t.Fatalf("fields = %q, want %q", got, tc.fields)
			}
			first := tc.fields[0]
			if first == "" {
				first = "/"
			}
			if want := "schema: validation failed at " + first + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("message %q, want prefix %q", err, want)
			}
		})
	}
}

func TestValidateNotJSON(t *testing.T) {
	err := schema.Validate([]byte(recordSchema), []byte(`{`))
	if !errors.Is(err, schema.ErrNotJSON) || errors.Is(err, schema.ErrInvalid) {
		t.Fatalf("err = %v, want ErrNotJSON only", err)
	}
}

func TestAssertFormat(t *testing.T) {
	v, err := schema.Compile([]byte(recordSchema), schema.AssertFormat())
	if err != nil {
		t.Fatal(err)
	}
	var verr *schema.ValidationError
	if err := v.Validate([]byte(`{"id":"a","tags":[],"when":"yesterday"}`)); !errors.As(err, &verr) || verr.Violations[0].Field != "/when" {
		t.Fatalf("err = %v, want a violation at /when", err)
	}
	if err := v.Validate([]byte(`{"id":"a","tags":[],"when":"2025-01-02T03:04:05Z"}`)); err != nil {
		t.Fatalf("valid date-time: %v", err)
	}
}

func TestValidateConcurrent(t *testing.T) {
	doc := []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	done := make(chan error)
	for i := range 8 {
		go func() {
			data := `{"n":1}`
			if i%2 == 1 {
				data = `{"n":"x"}`
			}
			err := schema.Validate(doc, []byte(data))
			if (err != nil) != (i%2 == 1) {
				done <- err
				return
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
