package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomization.yaml the tests understand.
// It is decoded strictly: a field added to the file that is not here fails
// the tests until they are taught what it changes.
type kustomization struct {
	APIVersion         string                `json:"apiVersion"`
	Kind               string                `json:"kind"`
	Namespace          string                `json:"namespace"`
	Resources          []string              `json:"resources"`
	ConfigMapGenerator []configMapGeneration `json:"configMapGenerator"`
}

type configMapGeneration struct {
	Name  string   `json:"name"`
	Files []string `json:"files"`
}

// scaledObject is a KEDA ScaledObject (keda.sh/v1alpha1), with only the
// fields the manifests use: any other fails the strict decoding.
type scaledObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// decoders are the kinds a manifest may hold, by apiVersion and kind, each
// with the type it is decoded into. Any other kind fails the tests.
var decoders = map[string]func() any{
	"v1/Namespace":                  func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                     func() any { return &corev1.Secret{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
	"keda.sh/v1alpha1/ScaledObject": func() any { return &scaledObject{} },
	"batch/v1/Job":                  func() any { return &batchv1.Job{} },
}

// manifests are the objects of the kustomize base, by kind and name.
type manifests struct {
	namespace     string
	namespaces    map[string]*corev1.Namespace
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	services      map[string]*corev1.Service
	deployments   map[string]*appsv1.Deployment
	statefulSets  map[string]*appsv1.StatefulSet
	pdbs          map[string]*policyv1.PodDisruptionBudget
	scaledObjects map[string]*scaledObject
	jobs          map[string]*batchv1.Job
	// generated are the ConfigMaps of configMapGenerator, whose files
	// (by key) are on disk.
	generated map[string]configMapGeneration
}

// docSeparator splits a multi-document YAML file.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// loaded holds the manifests, read once for every test.
var loaded struct {
	once     sync.Once
	m        *manifests
	problems []string
}

// load returns the manifests, or fails the test if any does not load.
func load(t *testing.T) *manifests {
	t.Helper()
	loaded.once.Do(func() { loaded.m, loaded.problems = loadManifests() })
	if n := len(loaded.problems); n > 0 {
		t.Fatalf("the manifests do not load (%d problem(s), TestManifestsLoad lists them); the first: %s", n, loaded.problems[0])
	}
	return loaded.m
}

// TestManifestsLoad: kustomization.yaml and every resource it lists
// decode strictly, every object is of a kind the tests know, and every
// manifest of the directory is listed.
func TestManifestsLoad(t *testing.T) {
	loaded.once.Do(func() { loaded.m, loaded.problems = loadManifests() })
	for _, p := range loaded.problems {
		t.Error(p)
	}
}

// loadManifests reads kustomization.yaml and every resource it lists,
// decoding each object strictly, and the files of its ConfigMap
// generators. It returns every problem it meets.
func loadManifests() (*manifests, []string) {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	raw, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		return nil, []string{err.Error()}
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		return nil, []string{fmt.Sprintf("kustomization.yaml: %v (a field the tests do not know: teach loadManifests what it means)", err)}
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		fail("kustomization.yaml: apiVersion/kind %s/%s, want kustomize.config.k8s.io/v1beta1/Kustomization", k.APIVersion, k.Kind)
	}
	m := &manifests{namespace: k.Namespace, namespaces: map[string]*corev1.Namespace{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, services: map[string]*corev1.Service{}, deployments: map[string]*appsv1.Deployment{}, jobs: map[string]*batchv1.Job{},
		statefulSets: map[string]*appsv1.StatefulSet{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		scaledObjects: map[string]*scaledObject{}, generated: map[string]configMapGeneration{}}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		fail("%v", err)
	}
	for _, f := range files {
		if f != "kustomization.yaml" && !slices.Contains(k.Resources, f) {
			fail("%s is not in kustomization.yaml's resources: kubectl apply -k would leave it out", f)
		}
	}
	for _, res := range k.Resources {
		raw, err := os.ReadFile(res)
		if err != nil {
			fail("kustomization.yaml lists %s: %v", res, err)
			continue
		}
		for i, doc := range docSeparator.Split(string(raw), -1) {
			if err := m.add(doc); err != nil {
				fail("%s, document %d: %v", res, i+1, err)
			}
		}
	}
	for _, g := range k.ConfigMapGenerator {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name}, Data: map[string]string{}}
		for _, f := range g.Files {
			b, err := os.ReadFile(f)
			if err != nil {
				fail("kustomization.yaml: configMapGenerator %s: %v", g.Name, err)
				continue
			}
			cm.Data[filepath.Base(f)] = string(b)
		}
		if _, dup := m.configMaps[g.Name]; dup {
			fail("ConfigMap %s is both a resource and generated", g.Name)
		}
		m.configMaps[g.Name], m.generated[g.Name] = cm, g
	}
	if m.namespace == "" || m.namespaces[m.namespace] == nil {
		fail("kustomization.yaml sets namespace %q, which the base does not create (namespace.yaml)", m.namespace)
	}
	return m, problems
}

// add decodes one YAML document strictly into the type of its kind.
func (m *manifests) add(doc string) error {
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil // comments only
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return err
	}
	gvk := tm.APIVersion + "/" + tm.Kind
	newObj, ok := decoders[gvk]
	if !ok {
		return fmt.Errorf("kind %s is not one the tests know (add it to decoders, with its API type)", gvk)
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	var name string
	var dup bool
	switch o := obj.(type) {
	case *corev1.Namespace:
		name, dup = put(m.namespaces, o.Name, o)
	case *corev1.ConfigMap:
		name, dup = put(m.configMaps, o.Name, o)
	case *corev1.Secret:
		name, dup = put(m.secrets, o.Name, o)
	case *corev1.Service:
		name, dup = put(m.services, o.Name, o)
	case *appsv1.Deployment:
		name, dup = put(m.deployments, o.Name, o)
	case *appsv1.StatefulSet:
		name, dup = put(m.statefulSets, o.Name, o)
	case *policyv1.PodDisruptionBudget:
		name, dup = put(m.pdbs, o.Name, o)
	case *scaledObject:
		name, dup = put(m.scaledObjects, o.Metadata.Name, o)
	case *batchv1.Job:
		name, dup = put(m.jobs, o.Name, o)
	}
	switch {
	case name == "":
		return fmt.Errorf("%s has no metadata.name", gvk)
	case dup:
		return fmt.Errorf("a second %s named %s", gvk, name)
	}
	return nil
}

func put[T any](m map[string]*T, name string, v *T) (string, bool) {
	_, dup := m[name]
	m[name] = v
	return name, dup
}

// secretValue is the value of key in the Secret, and whether it is there.
func (m *manifests) secretValue(name, key string) (string, bool) {
	s, ok := m.secrets[name]
	if !ok {
		return "", false
	}
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}

// envValue resolves the variable name of container c as the process sees
// it: a literal, a Secret's or ConfigMap's key, or a key of an envFrom
// ConfigMap. It reports whether the variable is set.
func (m *manifests) envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			return e.Value, true
		case e.ValueFrom.SecretKeyRef != nil:
			return m.secretValue(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			cm, ok := m.configMaps[e.ValueFrom.ConfigMapKeyRef.Name]
			if !ok {
				return "", false
			}
			v, ok := cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			return v, ok
		}
		return "", false
	}
	for _, from := range slices.Backward(c.EnvFrom) {
		if from.ConfigMapRef == nil {
			continue
		}
		if cm, ok := m.configMaps[from.ConfigMapRef.Name]; ok {
			if v, ok := cm.Data[from.Prefix+name]; ok {
				return v, true
			}
		}
	}
	return "", false
}

// secretRef returns the Secret key the variable name of c comes from.
func secretRef(c corev1.Container, name string) *corev1.SecretKeySelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}

// containerPort resolves a probe's or Service's port, by number or name.
func containerPort(c corev1.Container, port string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// single returns the one container of a pod template, failing otherwise.
func single(t *testing.T, what string, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("%s has %d containers, want 1 (the tests check one)", what, len(spec.Containers))
	}
	return spec.Containers[0]
}

// sortedKeys is for messages.
func sortedKeys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}
