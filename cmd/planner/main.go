package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
)

func main() {
	c := app.Parse("planner", "SubAgent-A: discovers skills over MCP and writes verified plans", os.Args[1:], nil)
	os.Exit(app.RunProcess("planner", c, events.RolePlanner))
}
