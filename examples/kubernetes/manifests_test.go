package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// manifests are the example's objects, decoded strictly: a field the
// Kubernetes API does not have, or a value of the wrong type, fails.
type manifests struct {
	deployment appsv1.Deployment
	secret     corev1.Secret
	service    corev1.Service
	pdb        policyv1.PodDisruptionBudget
	envNames   []string // every OUTBOXD_* name the manifests set
}

func load(t *testing.T) manifests {
	t.Helper()
	var m manifests
	targets := map[string]any{
		"apps/v1/Deployment": &m.deployment, "v1/Secret": &m.secret, "v1/Service": &m.service,
		"policy/v1/PodDisruptionBudget": &m.pdb,
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	seen := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			key := head.APIVersion + "/" + head.Kind
			target, ok := targets[key]
			if !ok {
				t.Fatalf("%s: %s is not an object of the example (%v)", file, key, targets)
			}
			if prev, dup := seen[key]; dup {
				t.Fatalf("%s and %s both hold a %s", prev, file, key)
			}
			seen[key] = file
			if err := yaml.UnmarshalStrict(doc, target); err != nil {
				t.Fatalf("%s: %s does not fit the Kubernetes API: %v", file, key, err)
			}
			m.envNames = append(m.envNames, regexp.MustCompile(`OUTBOXD_[A-Z0-9_]+`).FindAllString(string(doc), -1)...)
		}
	}
	if len(seen) != len(targets) {
		t.Fatalf("the example holds %v, want one each of %d kinds", seen, len(targets))
	}
	return m
}

// TestManifests: two replicas with probes on the port outboxd serves, the
// settings from the Secret, a grace period longer than the shutdown
// timeout, a budget and a Service that select the pods.
func TestManifests(t *testing.T) {
	m := load(t)
	d := m.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2: an active outboxd and a hot standby", d.Spec.Replicas)
	}
	pod := d.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want outboxd alone", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["OUTBOXD_METRICS_ADDR"] != ":9187" || len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9187 {
		t.Errorf("metrics address %q and ports %+v: probes need outboxd listening on every interface at the port", env["OUTBOXD_METRICS_ADDR"], c.Ports)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("probe %+v, want GET %s on port %q", probe, want, c.Ports[0].Name)
		}
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != m.secret.Name {
		t.Errorf("envFrom %+v, want the Secret %q", c.EnvFrom, m.secret.Name)
	}
	for _, key := range []string{"OUTBOXD_PG_URL", "OUTBOXD_NATS_URL"} {
		if m.secret.StringData[key] == "" {
			t.Errorf("the Secret lacks %s", key)
		}
	}
	shutdown, err := time.ParseDuration(env["OUTBOXD_SHUTDOWN_TIMEOUT"])
	if err != nil || pod.Spec.TerminationGracePeriodSeconds == nil ||
		time.Duration(*pod.Spec.TerminationGracePeriodSeconds)*time.Second <= shutdown {
		t.Errorf("grace period %v, shutdown timeout %q: SIGKILL must not come before outboxd has drained",
			pod.Spec.TerminationGracePeriodSeconds, env["OUTBOXD_SHUTDOWN_TIMEOUT"])
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: request CPU and limit memory", c.Resources)
	}
	if pod.Annotations["prometheus.io/port"] != "9187" || pod.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("scrape annotations %v", pod.Annotations)
	}
	labels := pod.Labels
	for what, selector := range map[string]map[string]string{
		"Deployment": d.Spec.Selector.MatchLabels, "PodDisruptionBudget": m.pdb.Spec.Selector.MatchLabels, "Service": m.service.Spec.Selector,
	} {
		for k, v := range selector {
			if labels[k] != v || len(selector) == 0 {
				t.Errorf("the %s selects %v, the pods are labelled %v", what, selector, labels)
			}
		}
	}
	if m.pdb.Spec.MinAvailable == nil || m.pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", m.pdb.Spec.MinAvailable)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the pod may run as root")
	}
}

// TestManifestSettingsExist: every OUTBOXD_* variable the manifests set is
// one that outboxd reads (the configuration reference lists them all).
func TestManifestSettingsExist(t *testing.T) {
	m := load(t)
	reference, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range m.envNames {
		if !strings.Contains(string(reference), "`"+name+"`") {
			t.Errorf("%s is no setting of outboxd (not in docs/configuration.md)", name)
		}
	}
}
