package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

func main() { os.Exit(app.Main("router", os.Args[1:])) }
