package charttest

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// secretRef is one environment variable the pod takes from a Secret.
type secretRef struct{ secret, key string }

// exampleWant is what one documented values file in charts/rbook/examples must render to.
type exampleWant struct {
	replicas int32
	strategy appsv1.DeploymentStrategyType
	// dataClaim is the PersistentVolumeClaim mounted at /var/lib/rbook; "emptyDir" for an
	// emptyDir there; "" for no data volume (PostgreSQL).
	dataClaim string
	// pvc says the chart itself makes dataClaim.
	pvc            bool
	pdb            bool
	serviceMonitor bool
	ingress        bool
	tls            bool
	// config is the whole `rbook serve --config` file.
	config map[string]any
	// env are the variables that come from Secrets, by name.
	env map[string]secretRef
	// chartSecrets are the Secrets the chart makes (quickstart values only).
	chartSecrets []string
	// secretMounts are the Secret volumes mounted, by mount path.
	secretMounts map[string]string
	// neverInline are secret values of the values file that must appear only in Secrets.
	neverInline []string
}

// approvalEnv is the approval secret's two variables from the Secret named name.
func approvalEnv(name string) map[string]secretRef {
	return map[string]secretRef{
		"RBOOK_APPROVAL_SECRET":          {name, "approval-secret"},
		"RBOOK_APPROVAL_SECRET_PREVIOUS": {name, "approval-secret-previous"},
	}
}

var examples = map[string]exampleWant{
	"sqlite.yaml": {
		replicas: 1, strategy: appsv1.RecreateDeploymentStrategyType, dataClaim: "rbook-data", pvc: true,
		config: map[string]any{"addr": ":7070", "db": "/var/lib/rbook/controlplane.db", "auth-file": "/etc/rbook-secrets/auth/auth.txt",
			"log-json": true, "public-url": "https://rbook.example.com"},
		env:          approvalEnv("rbook-approval"),
		secretMounts: map[string]string{"/etc/rbook-secrets/auth": "rbook-auth"},
	},
	"postgres-ha.yaml": {
		replicas: 3, strategy: appsv1.RollingUpdateDeploymentStrategyType, pdb: true, serviceMonitor: true,
		config: map[string]any{"addr": ":7070", "auth-file": "/etc/rbook-secrets/auth/auth.txt",
			"log-json": true, "public-url": "https://rbook.example.com"},
		env:          merge(approvalEnv("rbook-approval"), map[string]secretRef{"RBOOK_DB": {"rbook-db", "url"}}),
		secretMounts: map[string]string{"/etc/rbook-secrets/auth": "rbook-auth"},
	},
	"with-tls.yaml": {
		replicas: 1, strategy: appsv1.RecreateDeploymentStrategyType, dataClaim: "rbook-data", pvc: true, tls: true,
		config: map[string]any{"addr": ":7070", "db": "/var/lib/rbook/controlplane.db", "auth-file": "/etc/rbook-secrets/auth/auth.txt",
			"tls-cert": "/etc/rbook-tls/tls.crt", "tls-key": "/etc/rbook-tls/tls.key", "tls-client-ca": "/etc/rbook-tls/ca.crt",
			"log-json": true, "public-url": "https://rbook.example.com"},
		env:          approvalEnv("rbook-approval"),
		secretMounts: map[string]string{"/etc/rbook-secrets/auth": "rbook-auth", "/etc/rbook-tls": "rbook-tls"},
	},
	"quickstart.yaml": {
		replicas: 1, strategy: appsv1.RecreateDeploymentStrategyType, dataClaim: "emptyDir",
		config: map[string]any{"addr": ":7070", "db": "/var/lib/rbook/controlplane.db", "auth-file": "/etc/rbook-secrets/auth/auth.txt",
			"log-json": true},
		env:          approvalEnv("rbook-approval"),
		chartSecrets: []string{"rbook-approval", "rbook-auth"},
		secretMounts: map[string]string{"/etc/rbook-secrets/auth": "rbook-auth"},
		neverInline:  []string{"quickstart-approval-secret-change-me", "quickstart-executor-token-change-me", "quickstart-approver-token-change-me"},
	},
	"github-app-ingress.yaml": {
		replicas: 1, strategy: appsv1.RecreateDeploymentStrategyType, dataClaim: "rbook-data", pvc: true, ingress: true,
		config: map[string]any{"addr": ":7070", "db": "/var/lib/rbook/controlplane.db", "auth-file": "/etc/rbook-secrets/auth/auth.txt",
			"github-app-id": float64(123456), "github-app-key": "/etc/rbook-secrets/github/private-key.pem",
			"github-webhook-secret-file": "/etc/rbook-secrets/github/webhook-secret",
			"gate-policy":                "/etc/rbook/files/gates.yaml", "people": "/etc/rbook/files/people.yaml",
			"log-json": true, "public-url": "https://rbook.example.com"},
		env:          approvalEnv("rbook-approval"),
		secretMounts: map[string]string{"/etc/rbook-secrets/auth": "rbook-auth", "/etc/rbook-secrets/github": "rbook-github"},
	},
}

func merge(a, b map[string]secretRef) map[string]secretRef {
	out := map[string]secretRef{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestEveryExampleRendersWhatItDocuments renders each values file in charts/rbook/examples
// (each must have an entry here) and checks the objects' real values: replicas and the
// database volume per mode, the hardened security context, the probes, the config file, and
// secrets referenced from Secrets rather than written into the pod or the ConfigMap.
func TestEveryExampleRendersWhatItDocuments(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s/examples: %v", chartDir, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			want, ok := examples[name]
			if !ok {
				t.Fatalf("%s has no expectations in examples_test.go: add what it must render to", name)
			}
			r := render(t, "-f", f)
			checkHardened(t, r)
			checkProbes(t, r, want.tls)
			checkMode(t, r, want)
			checkSecrets(t, r, want)
			if got := r.configFile(t); !reflect.DeepEqual(got, want.config) {
				t.Errorf("config.yaml = %v\nwant %v", got, want.config)
			}
			checkService(t, r, want.tls)
			if (r.ingress != nil) != want.ingress {
				t.Errorf("Ingress rendered %v, want %v", r.ingress != nil, want.ingress)
			}
			checkServiceMonitor(t, r, want.serviceMonitor)
		})
	}
}

// checkHardened asserts the pod runs as 65532, non-root, with a read-only root filesystem,
// no privilege escalation, no capabilities, the runtime's seccomp profile, no service
// account token, an emptyDir at /tmp and the config file from the ConfigMap.
func checkHardened(t *testing.T, r *rendered) {
	t.Helper()
	pod := r.deployment.Spec.Template.Spec
	ps := pod.SecurityContext
	if ps == nil || !isTrue(ps.RunAsNonRoot) || deref(ps.RunAsUser) != 65532 || deref(ps.FSGroup) != 65532 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", ps)
	}
	c := r.container(t)
	sc := c.SecurityContext
	if sc == nil || !isTrue(sc.RunAsNonRoot) || deref(sc.RunAsUser) != 65532 || !isTrue(sc.ReadOnlyRootFilesystem) ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || isTrue(sc.Privileged) ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v", sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken %v, want false", pod.AutomountServiceAccountToken)
	}
	if v := volume(pod, mountAt(t, c, "/tmp")); v.EmptyDir == nil {
		t.Errorf("/tmp is %+v, want an emptyDir", v.VolumeSource)
	}
	m := mount(c, "/etc/rbook")
	if m == nil || !m.ReadOnly {
		t.Fatalf("/etc/rbook mount %+v, want the ConfigMap read-only", m)
	}
	if v := volume(pod, m.Name); v.ConfigMap == nil || v.ConfigMap.Name != r.configMap.Name {
		t.Errorf("/etc/rbook is %+v, want ConfigMap %s", v.VolumeSource, r.configMap.Name)
	}
	if n := len(c.Args); n < 2 || c.Args[n-2] != "--config" || c.Args[n-1] != "/etc/rbook/config.yaml" {
		t.Errorf("args %q, want … --config /etc/rbook/config.yaml", c.Args)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v: want a memory limit and a CPU request", c.Resources)
	}
}

// checkProbes asserts the startup, liveness and readiness probes: gRPC health on port 7070,
// service "" (the whole server), or with TLS a TCP connection to the grpc port.
func checkProbes(t *testing.T, r *rendered, tls bool) {
	t.Helper()
	c := r.container(t)
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		switch {
		case p == nil:
			t.Errorf("no %s probe", name)
		case tls:
			if p.TCPSocket == nil || p.TCPSocket.Port.String() != "grpc" || p.GRPC != nil {
				t.Errorf("%s probe %+v, want tcpSocket on port grpc (kubelet gRPC probes do not speak TLS)", name, p.ProbeHandler)
			}
		default:
			if p.GRPC == nil || p.GRPC.Port != 7070 || p.GRPC.Service == nil || *p.GRPC.Service != "" {
				t.Errorf("%s probe %+v, want grpc on 7070 with service \"\"", name, p.ProbeHandler)
			}
		}
		if p != nil && (p.PeriodSeconds < 1 || p.FailureThreshold < 1 || p.TimeoutSeconds < 1) {
			t.Errorf("%s probe timing %+v", name, p)
		}
	}
}

// checkMode asserts replicas, the update strategy, the database volume, the claim and the
// disruption budget of the values file's mode.
func checkMode(t *testing.T, r *rendered, want exampleWant) {
	t.Helper()
	d := r.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want.replicas {
		t.Errorf("replicas %v, want %d", d.Spec.Replicas, want.replicas)
	}
	if d.Spec.Strategy.Type != want.strategy {
		t.Errorf("strategy %s, want %s", d.Spec.Strategy.Type, want.strategy)
	}
	if want.strategy == appsv1.RollingUpdateDeploymentStrategyType {
		ru := d.Spec.Strategy.RollingUpdate
		if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
			t.Errorf("rolling update %+v: want maxUnavailable 0", ru)
		}
	}
	pod, c := d.Spec.Template.Spec, r.container(t)
	m := mount(c, "/var/lib/rbook")
	switch want.dataClaim {
	case "":
		if m != nil {
			t.Errorf("a data volume at /var/lib/rbook on PostgreSQL: %+v", m)
		}
	case "emptyDir":
		if m == nil || volume(pod, m.Name).EmptyDir == nil {
			t.Errorf("/var/lib/rbook: want an emptyDir")
		}
	default:
		if m == nil || m.ReadOnly {
			t.Fatalf("/var/lib/rbook mount %+v, want claim %s read-write", m, want.dataClaim)
		}
		if v := volume(pod, m.Name); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != want.dataClaim {
			t.Errorf("/var/lib/rbook is %+v, want claim %s", v.VolumeSource, want.dataClaim)
		}
	}
	if c, ok := r.pvcs[want.dataClaim]; ok != want.pvc || len(r.pvcs) != map[bool]int{true: 1}[want.pvc] {
		t.Errorf("claims %v, want the chart to make %q: %v", keys(r.pvcs), want.dataClaim, want.pvc)
	} else if ok {
		if c.Annotations["helm.sh/resource-policy"] != "keep" || !slices.Equal(c.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
			t.Errorf("claim %s: annotations %v, access modes %v; want kept on uninstall, ReadWriteOnce", c.Name, c.Annotations, c.Spec.AccessModes)
		}
	}
	if (r.pdb != nil) != want.pdb {
		t.Errorf("PodDisruptionBudget rendered %v, want %v", r.pdb != nil, want.pdb)
	} else if r.pdb != nil && (r.pdb.Spec.MinAvailable == nil || r.pdb.Spec.MinAvailable.IntValue() < 1 || r.pdb.Spec.MinAvailable.IntValue() >= int(want.replicas)) {
		t.Errorf("PodDisruptionBudget minAvailable %v with %d replicas", r.pdb.Spec.MinAvailable, want.replicas)
	}
}

// checkSecrets asserts that every secret reaches the pod from a Secret (environment
// variables by secretKeyRef, files by Secret volumes) and that no secret value of the
// values file appears outside a Secret object.
func checkSecrets(t *testing.T, r *rendered, want exampleWant) {
	t.Helper()
	c := r.container(t)
	got := map[string]secretRef{}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "RBOOK_") && e.Value != "" {
			t.Errorf("env %s has an inline value", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			got[e.Name] = secretRef{e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key}
			if e.Name == "RBOOK_APPROVAL_SECRET_PREVIOUS" != isTrue(e.ValueFrom.SecretKeyRef.Optional) {
				t.Errorf("env %s optional %v: only the previous approval secret is optional", e.Name, e.ValueFrom.SecretKeyRef.Optional)
			}
		}
	}
	if !reflect.DeepEqual(got, want.env) {
		t.Errorf("env from Secrets %v\nwant %v", got, want.env)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		if s := volume(r.deployment.Spec.Template.Spec, m.Name).Secret; s != nil {
			mounts[m.MountPath] = s.SecretName
			if !m.ReadOnly || s.DefaultMode == nil || *s.DefaultMode&0o007 != 0 {
				t.Errorf("Secret %s at %s: read-only %v, mode %v; want read-only, no access for others", s.SecretName, m.MountPath, m.ReadOnly, s.DefaultMode)
			}
		}
	}
	if !reflect.DeepEqual(mounts, want.secretMounts) {
		t.Errorf("Secret mounts %v\nwant %v", mounts, want.secretMounts)
	}
	made := keys(r.secrets)
	if !slices.Equal(made, want.chartSecrets) {
		t.Errorf("the chart made Secrets %v, want %v", made, want.chartSecrets)
	}
	for _, ref := range got {
		if s, ok := r.secrets[ref.secret]; ok && len(s.Data[ref.key]) == 0 && ref.key != "approval-secret-previous" {
			t.Errorf("Secret %s made by the chart has no %s", ref.secret, ref.key)
		}
	}
	// A Secret's data is base64: the plain value must appear nowhere in the rendering.
	for _, v := range want.neverInline {
		if strings.Contains(r.raw, v) {
			t.Errorf("secret value %q appears in the rendering outside a Secret's data", v)
		}
	}
}

// checkService asserts the one port, 7070 named grpc, and its application protocol.
func checkService(t *testing.T, r *rendered, tls bool) {
	t.Helper()
	proto := "kubernetes.io/h2c"
	if tls {
		proto = "https"
	}
	ps := r.service.Spec.Ports
	if len(ps) != 1 || ps[0].Name != "grpc" || ps[0].Port != 7070 || ps[0].TargetPort.String() != "grpc" || ps[0].AppProtocol == nil || *ps[0].AppProtocol != proto {
		t.Errorf("service ports %+v, want grpc 7070 → grpc, appProtocol %s", ps, proto)
	}
	cp := r.container(t).Ports
	if len(cp) != 1 || cp[0].Name != "grpc" || cp[0].ContainerPort != 7070 {
		t.Errorf("container ports %+v", cp)
	}
	if !reflect.DeepEqual(r.service.Spec.Selector, r.deployment.Spec.Selector.MatchLabels) {
		t.Errorf("service selects %v, the Deployment's pods carry %v", r.service.Spec.Selector, r.deployment.Spec.Selector.MatchLabels)
	}
}

// checkServiceMonitor asserts the ServiceMonitor, when wanted, scrapes /metrics on the
// service's grpc port in the release's namespace.
func checkServiceMonitor(t *testing.T, r *rendered, want bool) {
	t.Helper()
	sm := r.serviceMonitor
	if (sm != nil) != want {
		t.Fatalf("ServiceMonitor rendered %v, want %v", sm != nil, want)
	}
	if sm == nil {
		return
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "grpc" || sm.Spec.Endpoints[0].Path != "/metrics" ||
		!reflect.DeepEqual(sm.Spec.Selector.MatchLabels, r.deployment.Spec.Selector.MatchLabels) ||
		!slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("ServiceMonitor spec %+v", sm.Spec)
	}
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v: want the example's release=prometheus", sm.Metadata.Labels)
	}
}

// mount is c's volume mount at path, or nil.
func mount(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// mountAt is the name of the volume mounted at path, or fails the test.
func mountAt(t *testing.T, c *corev1.Container, path string) string {
	t.Helper()
	m := mount(c, path)
	if m == nil {
		t.Fatalf("nothing mounted at %s", path)
	}
	return m.Name
}

// volume is the pod's volume named name (the zero Volume if there is none).
func volume(pod corev1.PodSpec, name string) corev1.Volume {
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	return corev1.Volume{}
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	if len(ks) == 0 {
		return nil
	}
	return ks
}

func isTrue(b *bool) bool { return b != nil && *b }

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
