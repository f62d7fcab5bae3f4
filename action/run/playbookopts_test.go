package run

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
)

func TestConcurrencyOutsideOneToSixtyFourIsRefused(t *testing.T) {
	cases := []struct {
		concurrency int
		want        string
	}{
		{0, "--concurrency 0: use 1..64"},
		{65, "--concurrency 65: use 1..64"},
		{1, ""},
		{64, ""},
	}
	for _, tc := range cases {
		err := PlaybookFlags{Concurrency: tc.concurrency}.CheckConcurrency()
		if got := errText(err); got != tc.want {
			t.Errorf("CheckConcurrency(%d) = %q, want %q", tc.concurrency, got, tc.want)
		}
	}
}

func TestPolicyFlagsAreOnlyForTheEmbeddedControlPlaneOrNone(t *testing.T) {
	refused := "--policy and --policy-shadow are for the embedded control plane and --control-plane off; the control plane http://cp:7070 decides auto-passes with its own policy (rbook serve --playbook-policy FILE --policy-shadow)"
	cases := []struct {
		name, controlPlane string
		flags              PlaybookFlags
		wantExternal       bool
		wantErr            string
	}{
		{name: "embedded with --policy", flags: PlaybookFlags{Policy: "p.yaml"}},
		{name: "off with --policy-shadow", controlPlane: "off", flags: PlaybookFlags{PolicyShadow: true}},
		{name: "separate", controlPlane: "http://cp:7070", wantExternal: true},
		{name: "separate with --policy", controlPlane: "http://cp:7070", flags: PlaybookFlags{Policy: "p.yaml"}, wantExternal: true, wantErr: refused},
		{name: "separate with --policy-shadow", controlPlane: "http://cp:7070", flags: PlaybookFlags{PolicyShadow: true}, wantExternal: true, wantErr: refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			external, err := tc.flags.External(Config{ControlPlane: tc.controlPlane})
			if external != tc.wantExternal || errText(err) != tc.wantErr {
				t.Fatalf("External() = %v, %q; want %v, %q", external, errText(err), tc.wantExternal, tc.wantErr)
			}
		})
	}
}

func TestPlaybookInputsAreValidatedBeforeAnythingIsRecorded(t *testing.T) {
	plan, err := LoadPlaybook(filepath.Join("testdata", "playbooks", "build.cantbook"), "nothing was run or recorded.")
	if err != nil {
		t.Fatal(err)
	}
	f := PlaybookFlags{StateFile: filepath.Join(t.TempDir(), "build.state.json")}
	plan.StateFilePath = f.StatePath(plan)
	if _, err := f.PlaybookInputs(plan); err == nil || !strings.HasSuffix(err.Error(), "\nNothing was run or recorded.") || !strings.Contains(err.Error(), "version") {
		t.Fatalf("PlaybookInputs without the required input: %v", err)
	}
	f.Inputs = []string{"version=2026.4.90"}
	inputs, err := f.PlaybookInputs(plan)
	if err != nil {
		t.Fatal(err)
	}
	if got := inputs["version"]; got != "2026.4.90" {
		t.Fatalf("inputs[version] = %#v, want \"2026.4.90\"", got)
	}
	pb := f.Playbook("build.cantbook", inputs, "ops.mcp.json")
	if pb.File != "build.cantbook" || pb.Inputs["version"] != "2026.4.90" || pb.MCPConfig != "ops.mcp.json" {
		t.Fatalf("Playbook() = %+v", pb)
	}
}

func TestAPlaybookThatDoesNotLoadListsItsIssues(t *testing.T) {
	file := filepath.Join("testdata", "playbooks", "broken.cantbook")
	_, err := LoadPlaybook(file, "nothing is shown.")
	if err == nil {
		t.Fatal("LoadPlaybook of a broken playbook: no error")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, file+":") || !strings.HasSuffix(msg, file+" has 1 issue(s); nothing is shown.") {
		t.Fatalf("LoadPlaybook error = %q", msg)
	}
}

func TestDeterministicNodesFindThePlaybooksBinFolderFirst(t *testing.T) {
	file := filepath.Join("testdata", "playbooks", "build.cantbook")
	plan, err := LoadPlaybook(file, "")
	if err != nil {
		t.Fatal(err)
	}
	var errw bytes.Buffer
	execs, closeExecs, ds := PlaybookExecutors(plan, file, "", &errw)
	if len(ds) > 0 {
		t.Fatalf("diagnostics: %v", ds)
	}
	defer closeExecs()
	if len(execs) != 1 {
		t.Fatalf("%d executors, want the deterministic one", len(execs))
	}
	bin, _ := filepath.Abs(filepath.Join("testdata", "playbooks", "bin"))
	if want := "Deterministic nodes find commands in " + bin + " first"; !strings.HasPrefix(errw.String(), want) {
		t.Fatalf("stderr %q, want it to start %q", errw.String(), want)
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPlaybookResumeHintNamesItsMCPConfig: the resume command a playbook run prints when it
// stops repeats the --mcp-config it was given, so following the hint gives its agentic nodes
// the same MCP servers.
func TestPlaybookResumeHintNamesItsMCPConfig(t *testing.T) {
	file, err := filepath.Abs(filepath.Join("testdata", "playbooks", "build.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := LoadPlaybook(file, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	f := PlaybookFlags{Inputs: []string{"version=1.2.3"}, Concurrency: 1}
	plan.StateFilePath = f.StatePath(plan)
	inputs, err := f.PlaybookInputs(plan)
	if err != nil {
		t.Fatal(err)
	}
	execs, closeExecs, ds := PlaybookExecutors(plan, file, "", io.Discard)
	if len(ds) > 0 {
		t.Fatalf("executors: %v", ds)
	}
	term := &fakeTerminal{}
	o := Options{Config: Config{Timeout: 5 * time.Second, Lease: cpclient.DefaultLease, Auth: Auth{Mode: AuthNone}},
		Plan: plan, Name: plan.Name, Again: "rbook playbook run " + file, Playbook: f.Playbook(file, inputs, "ops.mcp.json"),
		Executors: execs, Close: closeExecs, Terminal: term, Err: &term.lines}
	if err := o.Resolve("off"); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run = %v\n%s", err, term.lines.String())
	}
	if want := "--mcp-config ops.mcp.json"; !strings.Contains(term.resumeHint, want) {
		t.Fatalf("resume hint %q; want it to name %q", term.resumeHint, want)
	}
}
