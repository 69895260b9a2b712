package offline

import (
	"slices"
	"testing"

	"github.com/agentbus/agentbus/llm"
)

func TestRecallTaskResolvesTheUsersThings(t *testing.T) {
	mems := []llm.RecalledMemory{
		{ID: "t:@user:u:exchange", Text: "user: my favourite colour?\nassistant: I do not know it."},
		{ID: "t:@user:u:home", Text: "My home city is Melbourne. I work nights."},
		{ID: "t:@tenant:fy", Text: "Our fiscal year: July to June"},
	}
	for _, c := range []struct {
		task, want string
		used       []string
	}{
		{"List the active outlets in my home city", "List the active outlets in Melbourne", []string{"t:@user:u:home"}},
		{"Revenue of OUR FISCAL YEAR in my home city", "Revenue of July to June in Melbourne", []string{"t:@user:u:home", "t:@tenant:fy"}},
		{"List the active outlets", "List the active outlets", nil},
		{"outlets in my home", "outlets in my home", nil}, // no fact states "my home"
		{"outlets in their home city", "outlets in their home city", nil},
	} {
		got, used := recallTask(c.task, mems)
		if got != c.want || !slices.Equal(used, c.used) {
			t.Errorf("recallTask(%q) = %q, %v; want %q, %v", c.task, got, used, c.want, c.used)
		}
	}
}

func TestSynthesisNamesTheMemoriesItUsed(t *testing.T) {
	in := llm.SynthInput{Task: "the outlets in my home city", Outputs: []llm.StepOutput{{Step: 1, Value: []byte(`{"n":1}`)}},
		Memories: []llm.RecalledMemory{{ID: "t:@user:u:home", Text: "my home city is Perth"}}}
	got := synthesizeRecalling(in)
	want := "Result for \"the outlets in Perth\":\nn: 1\n(recalled: memory t:@user:u:home)"
	if got != want {
		t.Fatalf("answer %q, want %q", got, want)
	}
}
