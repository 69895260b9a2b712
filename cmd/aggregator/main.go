// Command aggregator runs agentbus's aggregator role: fan-in of step results per group, and the audit projection into the store.
// Run any number of copies against one NATS; they share the work.
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
