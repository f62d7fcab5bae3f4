package serveconfig

import (
	"bytes"
	"encoding/json"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/flagconfig"
)

const (
	serveSchemaFile  = "../../docs/serve-config.schema.json"
	serveExampleFile = "../../docs/examples/serve-config.yaml"
)

// The committed schema is the one the serve command's flags generate; when a flag is added
// or its usage changes, the failure says the command that regenerates it.
func TestServeConfigSchemaIsCurrent(t *testing.T) {
	want, err := schema(newServeCmd().Flags())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(serveSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/serve-config.schema.json is stale: regenerate it with\n  %s", schemaCommand)
	}
}

// compileServeSchema is the committed schema, compiled.
func compileServeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile(serveSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("serve-config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("serve-config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// validateYAML validates a YAML configuration against sch as a JSON document.
func validateYAML(t *testing.T, sch *jsonschema.Schema, text string) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

// applyServeFile applies file (and the environment) to a fresh serve command's flags, as
// rbook serve --config file does.
func applyServeFile(t *testing.T, file string) error {
	t.Helper()
	cmd, s := newServe()
	if err := cmd.ParseFlags([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReadConfig(cmd)
	return err
}

// The schema and the loader agree: the example file and other good files pass both, and
// each kind of mistake the schema can see is refused by both.
func TestServeConfigSchemaAndLoaderAgree(t *testing.T) {
	sch := compileServeSchema(t)
	example, err := os.ReadFile(serveExampleFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"the example", string(example), true},
		{"limits off, no proxies", "rate-limit-console: off\nrate-limit-signin: 5/h\ntrusted-proxies: []\n", true},
		{"an unknown key", "listen: 0.0.0.0:7070\n", false},
		{"a list where a string belongs", "db: [a, b]\n", false},
		{"a string where a boolean belongs", "insecure: \"true\"\n", false},
		{"a number where a string belongs", "addr: 7070\n", false},
		{"a string where an integer belongs", "github-app-id: abc\n", false},
		{"a rate that is not one", "rate-limit-webhook: fast\n", false},
		{"a string where a list belongs", "trusted-proxies: 10.0.0.0/8\n", false},
		{"a deprecated flag", "forbid-self-approval: true\n", false},
		{"the config file itself", "config: other.yaml\n", false},
		{"a secret", "approval-secret: 0123456789abcdef0123\n", false},
		{"a one-time repair", "reset-approval-secret-check: true\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "serve.yaml")
			if err := os.WriteFile(file, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			schemaErr, loadErr := validateYAML(t, sch, tc.text), applyServeFile(t, file)
			if (schemaErr == nil) != tc.ok || (loadErr == nil) != tc.ok {
				t.Fatalf("schema: %v\nloader: %v\nwant both to %s it", schemaErr, loadErr, map[bool]string{true: "accept", false: "refuse"}[tc.ok])
			}
			if loadErr != nil && !strings.HasPrefix(loadErr.Error(), file+":1:") {
				t.Errorf("loader error %q does not start with %s:1:COL", loadErr, file)
			}
		})
	}
}

// A flag another file adds to the serve command is a key of the file and an RBOOK_ variable
// with no change to the loader, and a property of the schema.
func TestServeConfigPicksUpFlagsAddedLater(t *testing.T) {
	cmd, s := newServe()
	f := cmd.Flags()
	cert := f.String("extra-cert", "", "certificate `FILE`")
	key := f.String("extra-key", "", "key `FILE`")
	keep := f.Duration("extra-keep", 0, "keep finished runs this long")
	hosts := f.StringSlice("allowed-hosts", nil, "hosts")
	file := filepath.Join(t.TempDir(), "serve.yaml")
	text := "extra-cert: /etc/rbook/tls.crt\nextra-key: /from/the/file\nextra-keep: 720h\nallowed-hosts: [a.example, b.example]\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RBOOK_EXTRA_KEY", "/etc/rbook/tls.key")
	if err := cmd.ParseFlags([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadConfig(cmd); err != nil {
		t.Fatal(err)
	}
	if *cert != "/etc/rbook/tls.crt" || *key != "/etc/rbook/tls.key" || *keep != 720*time.Hour || !slices.Equal(*hosts, []string{"a.example", "b.example"}) {
		t.Errorf("extra-cert %q extra-key %q extra-keep %v allowed-hosts %q; want the file's, RBOOK_EXTRA_KEY's, the file's, the file's", *cert, *key, *keep, *hosts)
	}
	b, err := schema(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"extra-cert": {`, `"extra-keep": {`, `"pattern": "` + strings.ReplaceAll(flagconfig.DurationPattern, `\`, `\\`) + `"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("schema lacks %s", want)
		}
	}
}

// rbookEnvRead finds the RBOOK_ variables rbook's code reads: os.Getenv or os.LookupEnv of a
// literal, or a constant holding one.
var rbookEnvRead = lazyregexp.New(`(?:Getenv|LookupEnv)\("(RBOOK_[A-Z0-9_]+)"\)|^\s*\w+\s*=\s*"(RBOOK_[A-Z0-9_]+)"`)

// No serve setting's variable is one rbook already reads for something else (a secret, a
// client command's setting): such a variable would reconfigure the server from a shell meant
// for the CLI. The reserved list names them all.
func TestServeFlagsMapOntoNoReservedVariable(t *testing.T) {
	settings := map[string]string{}
	for _, f := range flagconfig.Settings(newServeCmd().Flags(), configOptions) {
		settings[flagconfig.EnvName(configOptions.EnvPrefix, f.Name)] = f.Name
	}
	if len(settings) < 20 {
		t.Fatalf("only %d serve settings: %v", len(settings), settings)
	}
	for env := range settings {
		if slices.Contains(configOptions.ReservedEnv, env) {
			t.Errorf("--%s maps onto %s, which rbook reads for something else: rename the flag", settings[env], env)
		}
	}
	read := map[string]string{}
	for _, dir := range []string{"../../action", "../../controlplane", "../../cmd", "../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n") {
				if !strings.Contains(line, `"RBOOK_`) {
					continue
				}
				for _, m := range rbookEnvRead.Regexp().FindAllStringSubmatch(line, -1) {
					read[m[1]+m[2]] = path
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := read["RBOOK_CONTROL_PLANE"]; !ok {
		t.Fatalf("the scan found no RBOOK_CONTROL_PLANE: found %v", read)
	}
	// Variables another command reads with the serve setting's own meaning: `rbook admin
	// health` checks the control plane at the address RBOOK_ADDR makes it listen on.
	sameMeaning := map[string]bool{"RBOOK_ADDR": true}
	for env, path := range read {
		if sameMeaning[env] {
			if _, ok := settings[env]; !ok {
				t.Errorf("%s reads %s as a serve setting's variable, but no serve flag maps onto it", path, env)
			}
			continue
		}
		if name, ok := settings[env]; ok {
			t.Errorf("%s reads %s, which is also --%s's variable", path, env, name)
		}
		if !slices.Contains(configOptions.ReservedEnv, env) {
			t.Errorf("%s reads %s: add it to configOptions.ReservedEnv", path, env)
		}
	}
}

// --print-config prints every setting with its source and exits without serving; no
// secret appears: the approval secrets are shown by their variable and length, a database
// password is masked, whether the DSN comes from the file or the environment.
func TestPrintConfigShowsNoSecret(t *testing.T) {
	const (
		signing  = "c2lnbmluZy1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZmdo" // 44 bytes
		previous = "previous-secret-0123456789"
	)
	for _, tc := range []struct{ name, file, env, password, wantDB string }{
		{"URL in the file", "db: postgres://rbook:filepass1234@db.internal:5432/rbook?sslmode=require\n", "", "filepass1234",
			"db: postgres://rbook:xxxxx@db.internal:5432/rbook?sslmode=require # file line 1\n"},
		{"key=value in the environment", "db: /var/lib/rbook/cp.db\n", "host=db.internal dbname=rbook user=rbook password=envpass5678", "envpass5678",
			"db: host=db.internal dbname=rbook user=rbook password=xxxxx # env RBOOK_DB\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "serve.yaml")
			if err := os.WriteFile(file, []byte(tc.file+"public-url: https://rbook.example.com\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("RBOOK_APPROVAL_SECRET", signing)
			t.Setenv("RBOOK_APPROVAL_SECRET_PREVIOUS", previous)
			t.Setenv("RBOOK_CONFIG", file)
			t.Setenv("RBOOK_DB", tc.env)
			t.Setenv("RBOOK_LOG_JSON", "true")
			cmd := newServeCmd()
			var out, errOut bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs([]string{"--print-config", "--addr", "127.0.0.1:0"})
			if err := cmd.Execute(); err != nil {
				t.Fatalf("rbook serve --print-config: %v\n%s", err, errOut.String())
			}
			text := out.String()
			for _, secret := range []string{signing, previous, tc.password} {
				if strings.Contains(text+errOut.String(), secret) {
					t.Errorf("the output shows the secret %q:\n%s", secret, text)
				}
			}
			for _, want := range []string{
				"# config file: " + file + "\n",
				tc.wantDB,
				"addr: 127.0.0.1:0 # flag\n",
				"log-json: true # env RBOOK_LOG_JSON\n",
				"public-url: https://rbook.example.com # file line 2\n",
				"rate-limit-webhook: 50/s # default\n",
				"# approval secret: <set, from RBOOK_APPROVAL_SECRET, 44 bytes>\n",
				"# previous approval secret: <set, from RBOOK_APPROVAL_SECRET_PREVIOUS, 26 bytes>\n",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("the output lacks %q:\n%s", want, text)
				}
			}
			if strings.Contains(text, "listening") {
				t.Errorf("--print-config started the server:\n%s", text)
			}
		})
	}
	t.Run("no secrets", func(t *testing.T) {
		t.Setenv("RBOOK_APPROVAL_SECRET", "")
		t.Setenv("RBOOK_SECRET", "")
		t.Setenv("RBOOK_APPROVAL_SECRET_PREVIOUS", "")
		t.Setenv("RBOOK_CONFIG", "")
		cmd := newServeCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--print-config"})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "RBOOK_APPROVAL_SECRET") {
			t.Errorf("rbook serve --print-config without a secret: error %v, want serve's, naming RBOOK_APPROVAL_SECRET", err)
		}
		for _, want := range []string{"# config file: none\n", "# approval secret: <not set>\n", "# previous approval secret: <not set>\n"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

// The limit flags reach the server's options: rates as given, proxies as CIDRs (a bare
// address is its own /32 or /128); an entry that is neither is refused by name.
func TestServeLimitFlagsReachTheServer(t *testing.T) {
	cmd, s := newServe()
	if err := cmd.ParseFlags([]string{"--rate-limit-signin", "5/m", "--rate-limit-console", "off", "--trusted-proxies", "10.1.2.3/8,192.0.2.7,2001:db8::1"}); err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	if err := s.limits.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::1/128")}
	if l == nil || l.SignIn != (server.Rate{N: 5, Per: time.Minute}) || l.Console != (server.Rate{}) || l.Webhook != server.DefaultLimits().Webhook || !slices.Equal(l.TrustedProxies, want) {
		t.Fatalf("limits %+v", l)
	}
	cmd, s = newServe()
	if err := cmd.ParseFlags([]string{"--trusted-proxies", "proxy.internal"}); err != nil {
		t.Fatal(err)
	}
	if err := s.limits.apply(&cfg); err == nil || !strings.Contains(err.Error(), `--trusted-proxies: "proxy.internal" is neither a CIDR`) {
		t.Fatalf("a host name as a proxy: %v", err)
	}
}

// --print-config checks what it printed as serve would: settings serve refuses still print,
// then the command fails with serve's own error; good settings exit 0.
func TestPrintConfigReportsTheErrorServeWouldStopWith(t *testing.T) {
	t.Setenv("RBOOK_APPROVAL_SECRET", "c2lnbmluZy1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZmdo")
	t.Setenv("RBOOK_CONFIG", "")
	for _, tc := range []struct {
		name      string
		args      []string
		printed   string
		wantError string // "" for none
	}{
		{"good settings", []string{"--addr", "127.0.0.1:0"}, "addr: 127.0.0.1:0 # flag\n", ""},
		{"a negative retention", []string{"--retention", "-1h"}, "retention: -1h0m0s # flag\n", "--retention -1h0m0s: must be 0 (keep every run) or a positive age"},
		{"a public URL without a scheme", []string{"--public-url", "rbook.example.com"}, "public-url: rbook.example.com # flag\n", `--public-url "rbook.example.com" is not a control plane URL`},
		{"every interface without auth", []string{"--addr", "0.0.0.0:7070"}, "addr: 0.0.0.0:7070 # flag\n", "--insecure"},
		{"an unknown database scheme", []string{"--db", "mysql://db/rbook"}, "db: mysql://db/rbook # flag\n", "--db: "},
		{"a missing auth file", []string{"--auth-file", filepath.Join(t.TempDir(), "absent.txt")}, "auth-file: ", "absent.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newServeCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(io.Discard)
			cmd.SetArgs(append([]string{"--print-config"}, tc.args...))
			err := cmd.Execute()
			if !strings.Contains(out.String(), tc.printed) {
				t.Errorf("the output lacks %q:\n%s", tc.printed, out.String())
			}
			switch {
			case tc.wantError == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError) || !strings.HasPrefix(err.Error(), "the settings above would not start: ")):
				t.Errorf("error %v, want one containing %q", err, tc.wantError)
			}
		})
	}
}
