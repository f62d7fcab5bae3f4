package planview

import (
	"path/filepath"
	"testing"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// stepNamed is the step called name in v.
func stepNamed(t *testing.T, v *View, name string) Step {
	t.Helper()
	for _, s := range v.Steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no step %s in the plan", name)
	return Step{}
}

func TestRollbackStepSaysItRunsOnlyWhenALaterStepFails(t *testing.T) {
	v, err := Build(loadShop(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "skipped in the run's order (recorded SKIPPED); runs only to undo deploy deploy-shop when confirm-shop fails after it (on_fail: rollback), or with rbook rollback"
	if got := stepNamed(t, v, "rollback-shop").When; got != want {
		t.Errorf("rollback-shop when:\n got %q\nwant %q", got, want)
	}
	if got := stepNamed(t, v, "deploy-shop").When; got != "" {
		t.Errorf("deploy-shop runs in its turn, got when %q", got)
	}
}

func TestPlaybookNodeShowsItsConditionAndTheInputsVerdict(t *testing.T) {
	plan, err := runbook.LoadPlaybook(filepath.Join("testdata", "branch.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		channel         string
		stable, nightly string
	}{
		{"stable", "true with these inputs: it runs", "false with these inputs: it is skipped"},
		{"nightly", "false with these inputs: it is skipped", "true with these inputs: it runs"},
	} {
		inputs, err := runbook.ValidatePlaybookInputs(plan, map[string]string{"channel": tc.channel})
		if err != nil {
			t.Fatal(err)
		}
		v, err := Build(plan, Options{Inputs: inputs})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"stable-notes":  `after build, if channel notEquals "nightly" (` + tc.stable + `)`,
			"nightly-notes": `after build, if channel equals "nightly" (` + tc.nightly + `)`,
			"publish":       `after build, if build.ready truthy true (decided while the run executes)`,
			"build":         "",
		}
		for name, w := range want {
			if got := stepNamed(t, v, name).When; got != w {
				t.Errorf("channel=%s, %s when:\n got %q\nwant %q", tc.channel, name, got, w)
			}
		}
	}
}

func TestPlaybookNodeShowsItsIterationCapAndRetry(t *testing.T) {
	plan, err := runbook.LoadPlaybook(filepath.Join("testdata", "branch.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Build(plan, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stepNamed(t, v, "build").Limits, "runs at most 2 times (iteration_cap); on failure: retry (error_handlers, line 52)"; got != want {
		t.Errorf("build limits:\n got %q\nwant %q", got, want)
	}
	if got := stepNamed(t, v, "publish").Limits; got != "" {
		t.Errorf("publish has the default cap and no handler, got limits %q", got)
	}
}
