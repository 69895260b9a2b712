package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/cmd/internal/app"
	"github.com/agentbus/agentbus/runclient"
)

// defsCmd is `agentbus agent|skill list|get|create|update|delete`: the
// tenant's agent and skill definitions through the definitions API
// (/agent/agents, /agent/skills). A spec is JSON, given as the last
// argument or read from --file ("-" for stdin); update reads the current
// version first unless --version names it.
func defsCmd(kind string) func([]string) int {
	return func(args []string) int {
		usage := fmt.Sprintf("Usage: agentbus %[1]s list | get <id> | create <json> | update <id> <json> | delete <id>\n"+
			"       (a spec may come from --file PATH, or - for stdin)", kind)
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, usage)
			return 2
		}
		sub := args[0]
		fs := flag.NewFlagSet("agentbus "+kind+" "+sub, flag.ExitOnError)
		url := ingressURL(fs)
		tenant := fs.String("tenant", "demo", "tenant id (a tenant credential names its own)")
		file := fs.String("file", "", "create, update: read the spec from this file (- for stdin)")
		version := fs.Int64("version", 0, "update, delete: the version replaced (update default: the current one)")
		app.ParseFlags(fs, args[1:])
		rest := fs.Args()
		spec, err := specArg(*file, rest, sub)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentbus "+kind+":", err)
			return 2
		}
		base := "/agent/" + kind + "s"
		client := runclient.NewHTTP(*url, nil).WithCredential(app.EnvKey.Value())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		id := func() (string, bool) {
			if len(rest) == 0 {
				fmt.Fprintln(os.Stderr, usage)
				return "", false
			}
			return rest[0], true
		}
		var out json.RawMessage
		switch sub {
		case "list":
			out, err = client.Definition(ctx, *tenant, http.MethodGet, base, nil, 0)
		case "get", "delete":
			x, ok := id()
			if !ok {
				return 2
			}
			method := map[string]string{"get": http.MethodGet, "delete": http.MethodDelete}[sub]
			out, err = client.Definition(ctx, *tenant, method, base+"/"+x, nil, *version)
		case "create":
			out, err = client.Definition(ctx, *tenant, http.MethodPost, base, spec, 0)
		case "update":
			x, ok := id()
			if !ok {
				return 2
			}
			v := *version
			if v == 0 {
				v, err = currentVersion(ctx, client, *tenant, base+"/"+x)
			}
			if err == nil {
				out, err = client.Definition(ctx, *tenant, http.MethodPut, base+"/"+x, spec, v)
			}
		default:
			fmt.Fprintln(os.Stderr, usage)
			return 2
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "agentbus %s %s: %v\n", kind, sub, err)
			return 1
		}
		fmt.Println(strings.TrimSpace(string(out)))
		return 0
	}
}

// specArg is the JSON spec of a create or update: --file, else the last
// argument.
func specArg(file string, rest []string, sub string) ([]byte, error) {
	if sub != "create" && sub != "update" {
		return nil, nil
	}
	switch {
	case file == "-":
		return io.ReadAll(os.Stdin)
	case file != "":
		return os.ReadFile(file)
	case len(rest) > 0 && strings.HasPrefix(strings.TrimSpace(rest[len(rest)-1]), "{"):
		return []byte(rest[len(rest)-1]), nil
	}
	return nil, fmt.Errorf("%s needs a JSON spec (as the last argument or --file)", sub)
}

// currentVersion reads the version of the definition at path.
func currentVersion(ctx context.Context, client *runclient.HTTP, tenant, path string) (int64, error) {
	cur, err := client.Definition(ctx, tenant, http.MethodGet, path, nil, 0)
	if err != nil {
		return 0, err
	}
	var v struct {
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(cur, &v); err != nil {
		return 0, fmt.Errorf("decode %s: %w", path, err)
	}
	return v.Version, nil
}
