package charttest

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The ServiceMonitor's options (docs/helm.md, "ServiceMonitor"): a bearer token Secret is
// sent by Prometheus and required by rbook serve (--metrics-token-file, the key mounted from
// that Secret); with TLS, Prometheus verifies the certificate against the CA Secret given, for
// the server name given or the Service's DNS name. Without the options the endpoint carries
// neither.
func TestServiceMonitorSendsTheMetricsTokenAndVerifiesTLS(t *testing.T) {
	sqlite := filepath.Join(chartDir, "examples", "sqlite.yaml")
	tls := filepath.Join(chartDir, "examples", "with-tls.yaml")
	type want struct {
		token      *secretKeyRef // nil: no authorization, no metrics-token-file
		scheme     string
		serverName string
		ca         *secretKeyRef
	}
	for _, tc := range []struct {
		name string
		args []string
		want want
	}{
		{"plain HTTP, no token", []string{"-f", sqlite, "--set", "serviceMonitor.enabled=true"},
			want{scheme: "http"}},
		{"plain HTTP with a token", []string{"-f", sqlite, "--set", "serviceMonitor.enabled=true,serviceMonitor.bearerTokenSecret.name=rbook-metrics"},
			want{token: &secretKeyRef{"rbook-metrics", "token"}, scheme: "http"}},
		{"TLS with the defaults", []string{"-f", tls, "--set", "serviceMonitor.enabled=true"},
			want{scheme: "https", serverName: "rbook.rbook.svc"}},
		{"TLS with a CA, a server name and a token under its own key", []string{"-f", tls, "--set",
			"serviceMonitor.enabled=true,serviceMonitor.tlsConfig.caSecret.name=rbook-tls,serviceMonitor.tlsConfig.serverName=rbook.example.com," +
				"serviceMonitor.bearerTokenSecret.name=rbook-metrics,serviceMonitor.bearerTokenSecret.key=prometheus"},
			want{token: &secretKeyRef{"rbook-metrics", "prometheus"}, scheme: "https", serverName: "rbook.example.com", ca: &secretKeyRef{"rbook-tls", "ca.crt"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.args...)
			if r.serviceMonitor == nil || len(r.serviceMonitor.Spec.Endpoints) != 1 {
				t.Fatalf("ServiceMonitor %+v, want one endpoint", r.serviceMonitor)
			}
			ep := r.serviceMonitor.Spec.Endpoints[0]
			if ep.Scheme != tc.want.scheme {
				t.Errorf("scheme %q, want %q", ep.Scheme, tc.want.scheme)
			}
			checkMetricsToken(t, r, ep.Authorization == nil, tc.want.token)
			if ep.Authorization != nil && (ep.Authorization.Type != "Bearer" || tc.want.token == nil || ep.Authorization.Credentials != *tc.want.token) {
				t.Errorf("authorization %+v, want Bearer from %+v", ep.Authorization, tc.want.token)
			}
			switch {
			case tc.want.scheme == "http" && ep.TLSConfig != nil:
				t.Errorf("tlsConfig %+v on plain HTTP", ep.TLSConfig)
			case tc.want.scheme == "https" && (ep.TLSConfig == nil || ep.TLSConfig.ServerName != tc.want.serverName):
				t.Errorf("tlsConfig %+v, want server name %q", ep.TLSConfig, tc.want.serverName)
			case tc.want.scheme == "https" && tc.want.ca == nil && ep.TLSConfig.CA != nil:
				t.Errorf("tlsConfig.ca %+v, want none", ep.TLSConfig.CA)
			case tc.want.ca != nil && (ep.TLSConfig.CA == nil || ep.TLSConfig.CA.Secret == nil || *ep.TLSConfig.CA.Secret != *tc.want.ca):
				t.Errorf("tlsConfig.ca %+v, want the Secret key %+v", ep.TLSConfig.CA, tc.want.ca)
			}
		})
	}
}

// checkMetricsToken asserts rbook serve requires the token the ServiceMonitor sends: the
// config file's metrics-token-file is the key of Secret token mounted read-only at
// /etc/rbook-secrets/metrics; with token nil there is neither (and none is sent: noAuth).
func checkMetricsToken(t *testing.T, r *rendered, noAuth bool, token *secretKeyRef) {
	t.Helper()
	file, set := r.configFile(t)["metrics-token-file"]
	m := mount(&r.deployment.Spec.Template.Spec.Containers[0], "/etc/rbook-secrets/metrics")
	if token == nil {
		if set || m != nil || !noAuth {
			t.Errorf("no token configured, but metrics-token-file %v, mount %+v, authorization sent %v", file, m, !noAuth)
		}
		return
	}
	if file != "/etc/rbook-secrets/metrics/"+token.Key {
		t.Errorf("metrics-token-file %v, want /etc/rbook-secrets/metrics/%s", file, token.Key)
	}
	if m == nil || !m.ReadOnly {
		t.Fatalf("the token's mount %+v, want /etc/rbook-secrets/metrics read-only", m)
	}
	var vol *corev1.Volume
	for i, v := range r.deployment.Spec.Template.Spec.Volumes {
		if v.Name == m.Name {
			vol = &r.deployment.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != token.Name || len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Key != token.Key {
		t.Errorf("the token's volume %+v, want the key %q of Secret %q", vol, token.Key, token.Name)
	}
}
