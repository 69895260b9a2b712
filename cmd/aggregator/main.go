package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/events"
)

func main() {
	c := app.Parse("aggregator", "fan-in of step results per group, and the audit projection into the store", os.Args[1:], nil)
	os.Exit(app.RunProcess("aggregator", c, events.RoleAggregator, events.RoleProjector))
}
