package main

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// The files under deploy/ (docs/deploy.md) run `rbook serve` and `rbook admin health` with
// flags written by hand: these tests parse each file and hand its arguments to the real
// command's flag set, so a renamed or removed flag fails here and not in an operator's
// deployment.

// composeFile is the part of deploy/compose/compose.yaml the tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// readCompose decodes deploy/compose/compose.yaml strictly enough for the tests: every
// service's command and health check must be lists.
func readCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal([]byte(repoFile(t, "deploy/compose/compose.yaml")), &c); err != nil {
		t.Fatalf("deploy/compose/compose.yaml: %v", err)
	}
	return c
}

// containerfileInstr returns the arguments of each instruction of deploy/container/Containerfile
// (continuation lines joined, comments dropped), by upper-case instruction name.
func containerfileInstr(t *testing.T) map[string][]string {
	t.Helper()
	text := strings.ReplaceAll(repoFile(t, "deploy/container/Containerfile"), "\\\n", " ")
	out := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		out[strings.ToUpper(instr)] = append(out[strings.ToUpper(instr)], strings.TrimSpace(rest))
	}
	return out
}

// jsonArgs decodes an exec-form instruction argument (["a", "b"]).
func jsonArgs(t *testing.T, where, s string) []string {
	t.Helper()
	var args []string
	if err := json.Unmarshal([]byte(s), &args); err != nil {
		t.Fatalf("%s: %q is not an exec-form JSON list: %v", where, s, err)
	}
	return args
}

// unitDirectives returns the directives of deploy/systemd/rbook.service by key (several
// values for a key that repeats).
func unitDirectives(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range strings.Split(repoFile(t, "deploy/systemd/rbook.service"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("deploy/systemd/rbook.service: %q is not KEY=VALUE", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// checkServeArgs parses args with rbook serve's own flag set (and admin health's for
// health) and fails on an unknown flag, a flag without its value, or a positional argument.
func checkServeArgs(t *testing.T, where string, args []string, health bool) {
	t.Helper()
	cmd := newServeCmd()
	if health {
		cmd = newAdminHealthCmd()
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Errorf("%s: %s %s: %v", where, cmd.CommandPath(), strings.Join(args, " "), err)
		return
	}
	if rest := cmd.Flags().Args(); len(rest) > 0 {
		t.Errorf("%s: %s takes no arguments, got %q", where, cmd.Name(), rest)
	}
}

// TestDeployFilesUseOnlyRealServeFlags: the compose service's command, the systemd unit's
// ExecStart and the image's CMD are flags rbook serve has, and every health check is
// rbook admin health with flags it has.
func TestDeployFilesUseOnlyRealServeFlags(t *testing.T) {
	c := readCompose(t)
	svc, ok := c.Services["rbook"]
	if !ok || !strings.HasPrefix(svc.Image, "${RBOOK_IMAGE:-ghcr.io/rbookhq/rbook}:") {
		t.Fatalf("compose.yaml: no service rbook on image ${RBOOK_IMAGE:-ghcr.io/rbookhq/rbook} (services %v)", c.Services)
	}
	checkServeArgs(t, "deploy/compose/compose.yaml services.rbook.command", svc.Command, false)
	if svc.Healthcheck == nil || len(svc.Healthcheck.Test) < 4 || svc.Healthcheck.Test[0] != "CMD" || strings.Join(svc.Healthcheck.Test[1:4], " ") != "/rbook admin health" {
		t.Errorf("compose.yaml services.rbook.healthcheck.test = %v; want [CMD /rbook admin health …]", svc.Healthcheck)
	} else {
		checkServeArgs(t, "deploy/compose/compose.yaml services.rbook.healthcheck", svc.Healthcheck.Test[4:], true)
	}

	execStart := unitDirectives(t)["ExecStart"]
	if len(execStart) != 1 {
		t.Fatalf("rbook.service: %d ExecStart lines, want 1", len(execStart))
	}
	words := strings.Fields(execStart[0])
	if len(words) < 2 || words[0] != "/usr/local/bin/rbook" || words[1] != "serve" {
		t.Fatalf("rbook.service ExecStart=%s; want /usr/local/bin/rbook serve …", execStart[0])
	}
	checkServeArgs(t, "deploy/systemd/rbook.service ExecStart", words[2:], false)

	in := containerfileInstr(t)
	if ep := in["ENTRYPOINT"]; len(ep) != 1 || strings.Join(jsonArgs(t, "Containerfile ENTRYPOINT", ep[0]), " ") != "/rbook serve" {
		t.Errorf("Containerfile ENTRYPOINT %v; want [\"/rbook\", \"serve\"]", ep)
	}
	if cmd := in["CMD"]; len(cmd) != 1 {
		t.Errorf("Containerfile: %d CMD lines, want 1", len(cmd))
	} else {
		checkServeArgs(t, "deploy/container/Containerfile CMD", jsonArgs(t, "Containerfile CMD", cmd[0]), false)
	}
	hc := in["HEALTHCHECK"]
	if len(hc) != 1 || !strings.Contains(hc[0], " CMD [") {
		t.Fatalf("Containerfile HEALTHCHECK %v; want one with an exec-form CMD", hc)
	}
	_, form, _ := strings.Cut(hc[0], " CMD ")
	args := jsonArgs(t, "Containerfile HEALTHCHECK", form)
	if len(args) < 3 || strings.Join(args[:3], " ") != "/rbook admin health" {
		t.Fatalf("Containerfile HEALTHCHECK runs %v; want /rbook admin health (the image has no shell)", args)
	}
	checkServeArgs(t, "deploy/container/Containerfile HEALTHCHECK", args[3:], true)
}

// TestComposeQuickstartRunsOnPostgres: the quickstart's rbook serve stores in the
// compose file's own PostgreSQL service, starts after that database answers its health
// check, keeps the data in a named volume, and takes its secrets from .env, not from the
// file (docs/deploy.md, "Compose quickstart").
func TestComposeQuickstartRunsOnPostgres(t *testing.T) {
	c := readCompose(t)
	pg, rb := c.Services["postgres"], c.Services["rbook"]
	if pg.Image != "postgres:16" || pg.Healthcheck == nil || len(pg.Healthcheck.Test) == 0 {
		t.Errorf("services.postgres: image %q, healthcheck %v; want postgres:16 with a healthcheck", pg.Image, pg.Healthcheck)
	}
	if len(pg.Volumes) != 1 || !strings.HasPrefix(pg.Volumes[0], "pgdata:") || c.Volumes == nil || len(c.Volumes) != 1 {
		t.Errorf("services.postgres.volumes %v, volumes %v; want the named volume pgdata", pg.Volumes, c.Volumes)
	}
	if rb.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("services.rbook.depends_on %v; want postgres: service_healthy", rb.DependsOn)
	}
	db := ""
	for i, a := range rb.Command {
		if a == "--db" && i+1 < len(rb.Command) {
			db = rb.Command[i+1]
		}
	}
	u, err := url.Parse(db)
	if err != nil || !store.IsPostgresDSN(db) || store.CheckDSN(db) != nil || u.Host != "postgres:5432" || u.User == nil || u.User.String() != "rbook" {
		t.Errorf("services.rbook --db %q; want a postgres:// URL of the postgres service without a password in it", db)
	}
	for _, k := range []string{"RBOOK_APPROVAL_SECRET", "PGPASSWORD"} {
		if v := rb.Environment[k]; !strings.HasPrefix(v, "${") {
			t.Errorf("services.rbook.environment.%s = %q; want it from .env (${…})", k, v)
		}
	}
	if v := pg.Environment["POSTGRES_PASSWORD"]; !strings.HasPrefix(v, "${POSTGRES_PASSWORD") {
		t.Errorf("services.postgres.environment.POSTGRES_PASSWORD = %q; want it from .env", v)
	}
	example := repoFile(t, "deploy/compose/env.example")
	for _, k := range []string{"RBOOK_APPROVAL_SECRET=", "POSTGRES_PASSWORD="} {
		if !strings.Contains(example, "\n"+k+"\n") {
			t.Errorf("deploy/compose/env.example has no empty %s line", k)
		}
	}
}

// TestContainerfileRunsAsNonRootWithItsState: the image runs as the numeric non-root
// user 65532, keeps its state in the /var/lib/rbook volume where CMD puts the database,
// exposes rbook serve's default port, and carries the OCI labels the release fills in
// (docs/deploy.md, "The container image").
func TestContainerfileRunsAsNonRootWithItsState(t *testing.T) {
	in := containerfileInstr(t)
	if got := in["FROM"]; len(got) != 1 || got[0] != "scratch" {
		t.Errorf("FROM %v; want scratch (nothing to pull, nothing but rbook and CA certificates)", got)
	}
	if got := in["USER"]; len(got) != 1 || got[0] != "65532:65532" {
		t.Errorf("USER %v; want 65532:65532", got)
	}
	if got := in["VOLUME"]; len(got) != 1 || got[0] != `["/var/lib/rbook"]` {
		t.Errorf("VOLUME %v; want [\"/var/lib/rbook\"]", got)
	}
	if got := in["EXPOSE"]; len(got) != 1 || got[0] != defaultServePort {
		t.Errorf("EXPOSE %v; want %s", got, defaultServePort)
	}
	cmd := jsonArgs(t, "CMD", in["CMD"][0])
	if want := []string{"--addr", "0.0.0.0:" + defaultServePort, "--db", "/var/lib/rbook/controlplane.db"}; strings.Join(cmd, " ") != strings.Join(want, " ") {
		t.Errorf("CMD %q; want %q", cmd, want)
	}
	labels := strings.Join(in["LABEL"], " ")
	for _, k := range []string{"source", "revision", "version", "title", "licenses"} {
		if !strings.Contains(labels, "org.opencontainers.image."+k+"=") {
			t.Errorf("LABEL has no org.opencontainers.image.%s", k)
		}
	}
	if got := strings.Join(in["COPY"], "\n"); !strings.Contains(got, "--chown=65532:65532 state/ /var/lib/rbook/") {
		t.Errorf("COPY lines %q: /var/lib/rbook must be created owned by 65532 so the volume is writable", got)
	}
}

// TestSystemdUnitIsHardened: the unit keeps the hardening docs/deploy.md ("systemd")
// promises, and `systemd-analyze verify` reads it without a complaint (skipped where
// systemd-analyze is not installed). verify exits 0 on an unknown key or a bad value and
// only prints a line, so any line naming the unit fails the test.
func TestSystemdUnitIsHardened(t *testing.T) {
	d := unitDirectives(t)
	want := map[string]string{
		"DynamicUser": "yes", "StateDirectory": "rbook", "ProtectSystem": "strict", "ProtectHome": "yes",
		"NoNewPrivileges": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "EnvironmentFile": "/etc/rbook/rbook.env",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("rbook.service %s=%q; want %q", k, got, v)
		}
	}
	if got := strings.Join(d["SystemCallFilter"], " "); !strings.Contains(got, "@system-service") {
		t.Errorf("rbook.service SystemCallFilter=%q; want @system-service", got)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd): the unit's directives were checked, systemd's reading of them was not")
	}
	// verify checks that ExecStart's binary is executable: point it at this test binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "rbook.service")
	text := strings.Replace(repoFile(t, "deploy/systemd/rbook.service"), "ExecStart=/usr/local/bin/rbook ", "ExecStart="+self+" ", 1)
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	var complaints []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "rbook.service") {
			complaints = append(complaints, line)
		} else if strings.TrimSpace(line) != "" {
			t.Logf("systemd-analyze (not about the unit): %s", line)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Fatalf("systemd-analyze verify deploy/systemd/rbook.service: %v\n%s", err, strings.Join(complaints, "\n"))
	}
}
