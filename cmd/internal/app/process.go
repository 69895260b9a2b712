package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/handlers"
)

// SignalContext returns a context cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Process is a role binary: cmd/<Name> runs the workers of Roles.
type Process struct {
	Name    string
	Summary string
	Roles   []string
}

// Processes are the role binaries; the ingress, which serves HTTP, is the
// one other binary of a deployment.
var Processes = []Process{
	{"router", "the manager role: routes tasks, dispatches plan steps, replans, synthesises answers", []string{handlers.RoleRouter}},
	{"planner", "SubAgent-A: discovers skills over MCP and writes verified plans", []string{handlers.RolePlanner}},
	{"executor", "SubAgent-B: runs plan steps with only their allowed skills and writes outputs to memory", []string{handlers.RoleExecutor}},
	{"aggregator", "fan-in of step results per group, and the projections into the store", []string{handlers.RoleAggregator, handlers.RoleProjector}},
}

// Main is the main of the role binary name: it parses args and runs the
// process's roles until SIGTERM. It returns the exit code.
func Main(name string, args []string) int {
	i := slices.IndexFunc(Processes, func(p Process) bool { return p.Name == name })
	if i < 0 {
		fmt.Fprintf(os.Stderr, "%s: no such role process\n", name)
		return 2
	}
	p := Processes[i]
	return RunProcess(p.Name, Parse(p.Name, p.Summary, args, nil), p.Roles...)
}

// RunProcess runs the workers of roles in a process until SIGTERM, then
// drains them. It returns the process exit code.
func RunProcess(process string, c *Config, roles ...string) int {
	log := Logger(process, c.LogLevel)
	ctx, stop := SignalContext()
	defer stop()
	d, err := Connect(ctx, process, c, log)
	if err != nil {
		log.Error().Err(err).Msg("start")
		return 1
	}
	defer d.Close()
	if err := d.RunRoles(ctx, roles...); err != nil {
		log.Error().Err(err).Msg("run")
		return 1
	}
	log.Info().Msg("drained; bye")
	return 0
}

// IngressOptions configures the HTTP API of a process.
type IngressOptions struct {
	Addr       string
	Token      string
	RunTimeout time.Duration
}

// ErrTokenRequired refuses a bind beyond loopback without a service token.
var ErrTokenRequired = errors.New("binding beyond loopback requires a service token (--token or INGRESS_TOKEN)")

// ServeIngress serves the HTTP API on opts.Addr until ctx ends, then shuts
// down gracefully. ready, when set, receives the bound address.
func ServeIngress(ctx context.Context, d *Deps, opts IngressOptions, ready func(addr string)) error {
	if err := checkBind(opts.Addr, opts.Token); err != nil {
		return err
	}
	creds, err := d.Credentials(ctx)
	if err != nil {
		return err
	}
	g := handlers.NewIngress(d.JS, d.Store, d.Log.With().Str("role", "ingress").Logger(),
		handlers.IngressConfig{RunTimeout: opts.RunTimeout, ServiceToken: opts.Token, Credentials: creds})
	if err := retry(ctx, g.Start); err != nil {
		return err
	}
	defer g.Stop()
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr().String())
	}
	d.Log.Info().Str("addr", ln.Addr().String()).Msg("ingress listening")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

func checkBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) || token != "" {
		return nil
	}
	return ErrTokenRequired
}

// LogFatal logs err and returns exit code 1.
func LogFatal(log zerolog.Logger, what string, err error) int {
	log.Error().Err(err).Msg(what)
	return 1
}
