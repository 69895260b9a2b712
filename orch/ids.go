package orch

import (
	"fmt"

	"github.com/google/uuid"
)

// idNamespace is the UUIDv5 namespace of the ids the decider derives.
var idNamespace = uuid.MustParse("6f1c3c1e-52b4-4a52-9a55-8d1f3b6a7c10")

// deriveID returns a deterministic id for key within a run: plan, group and
// task ids derive from the run id, so a redelivered input names them the
// same.
func deriveID(runID string, key any) string {
	return uuid.NewSHA1(idNamespace, fmt.Appendf(nil, "%s/%v", runID, key)).String()
}
