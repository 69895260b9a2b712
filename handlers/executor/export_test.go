package executor

import (
	"context"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/orch"
)

// What the external tests reach of the executor's unexported parts.
var (
	CarriedInputs = carriedInputs
	SpawnTools    = spawnTools
)

// ReadInputs reads the outputs of the steps req's step depends on, as a
// turn of x does before it calls the model.
func ReadInputs(ctx context.Context, x *Executor, req orch.StepRequest) (map[string]json.RawMessage, error) {
	t := &turn{exec: x, req: req}
	return t.readInputs(ctx)()
}
