package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/agentbus/agentbus/events"
	"github.com/agentbus/agentbus/skills"
	"github.com/agentbus/agentbus/tools"
)

// StackConfig configures the all-in-one deployment.
type StackConfig struct {
	DataDir    string // NATS file store (and so the embedded store) lives here
	NATSPort   int    // -1 picks a free port
	HTTPAddr   string // ingress; "" disables it
	SkillsAddr string // listen address of Skills; default 127.0.0.1:0
	SkillsURL  string // an external Skill Service (streamable HTTP) instead of Skills
	// ExternalSkills uses the skill settings of Process as they are (a
	// Skill Service URL, or a stdio server) instead of Skills.
	ExternalSkills bool
	// Skills is the Skill Service the stack serves on SkillsAddr when
	// neither SkillsURL nor ExternalSkills names other skills; the
	// all-in-one binary passes the demo one (package skills/demo), which
	// this package does not import, so that the role binaries never link it.
	Skills http.Handler
	// Ingress holds the ingress's authentication and timeouts; its Addr
	// is HTTPAddr.
	Ingress    IngressOptions
	Log        zerolog.Logger
	Process    Config // shared settings (concurrency, timeouts); NATS and skills URLs are filled in
	SyncAlways bool
}

// Stack is a running all-in-one agentbus: embedded NATS, a Skill Service
// (StackConfig.Skills), every role and the ingress.
type Stack struct {
	Server      *server.Server
	Deps        *Deps
	SkillsURL   string
	IngressAddr string
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	httpSrv     *http.Server
	errMu       sync.Mutex
	err         error
}

// AllRoles are the roles of the all-in-one process: every one.
var AllRoles = func() []string {
	var names []string
	for _, r := range Roles {
		names = append(names, r.Name)
	}
	return names
}()

// StartStack starts everything and returns once the ingress listens.
func StartStack(ctx context.Context, cfg StackConfig) (*Stack, error) {
	ns, err := events.RunServer(events.ServerConfig{Port: cfg.NATSPort, StoreDir: filepath.Join(cfg.DataDir, "nats"), SyncAlways: cfg.SyncAlways,
		Logger: ServerLogger(cfg.Log)})
	if err != nil {
		return nil, err
	}
	s := &Stack{Server: ns, SkillsURL: cfg.SkillsURL}
	pc := cfg.Process
	pc.NATSURL, pc.inProcess = ns.ClientURL(), ns
	if cfg.ExternalSkills {
		s.SkillsURL = pc.SkillServiceURL
		if pc.SkillTransport == skills.TransportStdio {
			s.SkillsURL = "stdio: " + pc.SkillCommand
		}
	} else {
		if s.SkillsURL == "" {
			if err := s.serveSkills(cfg); err != nil {
				ns.Shutdown()
				return nil, err
			}
		}
		// The served Skill Service (or the given one) over streamable HTTP.
		pc.SkillServiceURL, pc.SkillTransport, pc.SkillCommand = s.SkillsURL, "", ""
	}
	fillDefaults(&pc)
	if pc.secretsKey == "" && pc.SecretsKeyFile == "" && cfg.DataDir != "" {
		// The all-in-one keeps its own key of the webhook tools'
		// secrets next to its data, readable by its user only.
		path := filepath.Join(cfg.DataDir, "secrets.key")
		if _, err := tools.LoadOrCreateKey(path); err != nil {
			s.shutdownInfra()
			return nil, err
		}
		pc.SecretsKeyFile = path
	}
	d, err := Connect(ctx, "agentbus", &pc, cfg.Log)
	if err != nil {
		s.shutdownInfra()
		return nil, err
	}
	s.Deps = d
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.goRun(func() error { return d.RunRoles(runCtx, AllRoles...) })
	if cfg.HTTPAddr != "" {
		ready := make(chan string, 1)
		s.goRun(func() error {
			opts := cfg.Ingress
			opts.Addr = cfg.HTTPAddr
			return ServeIngress(runCtx, d, opts, func(a string) { ready <- a })
		})
		select {
		case s.IngressAddr = <-ready:
		case <-time.After(10 * time.Second):
			s.Close()
			return nil, errors.New("ingress did not start: " + s.Err().Error())
		}
	}
	return s, nil
}

// serveSkills starts cfg.Skills on cfg.SkillsAddr.
func (s *Stack) serveSkills(cfg StackConfig) error {
	if cfg.Skills == nil {
		return errors.New("no Skill Service to serve: set StackConfig.Skills, SkillsURL or ExternalSkills")
	}
	if cfg.SkillsAddr == "" {
		cfg.SkillsAddr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.SkillsAddr)
	if err != nil {
		return fmt.Errorf("skill service: %w", err)
	}
	s.httpSrv = &http.Server{Handler: cfg.Skills, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.httpSrv.Serve(ln) }()
	s.SkillsURL = "http://" + ln.Addr().String() + "/tenants/{tenant}/mcp"
	return nil
}

func (s *Stack) goRun(fn func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(); err != nil {
			s.errMu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.errMu.Unlock()
		}
	}()
}

// Err returns the first error a component stopped with.
func (s *Stack) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		return errors.New("no error")
	}
	return s.err
}

// Close drains the roles, stops the ingress, the served skills and NATS.
func (s *Stack) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.Deps != nil {
		s.Deps.Close()
	}
	s.shutdownInfra()
}

func (s *Stack) shutdownInfra() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.httpSrv != nil {
		_ = s.httpSrv.Shutdown(ctx)
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// fillDefaults gives the zero settings of c their declared defaults
// (vars.go).
func fillDefaults(c *Config) {
	c.Store = cmp.Or(c.Store, envStore.def)
	c.Models.Default = cmp.Or(c.Models.Default, envModel.def)
	c.Models.MaxTokens = cmp.Or(c.Models.MaxTokens, envModelMaxTokens.def)
	c.Concurrency = cmp.Or(c.Concurrency, envConcurrency.def)
	c.HandleTimeout = cmp.Or(c.HandleTimeout, envHandleTimeout.def)
	c.AckWait = cmp.Or(c.AckWait, envAckWait.def)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, envMaxDeliver.def)
}
