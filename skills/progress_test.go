package skills_test

import (
	"strings"
	"sync"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/skills"
)

// A call made WithProgress asks for progress (a progressToken in _meta),
// and the reference server's long-running operation reports each of its
// steps to that call, in order, over every transport. A call made without
// it asks for none and is told of none.
func TestEverythingProgress(t *testing.T) {
	for name, cfg := range everythingConfigs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, cfg(t))
			ctx := testCtx(t)
			var mu sync.Mutex
			var got []skills.Progress
			report := func(p skills.Progress) { mu.Lock(); defer mu.Unlock(); got = append(got, p) }
			args := json.RawMessage(`{"duration": 0.3, "steps": 3}`)
			out, err := c.Call(skills.WithProgress(ctx, report), "t1", "trigger-long-running-operation", args, "")
			if err != nil || !strings.Contains(string(out), "completed") {
				t.Fatalf("call: %s, %v", out, err)
			}
			mu.Lock()
			want := []skills.Progress{{Progress: 1, Total: 3}, {Progress: 2, Total: 3}, {Progress: 3, Total: 3}}
			if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Fatalf("progress %+v, want %+v", got, want)
			}
			got = nil
			mu.Unlock()
			if _, err := c.Call(ctx, "t1", "trigger-long-running-operation", args, ""); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 0 {
				t.Fatalf("a call without a report was given %+v", got)
			}
		})
	}
}
