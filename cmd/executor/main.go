package main

import (
	"os"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

func main() { os.Exit(app.Main("executor", os.Args[1:])) }
