package skills_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/schema"
	"github.com/agentbus/agentbus/skills"
)

// The MCP reference server, @modelcontextprotocol/server-everything, as
// deploy/mcp/setup.sh installs it. These tests fail (never skip) when it
// is missing.
const (
	everythingPackage = "@modelcontextprotocol/server-everything"
	everythingSetup   = "deploy/mcp/setup.sh"
)

// everythingScript returns node and the server's entry point, failing the
// test with what to run when either is missing or the installed version is
// not the one deploy/mcp/package.json pins. Under -short (make test-unit,
// the tier without set-up servers) it skips the test instead.
func everythingScript(t *testing.T) (node, script string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s (%s); make test runs it", everythingPackage, everythingSetup)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH; install node >= 20 and run %s", everythingSetup)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var pinned, installed struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON(t, filepath.Join(root, "deploy", "mcp", "package.json"), &pinned)
	want := pinned.Dependencies[everythingPackage]
	dir := filepath.Join(root, ".cache", "mcp", "node_modules", everythingPackage)
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatalf("%s is not installed in .cache/mcp; run %s", everythingPackage, everythingSetup)
	}
	if err := json.Unmarshal(b, &installed); err != nil || installed.Version != want {
		t.Fatalf("%s %q is installed in .cache/mcp, want %s; run %s", everythingPackage, installed.Version, want, everythingSetup)
	}
	return node, filepath.Join(dir, "dist", "index.js")
}

// everythingStdioConfig is a Config running server-everything over stdio;
// the test fails when it is not installed.
func everythingStdioConfig(t *testing.T) skills.Config {
	t.Helper()
	node, script := everythingScript(t)
	return skills.Config{Transport: skills.TransportStdio, Command: []string{node, script, "stdio"}}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startEverythingHTTP runs server-everything with transport ("sse" or
// "streamableHttp") on a free loopback port and returns its base URL once
// it accepts connections. The process is killed when the test ends.
func startEverythingHTTP(t *testing.T, transport string) string {
	t.Helper()
	node, script := everythingScript(t)
	var lastErr error
	for range 3 { // a port picked free may be taken before node binds it
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()

		out := &syncBuffer{}
		cmd := exec.Command(node, script, transport)
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
		cmd.Stdout, cmd.Stderr = out, out
		cmd.WaitDelay = 2 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatalf("start server-everything: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})

		// Ready is the server's own "… on port N" line: a successful dial
		// alone could reach another process that took the port first (this
		// one then exits with EADDRINUSE).
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ready := fmt.Sprintf("on port %d", port)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				lastErr = fmt.Errorf("server-everything %s exited: %s", transport, out.String())
			default:
				if strings.Contains(out.String(), ready) {
					return "http://" + addr
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			break
		}
		if lastErr == nil {
			t.Fatalf("server-everything %s did not listen on %s within 15s: %s", transport, addr, out.String())
		}
	}
	t.Fatal(lastErr)
	return ""
}

// everythingConfigs are plain Configs (Mode left to auto-detection) for
// server-everything over each transport.
func everythingConfigs(t *testing.T) map[string]func(t *testing.T) skills.Config {
	return map[string]func(t *testing.T) skills.Config{
		skills.TransportStdio: everythingStdioConfig,
		skills.TransportSSE: func(t *testing.T) skills.Config {
			return skills.Config{Transport: skills.TransportSSE, URL: startEverythingHTTP(t, "sse") + "/sse"}
		},
		skills.TransportStreamableHTTP: func(t *testing.T) skills.Config {
			return skills.Config{URL: startEverythingHTTP(t, "streamableHttp") + "/mcp"}
		},
	}
}

// TestEverythingInterop discovers, describes and calls the reference
// server's tools over every transport, in auto-detected plain mode.
func TestEverythingInterop(t *testing.T) {
	for name, cfg := range everythingConfigs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, cfg(t))
			ctx := testCtx(t)

			mode, tools, err := skills.DetectMode(ctx, c, "t1")
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if mode != skills.ModePlain || len(tools) < 5 {
				t.Fatalf("mode = %s with %d tools, want plain", mode, len(tools))
			}

			got, err := c.Find(ctx, "t1", "echo a message back", 3)
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if len(got) == 0 || got[0].Name != "echo" || got[0].Description == "" || got[0].Score <= 0 {
				t.Fatalf("Find(echo a message back) = %+v, want echo first", got)
			}
			if got, err := c.Find(ctx, "t1", "sum of two numbers", 3); err != nil || len(got) == 0 || got[0].Name != "get-sum" {
				t.Fatalf("Find(sum of two numbers) = %+v, %v; want get-sum first", got, err)
			}

			m, err := c.Load(ctx, "t1", "echo")
			if err != nil {
				t.Fatalf("Load(echo): %v", err)
			}
			in, err := schema.ParseShape(m.InputSchema)
			if err != nil || in.Type != "object" || in.Properties["message"].Type != "string" || !contains(in.Required, "message") {
				t.Fatalf("echo input schema = %s (%v)", m.InputSchema, err)
			}
			if string(m.OutputSchema) != string(skills.TextOutputSchema) || m.ExecutionMode != skills.ExecutionModeSync {
				t.Fatalf("echo manifest = %+v", m)
			}

			out, err := c.Call(ctx, "t1", "echo", json.RawMessage(`{"message":"hello agentbus"}`), "")
			if err != nil {
				t.Fatalf("Call(echo): %v", err)
			}
			if string(out) != `{"text":"Echo: hello agentbus"}` {
				t.Fatalf("Call(echo) = %s", out)
			}
			out, err = c.Call(ctx, "t1", "get-sum", json.RawMessage(`{"a":2,"b":3}`), "")
			if err != nil || !strings.Contains(string(out), "is 5") {
				t.Fatalf("Call(get-sum) = %s, %v", out, err)
			}

			// A tool with an output schema: the manifest carries it, and Call
			// returns the structured content.
			m, err = c.Load(ctx, "t1", "get-structured-content")
			if err != nil {
				t.Fatalf("Load(get-structured-content): %v", err)
			}
			outSchema, err := schema.ParseShape(m.OutputSchema)
			if err != nil || outSchema.Properties["temperature"].Type != "number" {
				t.Fatalf("get-structured-content output schema = %s (%v)", m.OutputSchema, err)
			}
			out, err = c.Call(ctx, "t1", "get-structured-content", json.RawMessage(`{"location":"Chicago"}`), "")
			if err != nil {
				t.Fatalf("Call(get-structured-content): %v", err)
			}
			var weather struct {
				Temperature *float64 `json:"temperature"`
				Conditions  string   `json:"conditions"`
			}
			if err := json.Unmarshal(out, &weather); err != nil || weather.Temperature == nil || weather.Conditions == "" {
				t.Fatalf("Call(get-structured-content) = %s (%v)", out, err)
			}

			// Failures map to the package's sentinels.
			if _, err := c.Load(ctx, "t1", "no-such-tool"); !errors.Is(err, skills.ErrSkillNotFound) {
				t.Fatalf("Load(no-such-tool) err = %v, want ErrSkillNotFound", err)
			}
			if _, err := c.Call(ctx, "t1", "no-such-tool", nil, ""); !errors.Is(err, skills.ErrSkillNotFound) {
				t.Fatalf("Call(no-such-tool) err = %v, want ErrSkillNotFound", err)
			}
			if _, err := c.Call(ctx, "t1", "get-sum", json.RawMessage(`{"a":"two"}`), ""); !errors.Is(err, skills.ErrSkillFailed) {
				t.Fatalf("Call(get-sum, bad args) err = %v, want ErrSkillFailed", err)
			}
		})
	}
}

// TestEverythingStdioEnvironment: a stdio server gets Config.Env and the
// basics, not the rest of this process's environment.
func TestEverythingStdioEnvironment(t *testing.T) {
	t.Setenv("AGENTBUS_TEST_SECRET", "must-not-leak")
	node, script := everythingScript(t)
	c := newClient(t, skills.Config{Transport: skills.TransportStdio, Command: []string{node, script, "stdio"},
		Env: []string{"AGENTBUS_TEST_VISIBLE=yes"}})
	out, err := c.Call(testCtx(t), "t1", "get-env", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var wrapped map[string]string
	if err := json.Unmarshal(out, &wrapped); err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(wrapped[skills.TextOutputField]), &env); err != nil {
		t.Fatalf("get-env text = %q: %v", wrapped[skills.TextOutputField], err)
	}
	if env["AGENTBUS_TEST_VISIBLE"] != "yes" || env["PATH"] == "" {
		t.Fatalf("server environment lacks Config.Env or PATH: %v", env)
	}
	if _, ok := env["AGENTBUS_TEST_SECRET"]; ok {
		t.Fatal("the stdio server inherited AGENTBUS_TEST_SECRET")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
