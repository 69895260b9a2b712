package main

import (
	"context"
	"errors"
	"flag"
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
	"github.com/agentbus/agentbus/skills"
)

const gatesUsage = `Usage: agentbus gates [--nats URL] [--tenant T] [--set MODES | --reset]

Show or change which approval modes of a tenant's skill calls wait at a gate
(propose, approve, execute) before they are made. A destructive call always
does. A tenant the policy does not name follows its "*" entry, else the
default: network and delegated calls are gated, read_only and local_write
calls are not. An agent's definition can take modes out of its own runs'
gates (auto_approve).

  agentbus gates                                  print the policy of every tenant
  agentbus gates --tenant acme --set ""           gate only destructive calls of acme
  agentbus gates --tenant acme --set delegated    gate delegated calls (and destructive), not network ones
  agentbus gates --tenant '*' --set network,delegated,local_write
                                                  the policy of every tenant not named
  agentbus gates --tenant acme --reset            acme follows "*" or the default again

The policy is the approval_gates key of the NATS KV bucket config; the
executors follow it as it changes.

Flags:
`

// gates shows or changes the tenants' gated approval modes.
func gates(args []string) int { return gatesMain(context.Background(), args, os.Stdout, os.Stderr) }

// gatesMain is gates writing to stdout and stderr; it returns the exit
// code: 0 on success, 1 on failure, 2 on a usage error.
func gatesMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &tenantsCmd{name: "agentbus gates", stdout: stdout, stderr: stderr}
	fs := c.flags("")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), gatesUsage)
		fs.PrintDefaults()
	}
	tenant := fs.String("tenant", "", `tenant whose policy changes ("*": every tenant the policy does not name)`)
	set := fs.String("set", "", "comma-separated approval modes to gate (read_only, local_write, network, delegated); \"\" gates none but destructive")
	reset := fs.Bool("reset", false, "remove the tenant's entry: it follows \"*\" or the default again")
	if _, code, ok := c.parse(args, 0); !ok {
		return code
	}
	setting := false
	fs.Visit(func(f *flag.Flag) { setting = setting || f.Name == "set" })
	modes := modeList(*set)
	switch {
	case (setting || *reset) && *tenant == "":
		return c.usageError("--set and --reset need --tenant")
	case setting && *reset:
		return c.usageError("--set and --reset exclude each other")
	case *tenant != "" && *tenant != "*" && !auth.ValidID(*tenant):
		return c.usageError("tenant %q: ids are 1 to 64 letters, digits, '_' or '-'", *tenant)
	case *tenant != "" && !setting && !*reset:
		return c.usageError("--tenant needs --set or --reset")
	}
	return c.withJS(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		kv, err := js.KeyValue(ctx, handlers.BucketConfig)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("no %s bucket at %s: start agentbus up, or run agentbus setup, first", handlers.BucketConfig, c.natsURL)
		}
		if err != nil {
			return err
		}
		var policy map[string][]string
		if setting || *reset {
			policy, err = runctl.SetGatedModes(ctx, kv, *tenant, modes, *reset)
		} else {
			policy, err = runctl.GatedModesOf(ctx, kv)
		}
		if err != nil {
			return err
		}
		printGates(c.stdout, policy)
		return nil
	})
}

// modeList is a comma-separated list of approval modes, blanks left out.
func modeList(s string) []string {
	var modes []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes = append(modes, m)
		}
	}
	return modes
}

// printGates prints the gated modes of each tenant the policy names, then
// of every other tenant.
func printGates(w io.Writer, policy map[string][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tGATED MODES")
	modes := func(list []string) string {
		list = slices.DeleteFunc(slices.Clone(list), func(m string) bool { return m == skills.ModeDestructive })
		return strings.Join(append(list, skills.ModeDestructive), ", ")
	}
	for _, t := range slices.Sorted(maps.Keys(policy)) {
		if t != "*" {
			fmt.Fprintf(tw, "%s\t%s\n", t, modes(policy[t]))
		}
	}
	if all, ok := policy["*"]; ok {
		fmt.Fprintf(tw, "* (every other tenant)\t%s\n", modes(all))
	} else {
		fmt.Fprintf(tw, "* (every other tenant)\t%s (the default)\n", modes(runctl.DefaultGatedModes))
	}
	_ = tw.Flush()
}
