package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/handlers"
	"github.com/agentbus/agentbus/handlers/runctl"
)

const policyUsage = `Usage: agentbus policy [--nats URL] [--tenant T (--set NAME=CHOICE | --reset NAME)]

Show or change a tenant's choices of how its runs treat untrusted content
and what their trace keeps. A tenant the policy does not name follows its
"*" entry, else the default (the first choice):

  taint_policy      gate | relaxed   a step that read an open-world result makes
                                     side-effecting calls only through an approval gate
  injection_policy  record | stop    a suspected prompt injection is traced, or ends
                                     the run UNSAFE_DETECTION
  payload_records   off | keep       the trace keeps each model call's request and
                                     answer and each tool call's arguments and result,
                                     redacted and clipped to 8 KiB

  agentbus policy                                         print every tenant's choices
  agentbus policy --tenant acme --set payload_records=keep
  agentbus policy --tenant '*' --set injection_policy=stop
  agentbus policy --tenant acme --reset payload_records   acme follows "*" or the default

The choices are keys of the NATS KV bucket config; the roles follow them as
they change.

Flags:
`

// policy shows or changes the tenants' per-tenant choices.
func policy(args []string) int { return policyMain(context.Background(), args, os.Stdout, os.Stderr) }

// policyMain is policy writing to stdout and stderr; it returns the exit
// code: 0 on success, 1 on failure, 2 on a usage error.
func policyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &tenantsCmd{name: "agentbus policy", stdout: stdout, stderr: stderr}
	fs := c.flags("")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), policyUsage)
		fs.PrintDefaults()
	}
	tenant := fs.String("tenant", "", `tenant whose choice changes ("*": every tenant the policy does not name)`)
	set := fs.String("set", "", "NAME=CHOICE to set, for example payload_records=keep")
	reset := fs.String("reset", "", "NAME whose entry of the tenant is removed")
	if _, code, ok := c.parse(args, 0); !ok {
		return code
	}
	key, choice, _ := strings.Cut(*set, "=")
	if *reset != "" {
		key = *reset
	}
	names := slices.Sorted(maps.Keys(runctl.TenantChoiceKeys))
	switch {
	case (*set != "" || *reset != "") && *tenant == "":
		return c.usageError("--set and --reset need --tenant")
	case *set != "" && *reset != "":
		return c.usageError("--set and --reset exclude each other")
	case *tenant != "" && *set == "" && *reset == "":
		return c.usageError("--tenant needs --set or --reset")
	case *tenant != "" && *tenant != "*" && !auth.ValidID(*tenant):
		return c.usageError("tenant %q: ids are 1 to 64 letters, digits, '_' or '-'", *tenant)
	case key != "" && runctl.TenantChoiceKeys[key] == nil:
		return c.usageError("%q is not one of %v", key, names)
	case *set != "" && !slices.Contains(runctl.TenantChoiceKeys[key], choice):
		return c.usageError("%s is one of %v", key, runctl.TenantChoiceKeys[key])
	}
	return c.withJS(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		kv, err := js.KeyValue(ctx, handlers.BucketConfig)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("no %s bucket at %s: start agentbus up, or run agentbus setup, first", handlers.BucketConfig, c.natsURL)
		}
		if err != nil {
			return err
		}
		if *tenant != "" {
			if _, err := runctl.SetTenantChoice(ctx, kv, key, *tenant, choice); err != nil {
				return err
			}
		}
		all := map[string]map[string]string{}
		for _, name := range names {
			if all[name], err = runctl.TenantChoicesOf(ctx, kv, name); err != nil {
				return err
			}
		}
		printPolicy(c.stdout, names, all)
		return nil
	})
}

// printPolicy prints each named tenant's choices, then every other
// tenant's; a choice a tenant does not set is its "*" entry or the
// default.
func printPolicy(w io.Writer, names []string, all map[string]map[string]string) {
	tenants := map[string]bool{}
	for _, m := range all {
		for t := range m {
			if t != "*" {
				tenants[t] = true
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\t"+strings.ToUpper(strings.Join(names, "\t")))
	row := func(label, tenant string) {
		cells := []string{label}
		for _, name := range names {
			c, ok := all[name][tenant]
			if !ok {
				c, ok = all[name]["*"]
			}
			if !ok {
				c = runctl.TenantChoiceKeys[name][0] + " (default)"
			}
			cells = append(cells, c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, t := range slices.Sorted(maps.Keys(tenants)) {
		row(t, t)
	}
	row("* (every other tenant)", "*")
	_ = tw.Flush()
}
