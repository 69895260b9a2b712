package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
)

func main() {
	c := app.Parse("executor", "SubAgent-B: runs plan steps with only their allowed skills and writes outputs to memory", os.Args[1:], nil)
	os.Exit(app.RunProcess("executor", c, events.RoleExecutor))
}
