package charttest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestValuesRbookCannotRunWithAreRefused renders values rbook serve would refuse at start-up,
// or that would put two servers on one SQLite file, and expects helm to fail with a message
// that names the value to set.
func TestValuesRbookCannotRunWithAreRefused(t *testing.T) {
	sqlite := filepath.Join(chartDir, "examples", "sqlite.yaml")
	tls := filepath.Join(chartDir, "examples", "with-tls.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"several replicas on SQLite", []string{"-f", sqlite, "--set", "replicaCount=3"},
			"replicaCount is 3 but database.type is sqlite: a SQLite database has exactly one server"},
		{"PostgreSQL without a URL", []string{"-f", sqlite, "--set", "database.type=postgresql,replicaCount=2"},
			"database.type is postgresql but no database URL: set database.postgresql.existingSecret"},
		{"no approval secret", []string{"-f", sqlite, "--set", "approvalSecret.existingSecret="},
			"rbook serve does not start without an approval secret: set approvalSecret.existingSecret"},
		{"a quickstart approval secret too short", []string{"-f", sqlite, "--set", "approvalSecret.existingSecret=,approvalSecret.value=short"},
			"approvalSecret.value is shorter than 16 bytes"},
		{"no authentication", []string{"-f", sqlite, "--set", "auth.existingSecret="},
			"refuses that without authentication: set auth.existingSecret"},
		{"TLS without its Secret", []string{"-f", tls, "--set", "tls.secretName="},
			"tls.enabled needs tls.secretName"},
		{"the ServiceMonitor's TLS without TLS", []string{"-f", sqlite, "--set", "serviceMonitor.enabled=true,serviceMonitor.tlsConfig.caSecret.name=rbook-ca"},
			"serviceMonitor.tlsConfig is how Prometheus verifies rbook's certificate, and rbook serves plain HTTP without tls.enabled"},
		{"the GitHub App without its Secret", []string{"-f", sqlite, "--set", "githubApp.enabled=true,githubApp.appId=7"},
			"githubApp.enabled needs githubApp.appId"},
		{"a misspelt serve setting", []string{"-f", sqlite, "--set", "serve.gate-polcy=/etc/rbook/files/g.yaml"},
			"gate-polcy"},
		{"a setting the chart owns", []string{"-f", sqlite, "--set", "serve.db=/tmp/x.db"},
			"'db' not allowed"},
		{"an unknown database type", []string{"-f", sqlite, "--set", "database.type=mysql"},
			"database/type"},
		{"zero replicas", []string{"-f", sqlite, "--set", "replicaCount=0"},
			"replicaCount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := helmTemplate(t, tc.args...)
			if err == nil {
				t.Fatalf("helm template %s rendered:\n%s", strings.Join(tc.args, " "), out)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template %s: %s\nwant the message to contain %q", strings.Join(tc.args, " "), stderr, tc.want)
			}
		})
	}
}

// TestSeveralReplicasOnPostgreSQLRender is the other side of the SQLite refusal: the same
// replica count renders once the database is PostgreSQL, and the URL never enters the config
// file.
func TestSeveralReplicasOnPostgreSQLRender(t *testing.T) {
	const url = "postgres://rbook:pw-not-in-config@db:5432/rbook"
	r := render(t, "-f", filepath.Join(chartDir, "examples", "sqlite.yaml"),
		"--set", "replicaCount=3,database.type=postgresql,database.postgresql.url="+url)
	if *r.deployment.Spec.Replicas != 3 {
		t.Errorf("replicas %d", *r.deployment.Spec.Replicas)
	}
	if _, ok := r.configFile(t)["db"]; ok {
		t.Errorf("config.yaml names a db on PostgreSQL: %v", r.configFile(t))
	}
	s, ok := r.secrets["rbook-database"]
	if !ok || string(s.Data["url"]) != url {
		t.Fatalf("the chart's database Secret %v, want the url", s)
	}
	if strings.Contains(r.raw, "pw-not-in-config") {
		t.Errorf("the database password appears in the rendering outside the Secret's data")
	}
	if r.pdb == nil || r.pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %v, want minAvailable 1", r.pdb)
	}
}
