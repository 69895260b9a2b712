package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/runclient"
)

// memoryCmd is `agentbus memory add|query`: a fact for later runs to
// recall (POST /agent/memory), or a search of what they would recall
// (GET /agent/memory/query).
func memoryCmd(args []string) int {
	if len(args) == 0 || args[0] != "add" && args[0] != "query" {
		fmt.Fprintln(os.Stderr, "Usage: agentbus memory add [--scope user|tenant] [--user ID] --label LABEL \"<fact>\"\n"+
			"       agentbus memory query [--scope session|user|tenant] [--user ID] [--top-k N] \"<text>\"")
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("agentbus memory "+sub, flag.ExitOnError)
	url := ingressURL(fs)
	tenant := fs.String("tenant", "demo", "tenant id (a tenant credential names its own)")
	user := fs.String("user", "cli-user", "the user whose memory it is (a user credential names its own)")
	scope := fs.String("scope", "", "add: user (default) or tenant; query: session, user or tenant (default every scope the caller may read)")
	label := fs.String("label", "", "add: the fact's name, [a-z0-9_]: a fact posted again under it replaces it")
	topK := fs.Int("top-k", 0, "query: the number of hits (default the server's)")
	app.ParseFlags(fs, args[1:])
	text := strings.Join(fs.Args(), " ")
	if text == "" {
		fs.Usage()
		return 2
	}
	client := runclient.NewHTTP(*url, nil).WithCredential(app.EnvKey.Value())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if sub == "add" {
		f := runclient.MemoryFact{Scope: *scope, UserID: *user, Label: *label, Text: text}
		if f.Scope == "" {
			f.Scope = "user"
		}
		if f.Scope == "tenant" {
			f.UserID = ""
		}
		m, err := client.Remember(ctx, *tenant, f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentbus memory add:", err)
			return 1
		}
		fmt.Printf("remembered %s (%s scope", m.Key, m.Scope)
		if !m.TTLAt.IsZero() {
			fmt.Printf(", until %s", m.TTLAt.Format(time.RFC3339))
		}
		fmt.Println(")")
		return 0
	}
	hits, err := client.Recall(ctx, *tenant, runclient.MemoryQuery{UserID: *user, Scope: *scope, Text: text, TopK: *topK})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbus memory query:", err)
		return 1
	}
	for _, h := range hits {
		fmt.Printf("%.3f  %s  %s\n", h.Score, h.Key, h.Text)
	}
	if len(hits) == 0 {
		fmt.Println("(no memory)")
	}
	return 0
}
