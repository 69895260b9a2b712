package containers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ErrCompose: the Compose file uses what this package does not translate,
// or is malformed.
var ErrCompose = errors.New("containers: compose file")

// Project is a Compose file read for podman: its services with their
// variables interpolated and their env_files read.
type Project struct {
	// Name is the file's name: the prefix of containers, network and volumes.
	Name string
	// Dir is the file's directory, which relative paths start from.
	Dir string
	// Services by name.
	Services map[string]*Service
	// Volumes are the named volumes.
	Volumes []string
}

// Service is one service of a Project.
type Service struct {
	Name          string
	Image         string
	Command       []string
	Env           map[string]string // env_file, then environment over it
	Volumes       []string          // host:container[:ro], host paths absolute; named volumes as in the file
	Ports         []string          // [ip:]host:container
	ReadOnly      bool
	Tmpfs         []string
	StopGrace     time.Duration // 10s when the file says none (Compose's default)
	Health        []string      // the healthcheck's test, ["CMD", ...]
	HealthEvery   time.Duration
	HealthTimeout time.Duration
	Restart       string
	SecurityOpt   []string
	Ulimits       []string // name=soft:hard
	DependsOn     map[string]string
	Profiles      []string
}

// composeFile is the part of the Compose specification the files of
// deploy/compose use, decoded strictly: a key not here fails Load, until
// this package is taught what it means.
type composeFile struct {
	Name     string                 `json:"name"`
	Services map[string]serviceSpec `json:"services"`
	Volumes  map[string]any         `json:"volumes"`
}

type serviceSpec struct {
	Image       string            `json:"image"`
	Build       map[string]any    `json:"build"` // built by make images
	Command     []string          `json:"command"`
	EnvFile     string            `json:"env_file"`
	Environment map[string]any    `json:"environment"`
	Restart     string            `json:"restart"`
	StopGrace   string            `json:"stop_grace_period"`
	Healthcheck *healthSpec       `json:"healthcheck"`
	ReadOnly    bool              `json:"read_only"`
	Tmpfs       []string          `json:"tmpfs"`
	DependsOn   map[string]depend `json:"depends_on"`
	Volumes     []string          `json:"volumes"`
	Ports       []string          `json:"ports"`
	SecurityOpt []string          `json:"security_opt"`
	Ulimits     map[string]limit  `json:"ulimits"`
	Profiles    []string          `json:"profiles"`
}

type healthSpec struct {
	Test     []string `json:"test"`
	Interval string   `json:"interval"`
	Timeout  string   `json:"timeout"`
	Retries  int      `json:"retries"`
}

type depend struct {
	Condition string `json:"condition"`
}

type limit struct {
	Soft int64 `json:"soft"`
	Hard int64 `json:"hard"`
}

// variable is a Compose interpolation, ${NAME} or ${NAME:-default}.
var variable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// Load reads the Compose file at path, interpolating its variables from
// lookup (an unset or empty variable takes its default, as in Compose).
func Load(path string, lookup func(string) string) (*Project, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCompose, path, err)
	}
	for k := range doc {
		if strings.HasPrefix(k, "x-") { // extension fields: anchors only
			delete(doc, k)
		}
	}
	js, err := json.Marshal(interpolate(doc, lookup))
	if err != nil {
		return nil, err
	}
	var f composeFile
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCompose, path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	p := &Project{Name: f.Name, Dir: dir, Services: map[string]*Service{}}
	for v := range f.Volumes {
		p.Volumes = append(p.Volumes, v)
	}
	slices.Sort(p.Volumes)
	for name, spec := range f.Services {
		s, err := p.service(name, spec)
		if err != nil {
			return nil, fmt.Errorf("%w %s: service %s: %v", ErrCompose, path, name, err)
		}
		p.Services[name] = s
	}
	return p, nil
}

// interpolate replaces the variables of every string in v.
func interpolate(v any, lookup func(string) string) any {
	switch v := v.(type) {
	case string:
		return variable.ReplaceAllStringFunc(v, func(m string) string {
			sub := variable.FindStringSubmatch(m)
			if val := lookup(sub[1]); val != "" {
				return val
			}
			return sub[2]
		})
	case map[string]any:
		for k, e := range v {
			v[k] = interpolate(e, lookup)
		}
	case []any:
		for i, e := range v {
			v[i] = interpolate(e, lookup)
		}
	}
	return v
}

func (p *Project) service(name string, spec serviceSpec) (*Service, error) {
	s := &Service{Name: name, Image: spec.Image, Command: spec.Command, ReadOnly: spec.ReadOnly, Tmpfs: spec.Tmpfs,
		Restart: spec.Restart, SecurityOpt: spec.SecurityOpt, Ports: spec.Ports, Profiles: spec.Profiles,
		Env: map[string]string{}, DependsOn: map[string]string{}, StopGrace: 10 * time.Second}
	if s.Image == "" {
		return nil, errors.New("no image")
	}
	if spec.EnvFile != "" {
		env, err := readEnvFile(filepath.Join(p.Dir, spec.EnvFile))
		if err != nil {
			return nil, err
		}
		s.Env = env
	}
	for k, v := range spec.Environment {
		s.Env[k] = fmt.Sprint(v)
	}
	for _, v := range spec.Volumes {
		if src, rest, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, ".") {
			v = filepath.Join(p.Dir, src) + ":" + rest
		}
		s.Volumes = append(s.Volumes, v)
	}
	var err error
	if spec.StopGrace != "" {
		if s.StopGrace, err = time.ParseDuration(spec.StopGrace); err != nil {
			return nil, err
		}
	}
	if h := spec.Healthcheck; h != nil {
		if len(h.Test) < 2 || h.Test[0] != "CMD" {
			return nil, fmt.Errorf("healthcheck test %v: want [CMD, ...]", h.Test)
		}
		s.Health = h.Test
		if s.HealthEvery, err = time.ParseDuration(h.Interval); err != nil {
			return nil, fmt.Errorf("healthcheck interval: %v", err)
		}
		if s.HealthTimeout, err = time.ParseDuration(h.Timeout); err != nil {
			return nil, fmt.Errorf("healthcheck timeout: %v", err)
		}
	}
	for dep, d := range spec.DependsOn {
		switch d.Condition {
		case "service_started", "service_healthy", "service_completed_successfully":
			s.DependsOn[dep] = d.Condition
		default:
			return nil, fmt.Errorf("depends_on %s: condition %q", dep, d.Condition)
		}
	}
	for n, l := range spec.Ulimits {
		s.Ulimits = append(s.Ulimits, fmt.Sprintf("%s=%d:%d", n, l.Soft, l.Hard))
	}
	slices.Sort(s.Ulimits)
	return s, nil
}

// readEnvFile reads KEY=VALUE lines, skipping blank lines and comments.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env, sc.Err()
}

// Active are the services started without a profile, in an order where
// each comes after those it depends on.
func (p *Project) Active() ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		s, ok := p.Services[name]
		switch {
		case !ok:
			return fmt.Errorf("%w: depends on %s, which is no service", ErrCompose, name)
		case state[name] == 1:
			return fmt.Errorf("%w: a dependency cycle through %s", ErrCompose, name)
		case state[name] == 2:
			return nil
		}
		state[name] = 1
		deps := make([]string, 0, len(s.DependsOn))
		for d := range s.DependsOn {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		for _, d := range deps {
			if len(p.Services[d].Profiles) > 0 {
				return fmt.Errorf("%w: %s depends on %s, which only a profile starts", ErrCompose, name, d)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, name)
		return nil
	}
	names := make([]string, 0, len(p.Services))
	for n, s := range p.Services {
		if len(s.Profiles) == 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// Network is the project's network, which every container joins.
func (p *Project) Network() string { return p.Name + "_default" }

// Volume is the podman volume of the project's named volume v.
func (p *Project) Volume(v string) string { return p.Name + "_" + v }

// Container is the name of replica i (from 1) of service s.
func (p *Project) Container(s string, i int) string { return fmt.Sprintf("%s-%s-%d", p.Name, s, i) }

// RunArgs are the arguments of `podman run` that start replica i of
// service name, detached, on the project's network under the service's
// name, with its environment read from envFile (written by the caller, so
// that no secret is on a command line). With randomPorts each published
// port gets a free host port on its address (podman port tells which).
func (p *Project) RunArgs(name string, i int, envFile string, randomPorts bool) ([]string, error) {
	s, ok := p.Services[name]
	if !ok {
		return nil, fmt.Errorf("%w: no service %s", ErrCompose, name)
	}
	args := []string{"run", "--detach", "--name", p.Container(name, i),
		"--network", p.Network(), "--network-alias", name,
		"--label", "io.agentbus.compose.project=" + p.Name, "--label", "io.agentbus.compose.service=" + name,
		"--env-file", envFile,
		"--stop-timeout", fmt.Sprint(int(s.StopGrace.Seconds()))}
	if s.Restart != "" {
		args = append(args, "--restart", s.Restart)
	}
	if s.ReadOnly {
		args = append(args, "--read-only")
	}
	for _, t := range s.Tmpfs {
		args = append(args, "--tmpfs", t)
	}
	for _, v := range s.Volumes {
		if src, rest, ok := strings.Cut(v, ":"); ok && !filepath.IsAbs(src) {
			if !slices.Contains(p.Volumes, src) {
				return nil, fmt.Errorf("%w: service %s mounts volume %s, which the file does not declare", ErrCompose, name, src)
			}
			v = p.Volume(src) + ":" + rest
		}
		args = append(args, "--volume", v)
	}
	for _, port := range s.Ports {
		if randomPorts {
			parts := strings.Split(port, ":")
			parts[len(parts)-2] = ""
			port = strings.Join(parts, ":")
		}
		args = append(args, "--publish", port)
	}
	for _, o := range s.SecurityOpt {
		args = append(args, "--security-opt", o)
	}
	for _, u := range s.Ulimits {
		args = append(args, "--ulimit", u)
	}
	if len(s.Health) > 0 {
		// The command without Compose's "CMD": podman takes a JSON array
		// as the exec form.
		cmd, err := json.Marshal(s.Health[1:])
		if err != nil {
			return nil, err
		}
		// The caller runs the checks (podman healthcheck run): podman's
		// own timer needs systemd.
		args = append(args, "--health-cmd", string(cmd), "--health-interval", "disable",
			"--health-timeout", s.HealthTimeout.String())
	}
	args = append(args, s.Image)
	return append(args, s.Command...), nil
}

// EnvFile is the content of a service's env file for podman: KEY=VALUE
// lines, sorted.
func (s *Service) EnvFile() []byte {
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, s.Env[k])
	}
	return b.Bytes()
}
