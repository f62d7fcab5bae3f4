package flagconfig_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/internal/flagconfig"
)

// settings is a flag set with one flag of each kind a command has, plus the flags the
// options skip and a deprecated one.
type settings struct {
	fs      *pflag.FlagSet
	addr    string
	on      bool
	id      int64
	wait    time.Duration
	proxies []string
	names   []string
}

func newSettings() *settings {
	s := &settings{fs: pflag.NewFlagSet("serve", pflag.ContinueOnError)}
	f := s.fs
	f.StringVar(&s.addr, "addr", "127.0.0.1:7070", "host:port")
	f.BoolVar(&s.on, "insecure", false, "allow it")
	f.Int64Var(&s.id, "github-app-id", 0, "the App's id")
	f.DurationVar(&s.wait, "drain", 5*time.Second, "how long to drain")
	f.StringSliceVar(&s.proxies, "trusted-proxies", []string{"10.0.0.0/8"}, "proxies")
	f.StringArrayVar(&s.names, "name", nil, "names")
	f.String("config", "", "the file")
	f.Bool("forbid-self-approval", true, "old")
	_ = f.MarkDeprecated("forbid-self-approval", "four-eyes is the default")
	return s
}

// opts are the options of the tests, with env as the environment.
func opts(env map[string]string) flagconfig.Options {
	return flagconfig.Options{
		EnvPrefix:   "RBOOK_",
		Skip:        []string{"config"},
		ReservedEnv: []string{"RBOOK_NAME"},
		NotKeys:     map[string]string{"approval-secret": "set RBOOK_APPROVAL_SECRET"},
		LookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// A value on the command line beats the environment, which beats the file, which beats the
// default; each origin is reported, and values from the file or the environment count as
// set (a command's checks read fs.Changed).
func TestCommandLineBeatsEnvironmentBeatsFileBeatsDefault(t *testing.T) {
	s := newSettings()
	if err := s.fs.Parse([]string{"--addr", "0.0.0.0:1"}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "addr: 0.0.0.0:2\ninsecure: true\ngithub-app-id: 42\ndrain: 1m30s\n")
	env := map[string]string{"RBOOK_ADDR": "0.0.0.0:3", "RBOOK_GITHUB_APP_ID": "7", "RBOOK_DRAIN": ""}
	res, err := flagconfig.Apply(s.fs, file, opts(env))
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != "0.0.0.0:1" || !s.on || s.id != 7 || s.wait != 90*time.Second || !slices.Equal(s.proxies, []string{"10.0.0.0/8"}) {
		t.Errorf("addr %q insecure %v id %d drain %v proxies %q; want the flag's, the file's, the variable's, the file's (an empty variable is unset), the default", s.addr, s.on, s.id, s.wait, s.proxies)
	}
	want := map[string]string{"addr": "flag", "insecure": "file line 2", "github-app-id": "env RBOOK_GITHUB_APP_ID",
		"drain": "file line 4", "trusted-proxies": "default", "name": "default"}
	for name, w := range want {
		if got := res.Origins[name].String(); got != w {
			t.Errorf("origin of %s = %q, want %q", name, got, w)
		}
	}
	if len(res.Origins) != len(want) {
		t.Errorf("origins %v: want exactly the settings %v (no skipped or deprecated flag)", res.Origins, want)
	}
	for _, name := range []string{"insecure", "github-app-id", "drain"} {
		if !s.fs.Changed(name) {
			t.Errorf("--%s set from the file or the environment is not Changed", name)
		}
	}
}

// A list in the file replaces the default as a whole, items with commas and quotes kept;
// the environment gives a list as the command line does, comma-separated.
func TestListsReplaceTheDefaultExactly(t *testing.T) {
	s := newSettings()
	file := writeFile(t, "trusted-proxies: [\"a,b\", 'c \"d\"', e]\nname: [x, y]\n")
	if _, err := flagconfig.Apply(s.fs, file, opts(nil)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a,b", `c "d"`, "e"}; !slices.Equal(s.proxies, want) {
		t.Errorf("trusted-proxies = %q, want %q", s.proxies, want)
	}
	if want := []string{"x", "y"}; !slices.Equal(s.names, want) {
		t.Errorf("name = %q, want %q", s.names, want)
	}
	s = newSettings()
	file = writeFile(t, "trusted-proxies: []\n")
	if _, err := flagconfig.Apply(s.fs, file, opts(nil)); err != nil {
		t.Fatal(err)
	}
	if len(s.proxies) != 0 {
		t.Errorf("trusted-proxies: [] left %q, want an empty list", s.proxies)
	}
	s = newSettings()
	if _, err := flagconfig.Apply(s.fs, "", opts(map[string]string{"RBOOK_TRUSTED_PROXIES": "192.0.2.0/24,198.51.100.0/24"})); err != nil {
		t.Fatal(err)
	}
	if want := []string{"192.0.2.0/24", "198.51.100.0/24"}; !slices.Equal(s.proxies, want) {
		t.Errorf("RBOOK_TRUSTED_PROXIES gave %q, want %q", s.proxies, want)
	}
}

// Every mistake in the file is refused with FILE:LINE:COL, the key and what to do; all of
// them at once, and nothing is set.
func TestConfigFileMistakesNameLineColumnAndKey(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key with a suggestion", "adr: x\n", `:1:1: key "adr": unknown: the keys are the long flag names of the command (did you mean addr?)`},
		{"unknown key", "colour: x\n", `:1:1: key "colour": unknown: the keys are the long flag names of the command (see --help)`},
		{"a list where a string belongs", "addr:\n  - a\n  - b\n", `:2:3: key "addr": want a string, got a list`},
		{"a number where a string belongs", "addr: 7070\n", `:1:7: key "addr": want a string, got an integer 7070 (quote it: "7070")`},
		{"a string where a boolean belongs", "insecure: yes\n", `:1:11: key "insecure": want true or false, got a string "yes"`},
		{"a string where an integer belongs", "github-app-id: \"42\"\n", `:1:16: key "github-app-id": want an integer, got a string "42"`},
		{"no value", "addr:\n", `:1:6: key "addr": want a string, got no value`},
		{"a string where a list belongs", "trusted-proxies: 10.0.0.0/8\n", `:1:18: key "trusted-proxies": want a list of strings, got a string "10.0.0.0/8"`},
		{"a mapping in a list", "name: [{a: b}]\n", `:1:7: key "name": line 1:8: want a string, got a mapping`},
		{"a duration the flag refuses", "drain: 5 minutes\n", `:1:1: key "drain": not a valid duration for --drain: time: unknown unit " minutes" in duration "5 minutes"`},
		{"duplicate key", "addr: a\naddr: b\n", `:2:1: key "addr": given twice (first at line 1); keep one`},
		{"deprecated flag", "forbid-self-approval: false\n", `:1:1: key "forbid-self-approval": --forbid-self-approval is deprecated (four-eyes is the default): remove the key`},
		{"skipped flag", "config: other.yaml\n", `:1:1: key "config": --config is not a setting: give it on the command line`},
		{"a secret", "approval-secret: hunter2hunter2hunter2\n", `:1:1: key "approval-secret": not a configuration key: set RBOOK_APPROVAL_SECRET`},
		{"not a mapping", "- addr\n", `:1:1: want a mapping of flag names to values, such as addr: 0.0.0.0:7070; got a list`},
		{"two documents", "addr: a\n---\naddr: b\n", `:2: a configuration file is exactly one YAML document`},
		{"syntax error", "addr: [\n", `:2: did not find expected node content`},
		{"empty", "# nothing\n", `: empty configuration file: want a mapping of flag names to values`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSettings()
			file := writeFile(t, tc.text)
			_, err := flagconfig.Apply(s.fs, file, opts(nil))
			if err == nil || !strings.HasPrefix(err.Error(), file+tc.want) {
				t.Fatalf("error\n got %v\nwant %s%s", err, file, tc.want)
			}
		})
	}
	s := newSettings()
	file := writeFile(t, "insecure: true\nadr: x\naddr: [a]\n")
	_, err := flagconfig.Apply(s.fs, file, opts(nil))
	if err == nil || strings.Count(err.Error(), file+":") != 2 {
		t.Fatalf("two mistakes: error %v, want both named", err)
	}
	if s.on || s.fs.Changed("insecure") {
		t.Error("a file with mistakes set insecure")
	}
}

// A variable is refused when its flag is deprecated or its value does not parse; a
// reserved variable is never read as a flag.
func TestEnvironmentMistakesNameTheVariable(t *testing.T) {
	s := newSettings()
	_, err := flagconfig.Apply(s.fs, "", opts(map[string]string{"RBOOK_FORBID_SELF_APPROVAL": "false", "RBOOK_INSECURE": "maybe"}))
	for _, want := range []string{
		"RBOOK_FORBID_SELF_APPROVAL: --forbid-self-approval is deprecated (four-eyes is the default): unset the variable",
		`RBOOK_INSECURE: not a valid bool for --insecure: strconv.ParseBool: parsing "maybe": invalid syntax`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
	s = newSettings()
	res, err := flagconfig.Apply(s.fs, "", opts(map[string]string{"RBOOK_NAME": "x", "RBOOK_CONFIG": "y"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.names) != 0 || res.Origins["name"].Source != flagconfig.FromDefault {
		t.Errorf("the reserved RBOOK_NAME set --name to %q (%v)", s.names, res.Origins["name"])
	}
}

// The effective configuration is a configuration file itself: read back, it gives every
// value again. A secret flag shows only whether it is set, and the redactor sees each
// string.
func TestEffectiveConfigurationReadsBackAsAFile(t *testing.T) {
	s := newSettings()
	s.fs.String("hook-token", "", "a secret")
	if err := flagconfig.MarkSecret(s.fs, "hook-token"); err != nil {
		t.Fatal(err)
	}
	if err := s.fs.Parse([]string{"--addr", "0.0.0.0:9", "--hook-token", "s3cr3t-value", "--name", "a", "--name", "b,c"}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "insecure: true\ndrain: 2m\ntrusted-proxies: [\"x,y\", z]\n")
	res, err := flagconfig.Apply(s.fs, file, opts(map[string]string{"RBOOK_GITHUB_APP_ID": "12"}))
	if err != nil {
		t.Fatal(err)
	}
	redact := func(f *pflag.Flag, v string) string { return strings.ReplaceAll(v, "0.0.0.0", "[any]") }
	out, err := flagconfig.Effective(s.fs, res, opts(nil), redact, []string{"head"}, []string{"foot"})
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{"# head\n", "addr: '[any]:9' # flag\n", "insecure: true # file line 1\n", "github-app-id: 12 # env RBOOK_GITHUB_APP_ID\n",
		"drain: 2m0s # file line 2\n", "trusted-proxies: ['x,y', z] # file line 3\n", "name: [a, 'b,c'] # flag\n",
		"# hook-token: <set, from flag, 12 bytes>\n", "# foot\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "s3cr3t") || strings.Contains(text, "forbid-self-approval") || strings.Contains(text, "config:") {
		t.Errorf("effective configuration shows a secret, a deprecated or a skipped flag:\n%s", text)
	}
	// Read back (without the redaction and the secret).
	out, err = flagconfig.Effective(s.fs, res, opts(nil), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	again := newSettings()
	again.fs.String("hook-token", "", "a secret")
	if _, err := flagconfig.Apply(again.fs, writeFile(t, string(out)), opts(nil)); err != nil {
		t.Fatalf("the effective configuration does not read back: %v\n%s", err, out)
	}
	if again.addr != s.addr || again.on != s.on || again.id != s.id || again.wait != s.wait || !slices.Equal(again.proxies, s.proxies) || !slices.Equal(again.names, s.names) {
		t.Errorf("read back: %+v\nwant %+v", again, s)
	}
}

// The schema types each property from its flag's pflag type, describes it with the usage and
// its variable, gives the default, and allows nothing else.
func TestSchemaTypesEachSettingFromItsFlag(t *testing.T) {
	s := newSettings()
	b, err := flagconfig.Schema(s.fs, opts(nil), "id", "title", "desc")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AdditionalProperties bool                      `json:"additionalProperties"`
		Properties           map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AdditionalProperties {
		t.Error("additionalProperties is not false")
	}
	want := map[string]string{
		"addr":            `{"default":"127.0.0.1:7070","description":"host:port (environment: RBOOK_ADDR)","type":"string"}`,
		"insecure":        `{"default":false,"description":"allow it (environment: RBOOK_INSECURE)","type":"boolean"}`,
		"github-app-id":   `{"default":0,"description":"the App's id (environment: RBOOK_GITHUB_APP_ID)","type":"integer"}`,
		"drain":           `{"default":"5s","description":"how long to drain (environment: RBOOK_DRAIN)","pattern":"` + strings.ReplaceAll(flagconfig.DurationPattern, `\`, `\\`) + `","type":"string"}`,
		"trusted-proxies": `{"default":["10.0.0.0/8"],"description":"proxies (environment: RBOOK_TRUSTED_PROXIES)","items":{"type":"string"},"type":"array"}`,
		"name":            `{"default":[],"description":"names","items":{"type":"string"},"type":"array"}`,
	}
	if len(doc.Properties) != len(want) {
		t.Errorf("properties %v, want exactly %d", doc.Properties, len(want))
	}
	for name, w := range want {
		got, _ := json.Marshal(doc.Properties[name])
		if string(got) != w {
			t.Errorf("%s:\n got %s\nwant %s", name, got, w)
		}
	}
}
