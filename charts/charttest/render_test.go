package charttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The chart under test, and the release name and namespace every rendering uses.
const (
	chartDir    = "../rbook"
	releaseName = "rbook"
	namespace   = "rbook"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the chart writes; decoding strictly into it catches a field the
// chart misspells or adds without the test knowing.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
			Scheme        string `json:"scheme"`
			Authorization *struct {
				Type        string       `json:"type"`
				Credentials secretKeyRef `json:"credentials"`
			} `json:"authorization"`
			TLSConfig *struct {
				ServerName string `json:"serverName"`
				CA         *struct {
					Secret *secretKeyRef `json:"secret"`
				} `json:"ca"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// secretKeyRef is a key of a Secret, as the Prometheus Operator's types name one.
type secretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// rendered is one `helm template` output, each object decoded into its API type.
type rendered struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	configMap      *corev1.ConfigMap
	serviceAccount *corev1.ServiceAccount
	secrets        map[string]*corev1.Secret
	pvcs           map[string]*corev1.PersistentVolumeClaim
	ingress        *networkingv1.Ingress
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *serviceMonitor
	// raw is the whole rendering, for checks that no secret value appears in it.
	raw string
}

// helmBin is the helm on PATH, or skips the test.
func helmBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("helm")
	if err != nil {
		t.Skip("helm is not on PATH: .ci/chart builds the version pinned in tools/go.mod " +
			"(go build -C tools -o .ci-bin/helm helm.sh/helm/v3/cmd/helm; PATH=$PWD/.ci-bin:$PATH)")
	}
	return p
}

// helmTemplate runs `helm template` of the chart with args (values files, --set) and returns
// its stdout, its stderr and whether it failed.
func helmTemplate(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", releaseName, chartDir, "--namespace", namespace}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// render runs helm template with args, fails the test if it fails, and decodes every object
// strictly: an unknown field, a duplicate field or a kind the chart should not make fails.
func render(t *testing.T, args ...string) *rendered {
	t.Helper()
	out, stderr, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	r := &rendered{secrets: map[string]*corev1.Secret{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}, raw: out}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the rendering: %v", err)
		}
		if isEmptyDoc(doc) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("object without apiVersion/kind: %v\n%s", err, doc)
		}
		r.add(t, tm, doc)
	}
	if r.deployment == nil || r.service == nil || r.configMap == nil {
		t.Fatalf("the rendering lacks a Deployment, Service or ConfigMap:\n%s", out)
	}
	return r
}

// add decodes doc strictly into the type its apiVersion and kind name.
func (r *rendered) add(t *testing.T, tm metav1.TypeMeta, doc []byte) {
	t.Helper()
	strict := func(into any) {
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("%s %s does not decode strictly: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
		}
	}
	once := func(taken bool) {
		if taken {
			t.Fatalf("the rendering has two objects of kind %s", tm.Kind)
		}
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		once(r.deployment != nil)
		r.deployment = &appsv1.Deployment{}
		strict(r.deployment)
	case "v1 Service":
		once(r.service != nil)
		r.service = &corev1.Service{}
		strict(r.service)
	case "v1 ConfigMap":
		once(r.configMap != nil)
		r.configMap = &corev1.ConfigMap{}
		strict(r.configMap)
	case "v1 ServiceAccount":
		once(r.serviceAccount != nil)
		r.serviceAccount = &corev1.ServiceAccount{}
		strict(r.serviceAccount)
	case "v1 Secret":
		s := &corev1.Secret{}
		strict(s)
		r.secrets[s.Name] = s
	case "v1 PersistentVolumeClaim":
		c := &corev1.PersistentVolumeClaim{}
		strict(c)
		r.pvcs[c.Name] = c
	case "networking.k8s.io/v1 Ingress":
		once(r.ingress != nil)
		r.ingress = &networkingv1.Ingress{}
		strict(r.ingress)
	case "policy/v1 PodDisruptionBudget":
		once(r.pdb != nil)
		r.pdb = &policyv1.PodDisruptionBudget{}
		strict(r.pdb)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		once(r.serviceMonitor != nil)
		r.serviceMonitor = &serviceMonitor{}
		strict(r.serviceMonitor)
	default:
		t.Fatalf("the chart rendered %s %s, which this test does not know", tm.APIVersion, tm.Kind)
	}
}

// isEmptyDoc reports whether a YAML document holds only comments and blank lines.
func isEmptyDoc(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// container is the Deployment's one container, rbook.
func (r *rendered) container(t *testing.T) *corev1.Container {
	t.Helper()
	cs := r.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "rbook" {
		t.Fatalf("want one container named rbook, have %d", len(cs))
	}
	return &cs[0]
}

// configFile is the `rbook serve --config` file the ConfigMap holds, decoded.
func (r *rendered) configFile(t *testing.T) map[string]any {
	t.Helper()
	text, ok := r.configMap.Data["config.yaml"]
	if !ok {
		t.Fatalf("the ConfigMap has no config.yaml: %v", r.configMap.Data)
	}
	var m map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &m); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, text)
	}
	return m
}
