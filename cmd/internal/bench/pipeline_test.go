package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbus/agentbus/orch"
)

// TestPipelineRunIsFiveSteps: the run every figure measures is five
// sequential steps, stage k fed by stage k-1, all completed and
// validated, whatever the offline planner would choose for the task.
func TestPipelineRunIsFiveSteps(t *testing.T) {
	ctx := context.Background()
	srv, err := startServer(modes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	d, err := deploy(ctx, srv, deployConfig{tcp: true, executors: 1, model: newPipelineModel()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	res, _, err := d.run(ctx, PipelineTask)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != stages {
		t.Fatalf("%d steps, want %d: %+v", len(res.Steps), stages, res.Steps)
	}
	for i, s := range res.Steps {
		k := i + 1
		if s.Status != orch.StepComplete || !s.Validated || len(s.Skills) != 1 || s.Skills[0] != fmt.Sprintf("stage%d", k) {
			t.Errorf("step %d: %s validated=%v skills %v", k, s.Status, s.Validated, s.Skills)
		}
		if k > 1 && (len(s.DependsOn) != 1 || s.DependsOn[0] != res.Steps[i-1].Index) {
			t.Errorf("step %d depends on %v, want step %d", k, s.DependsOn, res.Steps[i-1].Index)
		}
	}
	// Stage 4 fed stage 5 its ids, so the answer carries stage 5's items.
	if !strings.Contains(res.Response, "s5-1") {
		t.Errorf("the answer does not carry stage 5's results: %q", res.Response)
	}
}
