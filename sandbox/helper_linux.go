package sandbox

import (
	"fmt"
	"os"
)

// argv[0] values under which this package's code re-executes the current
// binary (/proc/self/exe) as a helper.
const (
	nsInitArg0 = "agentbus-sandbox-nsinit"
	jqArg0     = "agentbus-sandbox-jq"
	// nsInitFailed is the helper's exit status when it could not build the sandbox.
	nsInitFailed = 125
)

// init turns the process into a helper when it was re-executed as one, before
// main runs. Any binary that imports this package can therefore serve as its
// own helper; other invocations are unaffected.
func init() {
	if len(os.Args) != 2 {
		return
	}
	switch os.Args[0] {
	case nsInitArg0:
		if os.Getpid() != 1 { // only ever PID 1 of the fresh PID namespace
			return
		}
		err := nsInit(os.Args[1])
		fmt.Fprintf(os.Stderr, "sandbox: namespaces helper: %v\n", err)
		os.Exit(nsInitFailed)
	case jqArg0:
		os.Exit(jqMain(os.Args[1]))
	}
}
