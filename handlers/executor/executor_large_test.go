package executor_test

import (
	"os"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/handlers/internal/handlerstest"
	"github.com/agentbus/agentbus/llm/offline"
	"github.com/agentbus/agentbus/orch"
	"github.com/agentbus/agentbus/sandbox"
	"github.com/agentbus/agentbus/skills/demo"
)

// menuShape is what a menu step needs: item ids and categories only.
const menuShape = `{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"type":"object",` +
	`"required":["category","item_id"],"properties":{"category":{"type":"string"},"item_id":{"type":"string"}}}}}}`

func menuRequest(runID string) orch.StepRequest {
	req := handlerstest.ExecRequest(runID, 1)
	s := &req.Run.Plan.Steps[0]
	s.Task, s.Skills = "Return the full menu catalog (for: List every menu item id with its category)", []string{demo.SkillMenuCatalog}
	s.ReturnSpec = orch.ReturnSpec{Shape: json.RawMessage(menuShape)}
	return req
}

// TestExecutorLargeResponseWithoutSandbox: a response at or above the gate
// never enters the context; with no sandbox the model is told so.
func TestExecutorLargeResponseWithoutSandbox(t *testing.T) {
	env := handlerstest.NewEnv(t)
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-large-nosb", events.TypeStepRequested, menuRequest("run-large-0")))
	it := handlerstest.Decode[orch.StepRequest](t, handlerstest.Only(t, outs, events.TypeStepIterated))
	tool := it.Turns[len(it.Turns)-1]
	if !tool.IsError || !strings.Contains(tool.Content, "no sandbox") || len(tool.Content) > 1000 {
		t.Fatalf("tool turn = %.200q (error %v), want a short error naming the missing sandbox", tool.Content, tool.IsError)
	}
}

// TestCoreFlow_ExecutorHandlesLargeResponseInSandbox: the ~1 MB menu goes
// write_temp → read_lines → an extraction script → exec_python; only the
// return_spec fields reach the context and memory, the trace has
// large_response.detected and python_script.executed with the script
// hash, and the task's temp dir is gone afterwards.
func TestCoreFlow_ExecutorHandlesLargeResponseInSandbox(t *testing.T) {
	env := handlerstest.NewEnv(t)
	// Scripts run as an unprivileged uid, which must be able to reach the
	// task dirs: t.TempDir's parents are private, so use a fresh dir in /tmp.
	root, err := os.MkdirTemp("", "agentbus-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{Root: root})
	if err != nil {
		t.Fatalf("sandbox: %v (run deploy/sandbox/setup.sh)", err)
	}
	x := handlerstest.NewExecutor(env, offline.New(), env.Toolcalls)
	x.Sandbox = sb
	outs := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-large", events.TypeStepRequested, menuRequest("run-large-1")))
	it := handlerstest.Decode[orch.StepRequest](t, handlerstest.Only(t, outs, events.TypeStepIterated))
	tool := it.Turns[len(it.Turns)-1]
	if tool.IsError {
		t.Fatalf("extraction failed: %.300s", tool.Content)
	}
	var got struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(tool.Content), &got); err != nil || len(got.Items) == 0 {
		t.Fatalf("tool turn is not the extraction: %v (%d bytes)", err, len(tool.Content))
	}
	for _, item := range got.Items {
		if len(item) != 2 || item["item_id"] == nil || item["category"] == nil {
			t.Fatalf("extracted item %v, want only item_id and category", item)
		}
	}
	if len(tool.Content) > 300_000 {
		t.Fatalf("the context received %d bytes", len(tool.Content))
	}
	_, detected := handlerstest.AuditOf(t, outs, "large_response.detected")
	if detected["size_bytes"].(float64) < 900_000 || detected["file_id"] == "" {
		t.Fatalf("large_response.detected = %v", detected)
	}
	a, ran := handlerstest.AuditOf(t, outs, "python_script.executed")
	if a.ScriptHash == "" || len(a.ScriptHash) != 64 || ran["exit_code"].(float64) != 0 || ran["output_rows"] == nil {
		t.Fatalf("python_script.executed = %+v %v", a, ran)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Fatalf("task temp dir %s left behind", e.Name())
		}
	}
	// The next turn writes the extraction, validated, to memory.
	next := handlerstest.HandleStep(t, x, handlerstest.NewEvent(t, "step-large-2", events.TypeStepIterated, it))
	sf := handlerstest.Finished(t, next)
	if sf.Result.Outcome != orch.OutcomeComplete || !sf.Result.Validated {
		t.Fatalf("step result %+v", sf.Result)
	}
	m, err := env.Store.GetMemory(handlerstest.Ctx(t), sf.Result.MemoryKey)
	if err != nil || !strings.HasSuffix(sf.Result.MemoryKey, ":items") {
		t.Fatalf("memory %s: %v", sf.Result.MemoryKey, err)
	}
	var stored struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(m.Text), &stored); err != nil || len(stored.Items) != len(got.Items) ||
		stored.Items[0]["item_id"] != got.Items[0]["item_id"] {
		t.Fatalf("memory holds %d items (%v), the extraction %d", len(stored.Items), err, len(got.Items))
	}
}
