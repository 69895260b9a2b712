package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/skills/demo"
	"github.com/agentbus/agentbus/store"
)

// MenuTask needs only the id and category of every item of a ~1 MB menu.
const menuTask = "List every menu item id with its category"

// TestMenuDemoGoesThroughTheSandbox runs the 1 MB menu demo end to end with
// the offline model: the response is too large for the context, so it is
// written to a temp file, sampled, and reduced by a Python script in the
// sandbox; the answer lists the right items, and the trace shows
// large_response.detected and python_script.executed with the script hash.
func TestMenuDemoGoesThroughTheSandbox(t *testing.T) {
	s := startStack(t)
	res := postRun(t, "http://"+s.IngressAddr, orch.RunRequest{TenantID: "demo", UserID: "u", SessionID: "s-menu", Message: menuTask})
	if res.TerminalCode != orch.CodeSuccess {
		t.Fatalf("run ended %s: %s", res.TerminalCode, res.Response)
	}

	// The answer, against the menu read straight from the Skill Service.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := skills.NewClient(skills.Config{URL: s.SkillsURL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.Call(ctx, "demo", demo.SkillMenuCatalog, json.RawMessage(`{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	var menu struct {
		Items []struct {
			ItemID   string `json:"item_id"`
			Category string `json:"category"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &menu); err != nil || len(raw) < 900_000 {
		t.Fatalf("menu: %v (%d bytes)", err, len(raw))
	}
	lines := strings.Split(res.Response, "\n")
	for i := range 50 {
		want := fmt.Sprintf("%d. (%s) — category %s", i+1, menu.Items[i].ItemID, menu.Items[i].Category)
		if i+1 >= len(lines) || lines[i+1] != want {
			t.Fatalf("answer line %d = %q, want %q", i+1, lines[min(i+1, len(lines)-1)], want)
		}
	}
	if last := lines[len(lines)-1]; last != fmt.Sprintf("… and %d more", len(menu.Items)-50) {
		t.Fatalf("answer ends %q", last)
	}

	// The stored output holds exactly id and category of every item.
	plan, _ := finalPlan(t, s, res.TenantID, res.PlanID)
	if len(plan.Steps) != 1 {
		t.Fatalf("plan has %d steps, want 1", len(plan.Steps))
	}
	m, err := s.Deps.Store.GetMemory(ctx, plan.Steps[0].MemoryKey)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Items []map[string]string `json:"items"`
	}
	if err := json.Unmarshal([]byte(m.Text), &stored); err != nil || len(stored.Items) != len(menu.Items) {
		t.Fatalf("stored %d items (%v), menu has %d", len(stored.Items), err, len(menu.Items))
	}
	for i, it := range stored.Items {
		if len(it) != 2 || it["item_id"] != menu.Items[i].ItemID || it["category"] != menu.Items[i].Category {
			t.Fatalf("stored item %d = %v", i, it)
		}
	}

	var trace []store.Event
	eventually(t, 10*time.Second, "the trace", func() bool {
		trace, err = s.Deps.Store.Trace(ctx, store.TraceQuery{TenantID: "demo", SessionID: "s-menu"})
		return err == nil && len(trace) > 0 && trace[len(trace)-1].EventType == "run.finished"
	})
	var detected, executed bool
	for _, e := range trace {
		switch e.EventType {
		case "large_response.detected":
			detected = true
		case "python_script.executed":
			executed = len(e.ScriptHash) == 64
		}
	}
	if !detected || !executed {
		t.Fatalf("trace: large_response.detected %v, python_script.executed with hash %v", detected, executed)
	}
}
