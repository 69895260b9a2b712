//go:build containers

package containers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stack is the Compose project started with podman.
type stack struct {
	t      *testing.T
	p      *Project
	podman string
	dir    string         // the containers' env files
	scale  map[string]int // replicas by service, 1 when absent
}

// newStack loads the Compose file with env over the placeholders' defaults,
// and finds podman: a missing podman fails the test.
func newStack(t *testing.T, env map[string]string) *stack {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman: %v (make test-containers installs it: deploy/containers/setup.sh)", err)
	}
	p, err := Load(composePath, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return &stack{t: t, p: p, podman: podman, dir: t.TempDir(), scale: map[string]int{}}
}

// run runs podman with args and returns its standard output.
func (s *stack) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.podman, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("podman %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func (s *stack) must(ctx context.Context, args ...string) string {
	s.t.Helper()
	out, err := s.run(ctx, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// replicas are the container names of service name.
func (s *stack) replicas(name string) []string {
	var cs []string
	for i := range max(s.scale[name], 1) {
		cs = append(cs, s.p.Container(name, i+1))
	}
	return cs
}

// requireImages fails the test unless every image of the active services
// is in podman's storage.
func (s *stack) requireImages(ctx context.Context, order []string) {
	s.t.Helper()
	for _, name := range order {
		img := s.p.Services[name].Image
		if _, err := s.run(ctx, "image", "exists", img); err != nil {
			s.t.Fatalf("image %s of service %s is not built: run make images first", img, name)
		}
	}
}

// up starts every active service in dependency order, each once what it
// depends on is started, healthy or completed as the file says.
func (s *stack) up(ctx context.Context) {
	s.t.Helper()
	order, err := s.p.Active()
	if err != nil {
		s.t.Fatal(err)
	}
	s.requireImages(ctx, order)
	s.down(context.WithoutCancel(ctx))
	s.t.Cleanup(func() {
		if s.t.Failed() {
			s.dumpLogs(context.Background())
		}
		s.down(context.Background())
	})
	s.must(ctx, "network", "create", s.p.Network())
	for _, v := range s.p.Volumes {
		s.must(ctx, "volume", "create", s.p.Volume(v))
	}
	for _, name := range order {
		s.waitDependencies(ctx, name)
		for i := range s.replicas(name) {
			s.start(ctx, name, i+1)
		}
	}
}

// start runs replica i of service name.
func (s *stack) start(ctx context.Context, name string, i int) {
	s.t.Helper()
	envFile := filepath.Join(s.dir, s.p.Container(name, i)+".env")
	if err := os.WriteFile(envFile, s.p.Services[name].EnvFile(), 0o600); err != nil {
		s.t.Fatal(err)
	}
	args, err := s.p.RunArgs(name, i, envFile, true)
	if err != nil {
		s.t.Fatal(err)
	}
	s.must(ctx, args...)
}

func (s *stack) waitDependencies(ctx context.Context, name string) {
	s.t.Helper()
	for dep, cond := range s.p.Services[name].DependsOn {
		for _, c := range s.replicas(dep) {
			switch cond {
			case "service_healthy":
				s.waitHealthy(ctx, c, 3*time.Minute)
			case "service_completed_successfully":
				code := s.must(ctx, "wait", c)
				if code != "0" {
					s.t.Fatalf("%s (which %s waits for) exited %s", c, name, code)
				}
			}
		}
	}
}

// waitHealthy runs the container's healthcheck until it passes.
func (s *stack) waitHealthy(ctx context.Context, container string, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := s.run(ctx, "healthcheck", "run", container)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s is not healthy after %s: %v", container, timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// hostAddr is the loopback address a published port of container got.
func (s *stack) hostAddr(ctx context.Context, container string, port int) string {
	s.t.Helper()
	out := s.must(ctx, "port", container, fmt.Sprintf("%d/tcp", port))
	if len(strings.Fields(out)) == 0 {
		s.t.Fatalf("%s publishes no port %d", container, port)
	}
	return strings.Fields(out)[0]
}

// down removes the project's containers, network and volumes.
func (s *stack) down(ctx context.Context) {
	ids, _ := s.run(ctx, "ps", "-aq", "--filter", "label=io.agentbus.compose.project="+s.p.Name)
	if ids != "" {
		_, _ = s.run(ctx, append([]string{"rm", "-f", "-t", "0"}, strings.Fields(ids)...)...)
	}
	_, _ = s.run(ctx, "network", "rm", "-f", s.p.Network())
	for _, v := range s.p.Volumes {
		_, _ = s.run(ctx, "volume", "rm", "-f", s.p.Volume(v))
	}
}

// logs are a container's standard output and error.
func (s *stack) logs(ctx context.Context, container string) string {
	cmd := exec.CommandContext(ctx, s.podman, "logs", container)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// dumpLogs writes every container's last log lines to the test log.
func (s *stack) dumpLogs(ctx context.Context) {
	order, _ := s.p.Active()
	for _, name := range order {
		for _, c := range s.replicas(name) {
			lines := strings.Split(strings.TrimSpace(s.logs(ctx, c)), "\n")
			s.t.Logf("--- %s (last %d lines)\n%s", c, min(len(lines), 30), strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	}
}

// exitCode is the exit code of a stopped container.
func (s *stack) exitCode(ctx context.Context, container string) string {
	return s.must(ctx, "inspect", "--format", "{{.State.ExitCode}}", container)
}
