package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// planJSON runs rbook plan args -o json in dir (without $RBOOK_CONTROL_PLANE) and decodes the plan (docs/plan.md, "JSON").
func planJSON(t *testing.T, dir string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(rbookBin, append(append([]string{"plan"}, args...), "-o", "json")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RBOOK_CONTROL_PLANE=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rbook plan %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	return v
}

// stepsOf is the plan's steps as name → step, and their names in the order shown.
func stepsOf(v map[string]any) (map[string]map[string]any, []string) {
	by := map[string]map[string]any{}
	var names []string
	for _, s := range v["steps"].([]any) {
		m := s.(map[string]any)
		by[m["name"].(string)] = m
		names = append(names, m["name"].(string))
	}
	return by, names
}

// rbook plan on the demo runbook records nothing, says its confirm gate needs a person, and
// shows the digest the run then records; on the demo playbooks it lists the nodes in the
// order their depends allow and says which gate the built-in rules pass.
func TestPlanOfTheDemoRunbookAndPlaybooks(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	v := planJSON(t, dir, "demo")
	if _, err := os.Stat(filepath.Join(dir, ".rbook")); !os.IsNotExist(err) {
		t.Fatalf("rbook plan wrote .rbook/ (%v): it must record nothing", err)
	}
	steps, names := stepsOf(v)
	if strings.Join(names, ",") != "web-apps-enforce-https,resources-have-owner-tag,deploy-app-config,rollback-app-config,confirm-rollout,app-running-after-rollout" {
		t.Errorf("demo steps %v", names)
	}
	if g := steps["confirm-rollout"]["gate"].(map[string]any); g["needs_person"] != true || g["approvals"] != 1.0 || g["four_eyes"] != true {
		t.Errorf("confirm-rollout gate %v", g)
	}
	if w, _ := steps["rollback-app-config"]["when"].(string); !strings.Contains(w, "runs only to undo deploy deploy-app-config when confirm-rollout or app-running-after-rollout fails") {
		t.Errorf("rollback-app-config when %q", w)
	}
	if p, _ := json.Marshal(steps["deploy-app-config"]["params"]); string(p) != `{"apiVersion":"2023-12-01","appName":"app-checkout","replicas":3}` {
		t.Errorf("deploy params %s", p)
	}
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", "off")
	if code != 0 {
		t.Fatalf("rbook run demo: exit %d\n%s", code, out)
	}
	var st struct {
		RunbookHash string `json:"runbook_hash"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".rbook", "demo.state.json"))), &st); err != nil {
		t.Fatal(err)
	}
	if st.RunbookHash != v["plan_digest"] {
		t.Errorf("the run recorded digest %q, rbook plan showed %q", st.RunbookHash, v["plan_digest"])
	}

	fan := planJSON(t, dir, "runbooks/fanout.cantbook")
	fsteps, order := stepsOf(fan)
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for _, before := range [][2]string{{"prepare", "lint"}, {"lint", "package"}, {"docs", "package"}, {"package", "ship-check"}, {"ship-check", "verify"}} {
		if pos[before[0]] >= pos[before[1]] {
			t.Errorf("fanout order %v: %s not before %s", order, before[0], before[1])
		}
	}
	if g := fsteps["ship-check"]["gate"].(map[string]any); g["needs_person"] != false || g["auto_pass"].(map[string]any)["rule"] != "default-read-only" {
		t.Errorf("ship-check gate %v", g)
	}

	cmd := exec.Command(rbookBin, "plan", "runbooks/release.cantbook", "--input", "version=2026.4.90")
	cmd.Dir = dir
	text, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for _, want := range []string{"Plan of playbook release-cut", "Publish 2026.4.90 to npm?", "needs a person", "exec without a shell, argv [\"pnpm\",\"run\",\"build\"]",
		`{"agent":"demo-release","skill":"release-publisher","arguments":{}}`} { // the call the run sends
		if !strings.Contains(string(text), want) {
			t.Errorf("release plan lacks %q:\n%s", want, text)
		}
	}
}

// With --control-plane, rbook plan shows the gates as that control plane's own policies would
// decide them (PreviewGates): a playbook policy there that trusts the publisher tool auto-passes the release
// playbook's review gate, which the built-in rules leave to a person, and its gate policy's M
// is shown; the control plane records no run and opens no gate.
func TestPlanAsksTheControlPlanesPolicies(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	os.WriteFile(filepath.Join(dir, "gates.yaml"), []byte("rules:\n  - runbook: release-cut\n    gate: review\n    approvals: 2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "trust.policy.yaml"), []byte("rules:\n  - name: trust-publisher\n    when: \"tools.all(t, t == 'release-publisher')\"\n    action: auto-approve\n    reason: the publisher is trusted here\n"), 0o644)
	url := serveCP(t, dir, "--gate-policy", filepath.Join(dir, "gates.yaml"), "--playbook-policy", filepath.Join(dir, "trust.policy.yaml"))
	args := []string{"runbooks/release.cantbook", "--input", "version=2026.4.90"}
	local, _ := stepsOf(planJSON(t, dir, args...))
	if g := local["review"]["gate"].(map[string]any); g["needs_person"] != true || g["approvals"] != 1.0 {
		t.Fatalf("local review gate %v", g)
	}
	v := planJSON(t, dir, append(args, "--control-plane", url)...)
	remote, _ := stepsOf(v)
	g := remote["review"]["gate"].(map[string]any)
	if g["needs_person"] != false || g["approvals"] != 2.0 || g["auto_pass"].(map[string]any)["rule"] != "trust-publisher" {
		t.Errorf("the control plane's review gate %v", g)
	}
	if p := v["policy"].(map[string]any)["gate_policy"].(string); !strings.Contains(p, url) {
		t.Errorf("gate policy %q does not name the control plane", p)
	}
	out, code := run(t, dir, "", "runs", "--control-plane", url, "-o", "json")
	if code != 0 || strings.Contains(out, "release-cut") {
		t.Errorf("rbook runs after rbook plan (exit %d): %s", code, out)
	}
}
