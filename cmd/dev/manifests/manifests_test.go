package manifests

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentbus/agentbus/cmd/internal/app"
)

// How long a process may take to stop on SIGTERM; its pods' grace period
// must be longer. Neither value is exported by the code, so they are
// repeated here: keep them in step.
const (
	// drain: a role process waits this long for its messages in flight
	// (the default of events.WorkerConfig.DrainWait), and the ingress for
	// its requests (the Shutdown timeout in app.ServeIngress).
	drain = 30 * time.Second
	// flush: then it flushes its traces (Deps.Close in cmd/internal/app).
	flush = 5 * time.Second
)

// Environment variables of the processes (cmd/internal/app/config.go and
// cmd/ingress).
const (
	envMetricsAddr = "METRICS_ADDR"
	envIngressAddr = "INGRESS_ADDR"
	envNATSUser    = "NATS_USER"
	envNATSPass    = "NATS_PASSWORD"
	envNATSURL     = "NATS_URL"
)

// servedPaths are the HTTP paths a probe may use, per binary: a role
// process serves only /metrics (on METRICS_ADDR); the ingress serves the
// API, /healthz and /metrics on INGRESS_ADDR.
func servedPaths(binary string) (addrVar string, paths []string) {
	if binary == ingressBinary {
		return envIngressAddr, []string{"/healthz", "/metrics"}
	}
	return envMetricsAddr, []string{"/metrics"}
}

// binaries are the Deployments a base must have: each role process, then
// the ingress.
func binaries() []string {
	var names []string
	for _, p := range app.Processes {
		names = append(names, p.Name)
	}
	return append(names, ingressBinary)
}

// TestEveryProcessIsDeployed: each role process (app.Processes) and the
// ingress has a Deployment running its image as its own NATS user, and
// there is no other Deployment.
func TestEveryProcessIsDeployed(t *testing.T) {
	m := load(t)
	want := binaries()
	for _, name := range want {
		d, ok := m.deployments[name]
		if !ok {
			t.Errorf("no Deployment %q for the agentbus binary cmd/%s: add %s.yaml to the base", name, name, name)
			continue
		}
		c := single(t, "Deployment "+name, d.Spec.Template.Spec)
		if repo, _, _ := strings.Cut(c.Image, ":"); repo != "agentbus/"+name {
			t.Errorf("Deployment %s runs image %s, want agentbus/%s (deploy/docker/Dockerfile with BINARY=%s)", name, c.Image, name, name)
		}
		if len(c.Command) > 0 {
			t.Errorf("Deployment %s sets command %v: the image's entrypoint is the binary", name, c.Command)
		}
		user := name // a role process logs in as itself (app.NATSUsers)
		if name == ingressBinary {
			user = app.UserIngress
		}
		if got, _ := m.envValue(c, envNATSUser); got != user {
			t.Errorf("Deployment %s: %s is %q, want %q (its NATS user, app.NATSUsers)", name, envNATSUser, got, user)
		}
		if ref := secretRef(c, envNATSPass); ref == nil || (ref.Optional != nil && *ref.Optional) {
			t.Errorf("Deployment %s: %s must come from a Secret, not optionally", name, envNATSPass)
		}
	}
	for name := range m.deployments {
		if !slices.Contains(want, name) {
			t.Errorf("Deployment %s is neither a role process (app.Processes: %v) nor the ingress", name, want[:len(want)-1])
		}
	}
}

// TestEveryProcessScalesOnItsConsumer: each role process has a KEDA
// ScaledObject on its Deployment whose nats-jetstream trigger names the
// durable consumer of the role the process is named after (Role.Consumer),
// on the cluster's monitoring endpoint; the Deployment leaves its replica
// count to KEDA.
func TestEveryProcessScalesOnItsConsumer(t *testing.T) {
	m := load(t)
	for _, p := range app.Processes {
		role, ok := app.RoleNamed(p.Name)
		if !ok || !slices.Contains(p.Roles, p.Name) {
			t.Errorf("process %s runs roles %v, none of them named %s: tell this test which consumer it scales on", p.Name, p.Roles, p.Name)
			continue
		}
		c := role.Consumer()
		var targets []*scaledObject
		for _, so := range m.scaledObjects {
			if so.Spec.ScaleTargetRef.Name == p.Name {
				targets = append(targets, so)
			}
		}
		if len(targets) != 1 {
			t.Errorf("process %s: %d ScaledObjects target its Deployment, want 1", p.Name, len(targets))
			continue
		}
		so := targets[0]
		if ref := so.Spec.ScaleTargetRef; (ref.Kind != "" && ref.Kind != "Deployment") || (ref.APIVersion != "" && ref.APIVersion != "apps/v1") {
			t.Errorf("ScaledObject %s targets %s %s, want a Deployment", so.Metadata.Name, ref.APIVersion, ref.Kind)
		}
		// KEDA's defaults: from 0 to 100 replicas.
		if minR, maxR := ptrOr(so.Spec.MinReplicaCount, 0), ptrOr(so.Spec.MaxReplicaCount, 100); maxR < max(minR, 1) {
			t.Errorf("ScaledObject %s scales from %d to %d replicas", so.Metadata.Name, minR, maxR)
		}
		if d, ok := m.deployments[p.Name]; ok && d.Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas: KEDA owns the count, and each apply would reset it", p.Name)
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" {
			t.Errorf("ScaledObject %s: want one nats-jetstream trigger, have %+v", so.Metadata.Name, so.Spec.Triggers)
			continue
		}
		md := so.Spec.Triggers[0].Metadata
		if md["stream"] != c.Stream || md["consumer"] != c.Name {
			t.Errorf("ScaledObject %s scales on consumer %s/%s, want %s/%s (Role.Consumer of %s)",
				so.Metadata.Name, md["stream"], md["consumer"], c.Stream, c.Name, role.Name)
		}
		if md["account"] != "$G" {
			t.Errorf("ScaledObject %s: account %q, want $G (nats/auth.conf defines no accounts)", so.Metadata.Name, md["account"])
		}
		if n, err := strconv.Atoi(md["lagThreshold"]); err != nil || n < 1 {
			t.Errorf("ScaledObject %s: lagThreshold %q, want a positive integer", so.Metadata.Name, md["lagThreshold"])
		}
		m.checkMonitoringEndpoint(t, so.Metadata.Name, md["natsServerMonitoringEndpoint"])
		for k := range md {
			if !slices.Contains([]string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold"}, k) {
				t.Errorf("ScaledObject %s: trigger metadata %q is not one the tests check", so.Metadata.Name, k)
			}
		}
	}
	for name, so := range m.scaledObjects {
		if _, ok := m.deployments[so.Spec.ScaleTargetRef.Name]; !ok {
			t.Errorf("ScaledObject %s targets %q, which is no Deployment of the base", name, so.Spec.ScaleTargetRef.Name)
		}
	}
}

// checkMonitoringEndpoint: KEDA's operator, in its own namespace, reaches a
// NATS node's monitoring port by a fully qualified Service name.
func (m *manifests) checkMonitoringEndpoint(t *testing.T, who, endpoint string) {
	t.Helper()
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		t.Errorf("ScaledObject %s: natsServerMonitoringEndpoint %q is not host:port: %v", who, endpoint, err)
		return
	}
	svcName, ok := strings.CutSuffix(host, "."+m.namespace+".svc.cluster.local")
	svc := m.services[svcName]
	if !ok || svc == nil {
		t.Errorf("ScaledObject %s: natsServerMonitoringEndpoint host %q is not <Service>.%s.svc.cluster.local of a Service of the base (%s)",
			who, host, m.namespace, sortedKeys(m.services))
		return
	}
	sts := m.natsStatefulSet(t)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("ScaledObject %s: Service %s does not select the NATS pods", who, svcName)
	}
	nats := single(t, "StatefulSet "+sts.Name, sts.Spec.Template.Spec)
	monitor, _ := containerPort(nats, "monitor")
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		target, ok := containerPort(nats, p.TargetPort.String())
		return fmt.Sprint(p.Port) == port && ok && target == monitor
	}) || monitor != natsMonitorPort {
		t.Errorf("ScaledObject %s: port %s of Service %s is not the NATS monitoring port (%d)", who, port, svcName, natsMonitorPort)
	}
}

// TestDeploymentsAreOperable: every Deployment has probes on what its
// binary serves, resource requests and limits, a grace period longer than
// its drain, and a PodDisruptionBudget of its own.
func TestDeploymentsAreOperable(t *testing.T) {
	m := load(t)
	for name, d := range m.deployments {
		spec := d.Spec.Template.Spec
		c := single(t, "Deployment "+name, spec)
		if d.Spec.Selector == nil || !selects(d.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("Deployment %s: its selector does not match its pod template's labels", name)
		}
		m.checkProbes(t, name, c)
		checkResources(t, "Deployment "+name, c)
		if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain+flush {
			t.Errorf("Deployment %s: terminationGracePeriodSeconds %v, want more than the drain (%s) plus the trace flush (%s): "+
				"a shorter one kills the process while it drains", name, deref(g), drain, flush)
		}
		m.checkPDB(t, "Deployment "+name, d.Spec.Template.Labels)
	}
	sts := m.natsStatefulSet(t)
	m.checkPDB(t, "StatefulSet "+sts.Name, sts.Spec.Template.Labels)
	checkResources(t, "StatefulSet "+sts.Name, single(t, "StatefulSet "+sts.Name, sts.Spec.Template.Spec))
}

// checkProbes: readiness and liveness probes on a port the container
// declares and its process listens on, at a path it serves.
func (m *manifests) checkProbes(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	addrVar, paths := servedPaths(name)
	addr, _ := m.envValue(c, addrVar)
	_, listen, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("Deployment %s: %s is %q, want host:port: the probes need the port the process serves", name, addrVar, addr)
		return
	}
	for _, pr := range []struct {
		kind  string
		probe *corev1.Probe
	}{{"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}, {"startupProbe", c.StartupProbe}} {
		if pr.probe == nil {
			if pr.kind != "startupProbe" {
				t.Errorf("Deployment %s has no %s", name, pr.kind)
			}
			continue
		}
		get := pr.probe.HTTPGet
		if get == nil {
			t.Errorf("Deployment %s: %s is not an httpGet: the process serves HTTP (%s)", name, pr.kind, strings.Join(paths, ", "))
			continue
		}
		port, ok := containerPort(c, get.Port.String())
		switch {
		case !ok:
			t.Errorf("Deployment %s: %s port %s is not a port of the container", name, pr.kind, get.Port.String())
		case fmt.Sprint(port) != listen:
			t.Errorf("Deployment %s: %s probes port %d, but the process listens on %s (%s=%s)", name, pr.kind, port, listen, addrVar, addr)
		}
		if path, _, _ := strings.Cut(get.Path, "?"); !slices.Contains(paths, path) {
			t.Errorf("Deployment %s: %s path %q is not served by cmd/%s (it serves %s)", name, pr.kind, get.Path, name, strings.Join(paths, ", "))
		}
	}
}

func checkResources(t *testing.T, what string, c corev1.Container) {
	t.Helper()
	r := c.Resources
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, ok := r.Requests[res]
		if !ok || req.IsZero() {
			t.Errorf("%s: no %s request", what, res)
		}
		if lim, ok := r.Limits[res]; ok && lim.Cmp(req) < 0 {
			t.Errorf("%s: %s limit %s is below its request %s", what, res, lim.String(), req.String())
		}
	}
	if lim, ok := r.Limits[corev1.ResourceMemory]; !ok || lim.IsZero() {
		t.Errorf("%s: no memory limit", what)
	}
}

// checkPDB: exactly one PodDisruptionBudget selects the pods.
func (m *manifests) checkPDB(t *testing.T, what string, podLabels map[string]string) {
	t.Helper()
	var mine []string
	for name, pdb := range m.pdbs {
		if pdb.Spec.Selector != nil && selects(pdb.Spec.Selector, podLabels) {
			mine = append(mine, name)
		}
	}
	if len(mine) != 1 {
		slices.Sort(mine)
		t.Errorf("%s: %d PodDisruptionBudgets select its pods (%v), want 1", what, len(mine), mine)
	}
}

// TestDisruptionBudgetsAreEachOne: each PodDisruptionBudget bounds the
// evictions of one workload, by maxUnavailable or minAvailable.
func TestDisruptionBudgetsAreEachOne(t *testing.T) {
	m := load(t)
	pods := map[string]map[string]string{}
	for name, d := range m.deployments {
		pods["Deployment "+name] = d.Spec.Template.Labels
	}
	for name, s := range m.statefulSets {
		pods["StatefulSet "+name] = s.Spec.Template.Labels
	}
	for name, pdb := range m.pdbs {
		var selected []string
		for what, l := range pods {
			if pdb.Spec.Selector != nil && selects(pdb.Spec.Selector, l) {
				selected = append(selected, what)
			}
		}
		if len(selected) != 1 {
			slices.Sort(selected)
			t.Errorf("PodDisruptionBudget %s selects the pods of %d workloads %v, want 1", name, len(selected), selected)
		}
		if pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil {
			t.Errorf("PodDisruptionBudget %s sets neither minAvailable nor maxUnavailable", name)
		}
	}
}

// TestReferencesExist: every Secret and ConfigMap a workload refers to is
// in the base, and so is every key it needs (optional keys may be absent).
func TestReferencesExist(t *testing.T) {
	m := load(t)
	specs := map[string]corev1.PodSpec{}
	for name, d := range m.deployments {
		specs["Deployment "+name] = d.Spec.Template.Spec
	}
	for name, s := range m.statefulSets {
		specs["StatefulSet "+name] = s.Spec.Template.Spec
	}
	for name, j := range m.jobs {
		specs["Job "+name] = j.Spec.Template.Spec
	}
	for what, spec := range specs {
		missing := map[string]bool{} // objects reported, by kind and name
		for _, ref := range podRefs(spec) {
			kind, keys, ok := "ConfigMap", map[string]bool{}, false
			if ref.secret {
				var s *corev1.Secret
				if s, ok = m.secrets[ref.name]; ok {
					keys = keySet(s.Data, s.StringData)
				}
				kind = "Secret"
			} else {
				var cm *corev1.ConfigMap
				if cm, ok = m.configMaps[ref.name]; ok {
					keys = keySet(cm.BinaryData, cm.Data)
				}
			}
			switch {
			case !ok && !missing[kind+" "+ref.name]:
				missing[kind+" "+ref.name] = true
				t.Errorf("%s refers to %s %s, which is not in the base", what, kind, ref.name)
			case ok && ref.key != "" && !ref.optional && !keys[ref.key]:
				t.Errorf("%s needs key %s of %s %s, which it lacks", what, ref.key, kind, ref.name)
			}
		}
	}
}

// TestSecretsArePlaceholders: a value in the base's Secrets is a marked
// placeholder, never a real secret.
func TestSecretsArePlaceholders(t *testing.T) {
	m := load(t)
	for name, s := range m.secrets {
		if len(s.Data) > 0 {
			t.Errorf("Secret %s has data: keep placeholders in stringData, where they read as such", name)
		}
		for k, v := range s.StringData {
			if !strings.Contains(v, "REPLACE-ME") {
				t.Errorf("Secret %s, key %s: its value is not marked REPLACE-ME: the base must hold no real secret", name, k)
			}
		}
	}
}

// ref is a workload's reference to a Secret or ConfigMap, or to one of
// its keys.
type ref struct {
	secret   bool
	name     string
	key      string
	optional bool
}

func podRefs(spec corev1.PodSpec) []ref {
	var refs []ref
	opt := func(b *bool) bool { return b != nil && *b }
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if s := e.ValueFrom.SecretKeyRef; s != nil {
				refs = append(refs, ref{true, s.Name, s.Key, opt(s.Optional)})
			}
			if s := e.ValueFrom.ConfigMapKeyRef; s != nil {
				refs = append(refs, ref{false, s.Name, s.Key, opt(s.Optional)})
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				refs = append(refs, ref{true, e.SecretRef.Name, "", opt(e.SecretRef.Optional)})
			}
			if e.ConfigMapRef != nil {
				refs = append(refs, ref{false, e.ConfigMapRef.Name, "", opt(e.ConfigMapRef.Optional)})
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			refs = append(refs, ref{true, v.Secret.SecretName, "", opt(v.Secret.Optional)})
		}
		if v.ConfigMap != nil {
			refs = append(refs, ref{false, v.ConfigMap.Name, "", opt(v.ConfigMap.Optional)})
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					refs = append(refs, ref{true, s.Secret.Name, "", opt(s.Secret.Optional)})
				}
				if s.ConfigMap != nil {
					refs = append(refs, ref{false, s.ConfigMap.Name, "", opt(s.ConfigMap.Optional)})
				}
			}
		}
	}
	return refs
}

func keySet[A, B any](a map[string]A, b map[string]B) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

func selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// TestSetupJobSetsTheTopologyUp: the set-up Job runs agentbus setup as
// admin, with admin's password and the deployment's configuration, whose
// REPLICAS is one per NATS node.
func TestSetupJobSetsTheTopologyUp(t *testing.T) {
	m := load(t)
	j, ok := m.jobs["agentbus-setup"]
	if !ok {
		t.Fatal("no Job agentbus-setup")
	}
	spec := j.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Job agentbus-setup has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != "agentbus/agentbus:latest" || len(c.Args) == 0 || c.Args[0] != "setup" {
		t.Errorf("Job agentbus-setup runs %s %v, want agentbus/agentbus:latest setup", c.Image, c.Args)
	}
	var user string
	var password *corev1.SecretKeySelector
	for _, e := range c.Env {
		switch e.Name {
		case "NATS_USER":
			user = e.Value
		case "NATS_PASSWORD":
			if e.ValueFrom != nil {
				password = e.ValueFrom.SecretKeyRef
			}
		}
	}
	if user != app.UserAdmin || password == nil || password.Name != "agentbus-nats-"+app.UserAdmin {
		t.Errorf("Job agentbus-setup connects as %q with password %+v, want admin's", user, password)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "agentbus-config" {
		t.Errorf("Job agentbus-setup does not read agentbus-config: %+v", c.EnvFrom)
	}
	cfg, ok := m.configMaps["agentbus-config"]
	nats, nok := m.statefulSets["nats"]
	if !ok || !nok || nats.Spec.Replicas == nil {
		t.Fatal("no agentbus-config, or no nats StatefulSet with replicas")
	}
	if got, want := cfg.Data["REPLICAS"], fmt.Sprint(*nats.Spec.Replicas); got != want {
		t.Errorf("REPLICAS = %q, want one per NATS node (%s)", got, want)
	}
}
