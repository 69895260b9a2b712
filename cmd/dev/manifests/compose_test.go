package manifests

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"sigs.k8s.io/yaml"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

// The Compose deployment, relative to this directory.
const (
	composeDir  = "../compose"
	composeFile = composeDir + "/compose.yaml"
	composeEnv  = composeDir + "/agentbus.env"
)

// composeExtras are the Compose services beyond the Kubernetes base's
// Deployments and NATS nodes: the store, the demo Skill Service, and the
// topology set-up (the base's Job agentbus-setup).
var composeExtras = []string{"opensearch", "skills", "setup"}

// interpolation is a Compose variable with an optional default,
// ${NAME} or ${NAME:-default}.
var interpolation = regexp.MustCompile(`^\$\{([A-Z0-9_]+)(?::-(.*))?\}$`)

// loadCompose decodes compose.yaml strictly (duplicate keys fail) into a
// generic map, and returns its services.
func loadCompose(t *testing.T) map[string]map[string]any {
	t.Helper()
	raw, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	services, ok := doc["services"].(map[string]any)
	if !ok {
		t.Fatalf("%s has no services", composeFile)
	}
	out := map[string]map[string]any{}
	for name, s := range services {
		svc, ok := s.(map[string]any)
		if !ok {
			t.Fatalf("%s: service %s is not a mapping", composeFile, name)
		}
		out[name] = svc
	}
	return out
}

// environment is a service's environment, which the Compose file writes
// as a mapping.
func environment(t *testing.T, name string, svc map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	raw, ok := svc["environment"].(map[string]any)
	if !ok {
		t.Fatalf("%s: service %s has no environment mapping", composeFile, name)
	}
	for k, v := range raw {
		env[k] = fmt.Sprint(v)
	}
	return env
}

// TestComposeNamesTheSameServices: compose.yaml parses, and has a service
// for each NATS node and each Deployment of the Kubernetes base, plus the
// store and the demo skills, and no other.
func TestComposeNamesTheSameServices(t *testing.T) {
	m := load(t)
	services := loadCompose(t)
	sts := m.natsStatefulSet(t)
	want := slices.Clone(composeExtras)
	for i := range natsReplicas {
		want = append(want, fmt.Sprintf("%s-%d", sts.Name, i))
	}
	want = append(want, slices.Collect(maps.Keys(m.deployments))...)
	for _, name := range want {
		if _, ok := services[name]; !ok {
			t.Errorf("%s has no service %s", composeFile, name)
		}
	}
	for name := range services {
		if !slices.Contains(want, name) {
			t.Errorf("%s has service %s, which the Kubernetes base does not (want %v)", composeFile, name, want)
		}
	}
}

// TestComposeProcessesLogInAsThemselves: each agentbus binary's service
// runs its image as its own NATS user, with the password variable the NATS
// nodes read for that user.
func TestComposeProcessesLogInAsThemselves(t *testing.T) {
	services := loadCompose(t)
	for _, name := range binaries() {
		svc, ok := services[name]
		if !ok {
			continue // TestComposeNamesTheSameServices reports it
		}
		if img, _ := svc["image"].(string); !strings.HasPrefix(img, "agentbus/"+name+":") {
			t.Errorf("compose service %s runs image %q, want agentbus/%s", name, img, name)
		}
		build, _ := svc["build"].(map[string]any)
		if args, _ := build["args"].(map[string]any); args["BINARY"] != name {
			t.Errorf("compose service %s builds BINARY=%v, want %s", name, args["BINARY"], name)
		}
		env := environment(t, name, svc)
		user := name
		if name == ingressBinary {
			user = app.UserIngress
		}
		if env[envNATSUser] != user {
			t.Errorf("compose service %s: %s is %q, want %q", name, envNATSUser, env[envNATSUser], user)
		}
		if v := interpolation.FindStringSubmatch(env[envNATSPass]); v == nil || v[1] != passwordVar(user) {
			t.Errorf("compose service %s: %s is %q, want ${%s…}, the variable its NATS nodes read", name, envNATSPass,
				env[envNATSPass], passwordVar(user))
		}
	}
}

// TestComposeNATSCluster: each NATS node mounts the Compose nats.conf and
// the generated auth.conf, which nats-server accepts: the node's name, a
// route to every node, and the code's users with their passwords.
func TestComposeNATSCluster(t *testing.T) {
	m := load(t)
	services := loadCompose(t)
	sts := m.natsStatefulSet(t)
	var nodes []string
	for i := range natsReplicas {
		nodes = append(nodes, fmt.Sprintf("%s-%d", sts.Name, i))
	}
	for _, node := range nodes {
		svc, ok := services[node]
		if !ok {
			continue // TestComposeNamesTheSameServices reports it
		}
		t.Run(node, func(t *testing.T) {
			if cmd := fmt.Sprint(svc["command"]); cmd != "[--config /etc/nats/nats.conf]" {
				t.Fatalf("command %s, want --config /etc/nats/nats.conf", cmd)
			}
			vols := fmt.Sprint(svc["volumes"])
			for _, mount := range []string{"./nats.conf:/etc/nats/nats.conf:ro", "../kubernetes/" + authFile + ":/etc/nats/auth.conf:ro"} {
				if !strings.Contains(vols, mount) {
					t.Errorf("volumes %s lack %s", vols, mount)
				}
			}
			env := environment(t, node, svc)
			dir := t.TempDir()
			for src, dst := range map[string]string{composeDir + "/nats.conf": "nats.conf", authFile: "auth.conf"} {
				b, err := os.ReadFile(src)
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, dst), b, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			passwords := map[string]string{}
			for k, v := range env {
				if p := interpolation.FindStringSubmatch(v); p != nil {
					v = p[2] // the default, as with an empty environment
				}
				t.Setenv(k, v)
				passwords[k] = v
			}
			opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
			if err != nil {
				t.Fatalf("nats-server refuses the configuration: %v", err)
			}
			if opts.ServerName != node {
				t.Errorf("server_name %q, want %q", opts.ServerName, node)
			}
			if !opts.JetStream {
				t.Error("JetStream is not enabled")
			}
			var hosts []string
			for _, r := range opts.Routes {
				hosts = append(hosts, r.Hostname())
			}
			if !sameSet(hosts, nodes) {
				t.Errorf("routes go to %v, want every node: %v", hosts, nodes)
			}
			for _, u := range opts.Users {
				if v, ok := passwords[passwordVar(u.Username)]; !ok || v != u.Password {
					t.Errorf("user %s: the node reads password %q, not its %s %q", u.Username, u.Password, passwordVar(u.Username), v)
				}
			}
		})
	}
}

// composeEnvFile reads agentbus.env.
func composeEnvFile(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env
}

// TestComposeSetsTheTopologyUp: the setup service runs agentbus setup as
// admin, with the NATS nodes' password variable for admin, once (no
// restart); every agentbus process waits for it to succeed; agentbus.env's
// REPLICAS is one per NATS node, as in the Kubernetes base.
func TestComposeSetsTheTopologyUp(t *testing.T) {
	services := loadCompose(t)
	setup, ok := services["setup"]
	if !ok {
		t.Fatal("no setup service")
	}
	if cmd, _ := setup["command"].([]any); len(cmd) == 0 || cmd[0] != "setup" || setup["image"] != "agentbus/agentbus:latest" {
		t.Errorf("setup runs %v %v, want agentbus/agentbus:latest setup", setup["image"], setup["command"])
	}
	env := environment(t, "setup", setup)
	if v := interpolation.FindStringSubmatch(env[envNATSPass]); env[envNATSUser] != app.UserAdmin || v == nil || v[1] != passwordVar(app.UserAdmin) {
		t.Errorf("setup logs in as %q with %q, want admin with ${%s…}", env[envNATSUser], env[envNATSPass], passwordVar(app.UserAdmin))
	}
	if setup["restart"] != "no" {
		t.Errorf("setup restart %v, want no: it runs once", setup["restart"])
	}
	for _, name := range binaries() {
		deps, _ := services[name]["depends_on"].(map[string]any)
		cond, _ := deps["setup"].(map[string]any)
		if cond["condition"] != "service_completed_successfully" {
			t.Errorf("compose service %s does not wait for setup to succeed: depends_on %v", name, deps)
		}
	}
	if got := composeEnvFile(t)["REPLICAS"]; got != fmt.Sprint(natsReplicas) {
		t.Errorf("%s: REPLICAS=%q, want one per NATS node (%d)", composeEnv, got, natsReplicas)
	}
}

// TestComposeNATSURLListsEveryNode: agentbus.env's NATS_URL names every
// Compose NATS node.
func TestComposeNATSURLListsEveryNode(t *testing.T) {
	m := load(t)
	sts := m.natsStatefulSet(t)
	env := composeEnvFile(t)
	var want []string
	for i := range natsReplicas {
		want = append(want, fmt.Sprintf("nats://%s-%d:4222", sts.Name, i))
	}
	if have := strings.Split(env[envNATSURL], ","); !sameSet(have, want) {
		t.Errorf("%s: %s is %v, want every node: %v", composeEnv, envNATSURL, have, want)
	}
}
