package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
)

func main() {
	c := app.Parse("router", "the manager role: routes tasks, dispatches plan steps, replans, synthesises answers", os.Args[1:], nil)
	os.Exit(app.RunProcess("router", c, events.RoleRouter))
}
