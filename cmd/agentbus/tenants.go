package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbus/agentbus/auth"
	"github.com/agentbus/agentbus/cmd/internal/app"
)

const tenantsUsage = `Usage: agentbus tenants <command> [flags]

Manage the tenant API keys the ingress accepts (abk_<key id>_<secret>). Only a
hash of each key is stored, in the NATS KV bucket ` + auth.KeyBucket + `.

Commands:
  create --tenant T [--user U]   issue a key for tenant T, bound to user U if given
  list   [--tenant T]            list the keys (of tenant T), never their secrets
  rotate <key id>                issue a new key for the same tenant and user; the old one is refused from then on
  revoke <key id>                refuse the key from now on

Every command takes --nats URL (env NATS_URL, default nats://127.0.0.1:4222).
Run "agentbus tenants <command> --help" for its flags.
`

// tenantsTimeout bounds one tenants command against NATS.
const tenantsTimeout = 30 * time.Second

// tenants manages tenant API keys: create, list, rotate and revoke.
func tenants(args []string) int {
	return tenantsMain(context.Background(), args, os.Stdout, os.Stderr)
}

// tenantsMain is tenants writing to stdout and stderr; it returns the exit
// code: 0 on success, 1 on failure, 2 on a usage error.
func tenantsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tenantsUsage)
		return 2
	}
	cmds := map[string]func(context.Context, *tenantsCmd, []string) int{
		"create": tenantsCreate, "list": tenantsList, "rotate": tenantsRotate, "revoke": tenantsRevoke,
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, tenantsUsage)
		return 0
	}
	fn, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "agentbus tenants: unknown command %q\n\n%s", args[0], tenantsUsage)
		return 2
	}
	c := &tenantsCmd{name: "agentbus tenants " + args[0], stdout: stdout, stderr: stderr}
	return fn(ctx, c, args[1:])
}

// tenantsCmd is one tenants command: its flags, output and key store.
type tenantsCmd struct {
	name           string
	stdout, stderr io.Writer
	fs             *flag.FlagSet
	natsURL        string
}

// flags returns the command's flag set with --nats, whose usage line
// shows synopsis.
func (c *tenantsCmd) flags(synopsis string) *flag.FlagSet {
	c.fs = flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.fs.SetOutput(c.stderr)
	app.EnvNATSURL.Bind(c.fs, &c.natsURL)
	c.fs.Usage = func() {
		fmt.Fprintf(c.fs.Output(), "Usage: %s %s\n\nFlags:\n", c.name, synopsis)
		c.fs.PrintDefaults()
	}
	return c.fs
}

// parse parses args, flags before or after the positional arguments, and
// checks there are want of those. ok false means return code.
func (c *tenantsCmd) parse(args []string, want int) (pos []string, code int, ok bool) {
	for {
		if err := app.CheckFlags(c.fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, app.ReportUsage(c.stderr, c.name, err), false
		}
		if c.fs.NArg() == 0 {
			break
		}
		pos = append(pos, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	if len(pos) != want {
		return nil, c.usageError("want %d argument(s), got %d", want, len(pos)), false
	}
	return pos, 0, true
}

// usageError prints a usage error and the usage, and returns 2.
func (c *tenantsCmd) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s\n\n", c.name, fmt.Sprintf(format, args...))
	c.fs.Usage()
	return 2
}

// fail prints err and returns 1.
func (c *tenantsCmd) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return 1
}

// withKeys connects to NATS, opens the key store and runs fn on it
// within tenantsTimeout; it returns the exit code: 1 if any step failed.
func (c *tenantsCmd) withKeys(ctx context.Context, fn func(context.Context, *auth.Keys) error) int {
	return c.withJS(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		keys, err := auth.NewKeys(ctx, js)
		if err != nil {
			return err
		}
		return fn(ctx, keys)
	})
}

// withJS connects to NATS (as admin when NATS_USER is set: the server may
// have per-role permissions) and runs fn within tenantsTimeout; it returns
// the exit code: 1 if any step failed.
func (c *tenantsCmd) withJS(ctx context.Context, fn func(context.Context, jetstream.JetStream) error) int {
	ctx, cancel := context.WithTimeout(ctx, tenantsTimeout)
	defer cancel()
	opts := []nats.Option{nats.Name("agentbus-tenants"), nats.Timeout(5 * time.Second)}
	if user := app.EnvNATSUser.Value(); user != "" {
		opts = append(opts, nats.UserInfo(user, app.EnvNATSPassword.Value()))
	}
	nc, err := nats.Connect(c.natsURL, opts...)
	if err != nil {
		return c.fail(fmt.Errorf("connect to NATS at %s: %w", c.natsURL, err))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		err = fn(ctx, js)
	}
	if err != nil {
		return c.fail(err)
	}
	return 0
}

func tenantsCreate(ctx context.Context, c *tenantsCmd, args []string) int {
	fs := c.flags("--tenant T [--user U]")
	tenant := fs.String("tenant", "", "tenant id the key speaks for (required)")
	user := fs.String("user", "", "user id the key is bound to (optional)")
	if _, code, ok := c.parse(args, 0); !ok {
		return code
	}
	switch {
	case *tenant == "":
		return c.usageError("--tenant is required")
	case !auth.ValidID(*tenant):
		return c.usageError("tenant %q: ids are 1 to 64 letters, digits, '_' or '-'", *tenant)
	case *user != "" && !auth.ValidID(*user):
		return c.usageError("user %q: ids are 1 to 64 letters, digits, '_' or '-'", *user)
	}
	return c.withKeys(ctx, func(ctx context.Context, keys *auth.Keys) error {
		key, rec, err := keys.Create(ctx, *tenant, *user)
		if err == nil {
			c.printKey("API key for "+owner(rec), key, rec)
		}
		return err
	})
}

func tenantsList(ctx context.Context, c *tenantsCmd, args []string) int {
	fs := c.flags("[--tenant T]")
	tenant := fs.String("tenant", "", "list only this tenant's keys")
	if _, code, ok := c.parse(args, 0); !ok {
		return code
	}
	if *tenant != "" && !auth.ValidID(*tenant) {
		return c.usageError("tenant %q: ids are 1 to 64 letters, digits, '_' or '-'", *tenant)
	}
	return c.withKeys(ctx, func(ctx context.Context, keys *auth.Keys) error {
		recs, err := keys.List(ctx, *tenant)
		if err != nil {
			return err
		}
		return c.printList(recs)
	})
}

// printList prints the key records as a table.
func (c *tenantsCmd) printList(recs []auth.KeyRecord) error {
	if len(recs) == 0 {
		fmt.Fprintln(c.stdout, "no keys")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY ID\tTENANT\tUSER\tCREATED\tSTATUS\tREPLACED BY")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.KeyID, r.TenantID, orDash(r.UserID),
			r.CreatedAt.UTC().Format(time.RFC3339), r.Status(), orDash(r.ReplacedBy))
	}
	return tw.Flush()
}

func tenantsRotate(ctx context.Context, c *tenantsCmd, args []string) int {
	c.flags("<key id>")
	pos, code, ok := c.parse(args, 1)
	if !ok {
		return code
	}
	return c.withKeys(ctx, func(ctx context.Context, keys *auth.Keys) error {
		key, rec, err := keys.Rotate(ctx, pos[0])
		if err == nil {
			c.printKey("New API key for "+owner(rec)+", replacing "+pos[0], key, rec)
			fmt.Fprintf(c.stdout, "Key %s is refused from now on.\n", pos[0])
		}
		return err
	})
}

func tenantsRevoke(ctx context.Context, c *tenantsCmd, args []string) int {
	c.flags("<key id>")
	pos, code, ok := c.parse(args, 1)
	if !ok {
		return code
	}
	return c.withKeys(ctx, func(ctx context.Context, keys *auth.Keys) error {
		err := keys.Revoke(ctx, pos[0])
		if err == nil {
			fmt.Fprintf(c.stdout, "Key %s revoked: it is refused from now on.\n", pos[0])
		}
		return err
	})
}

// printKey shows a new key, the only time it is ever shown.
func (c *tenantsCmd) printKey(title, key string, rec auth.KeyRecord) {
	fmt.Fprintf(c.stdout, "%s:\n\n  %s\n\nKey id: %s\n", title, key, rec.KeyID)
	fmt.Fprintln(c.stdout, "Store the key now: it will not be shown again (only its hash is kept).")
}

// owner describes whom a key speaks for.
func owner(r auth.KeyRecord) string {
	s := "tenant " + r.TenantID
	if r.UserID != "" {
		s += ", user " + r.UserID
	}
	return s
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
