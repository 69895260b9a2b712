package app

import (
	"fmt"
	"io"
)

// RunCommand runs the subcommand of a multi-command binary (agentbus,
// agentbus-dev) that args[0] names, with the rest of args, and returns its
// exit code. "-h", "--help" and "help" print usage to stdout; no command
// or an unknown one prints usage to stderr and returns 2.
func RunCommand(prog, usage string, args []string, cmds map[string]func([]string) int, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch cmd := args[0]; cmd {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fn, ok := cmds[cmd]
		if !ok {
			fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", prog, cmd, usage)
			return 2
		}
		return fn(args[1:])
	}
}
