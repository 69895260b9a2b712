package manifests

import (
	"fmt"
	"os"
	"testing"
)

// ingressBinary is the binary of the HTTP API (cmd/ingress), the one
// binary of a deployment that is not a role process.
const ingressBinary = "ingress"

// TestMain runs the tests in deploy/kubernetes, where the manifests'
// relative paths start.
func TestMain(m *testing.M) {
	if err := os.Chdir("../../../deploy/kubernetes"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
