package offline_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/llm"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/skills/demo"
)

// TestOfflineExtractNarrowsOnFeedback: for one large response, each
// script written after the sandbox rejected the last is a different,
// narrower one (fewer records), never the same script twice.
func TestOfflineExtractNarrowsOnFeedback(t *testing.T) {
	sk := demoSkills(t)
	task := "What is the most expensive item on the menu?"
	po := planOut(t, llm.PlanInput{Task: task, Skills: allDemo(t), MaxSteps: 10, FirstStep: 1})
	if len(po.Steps) != 1 || po.Steps[0].Skills[0] != demo.SkillMenuCatalog {
		t.Fatalf("plan = %+v, want one menu_catalog step", po)
	}
	m := offline.New()
	in := llm.ExtractInput{Task: po.Steps[0].Task, Skill: sk[demo.SkillMenuCatalog], ReturnSpec: po.Steps[0].ReturnSpec,
		FileID: "f_1", SizeBytes: 1 << 20, Languages: []string{"python", "jq"}}
	seen := map[[32]byte]bool{}
	for attempt, feedback := range []string{"", "the output exceeded the sandbox's output cap", "the output exceeded the sandbox's output cap"} {
		in.Feedback = feedback
		resp, err := m.Complete(testCtx(t), llm.NewRequest(llm.TaskExtract, in))
		if err != nil {
			t.Fatal(err)
		}
		var out llm.ExtractOutput
		if err := json.Unmarshal([]byte(resp.Message.Content), &out); err != nil || out.Language != "python" {
			t.Fatalf("attempt %d: %s (%v)", attempt+1, resp.Message.Content, err)
		}
		h := sha256.Sum256([]byte(out.Script))
		if seen[h] {
			t.Fatalf("attempt %d repeats an earlier script", attempt+1)
		}
		seen[h] = true
		if !strings.Contains(out.Script, "most") || !strings.Contains(out.Script, `\"price\"`) {
			t.Errorf("attempt %d does not carry the question (the price, most): %s", attempt+1, out.Script[:200])
		}
	}
}

func planOut(t *testing.T, in llm.PlanInput) llm.PlanOutput {
	t.Helper()
	msg := complete(t, llm.TaskPlan, in, nil)
	var out llm.PlanOutput
	if err := json.Unmarshal([]byte(msg.Content), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
