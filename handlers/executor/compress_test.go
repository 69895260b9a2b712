package executor

import (
	"strconv"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
)

// TestCompressKeepsMessagesBounded folds old turns into one summary turn
// that keeps counting calls, so a long loop's messages stop growing.
func TestCompressKeepsMessagesBounded(t *testing.T) {
	var turns []orch.Turn
	var sizes []int
	for i := range 500 {
		turns = append(turns,
			orch.Turn{Role: "assistant", ToolCallID: "c", ToolName: "probe", ToolArgs: json.RawMessage(`{}`)},
			orch.Turn{Role: "tool", ToolCallID: "c", ToolName: "probe", Content: `{"i":` + strconv.Itoa(i) + `}`})
		turns = compress(turns, 8)
		b, _ := json.Marshal(turns)
		sizes = append(sizes, len(b))
	}
	if len(turns) != 9 || turns[0].Role != "summary" {
		t.Fatalf("compressed to %d turns, first %q", len(turns), turns[0].Role)
	}
	var sum Summary
	if err := json.Unmarshal([]byte(turns[0].Content), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Calls["probe"] != 500-4 || sum.Turns != 1000-8 {
		t.Fatalf("summary = %+v, want 496 folded calls over 992 turns", sum)
	}
	if last := turns[len(turns)-1].Content; last != `{"i":499}` {
		t.Fatalf("latest observation lost: %s", last)
	}
	if sizes[499] > sizes[20]+8 {
		t.Fatalf("message grew from %d to %d bytes", sizes[20], sizes[499])
	}
}
