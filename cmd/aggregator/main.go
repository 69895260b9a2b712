package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

func main() { os.Exit(app.Main("aggregator", os.Args[1:])) }
