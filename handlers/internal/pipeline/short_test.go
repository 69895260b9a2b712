package pipeline

import "testing"

// wholeRun skips t under -short (make test-unit): it drives runs through
// the roles on an in-process NATS server, as nearly every test of this
// package does, and together they take the better part of a minute.
// make test runs them.
func wholeRun(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("drives whole runs through the roles: make test runs it, -short does not")
	}
}
