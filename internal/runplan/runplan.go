// Package runplan holds the bounds of a run's plan (rbookv1.RunPlan) and the one check of
// them, shared by the executor that builds a plan and the control plane that stores it
// (run.proto, RunPlan; docs/console-plan.md).
package runplan

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Bounds of a RunPlan (run.proto, RunPlan).
const (
	// MaxSteps is the most steps or nodes a plan may list.
	MaxSteps = 1000
	// MaxBytes caps the encoded plan (proto.Size), 1 MiB.
	MaxBytes = 1 << 20
	// MaxInputBytes caps each of a step's input, params_json and argv (all entries together),
	// 16 KiB; longer values are cut and the step's input_truncated set.
	MaxInputBytes = 16 << 10
	// MaxNameBytes caps a step's name and type (a node id or step name is far shorter).
	MaxNameBytes = 256
)

// Mask is what a secret-looking value is replaced with, as the GitHub runner prints a masked
// value.
const Mask = "***"

// StepTypes are the PlanStep.type words: runbook step types and playbook node types.
var StepTypes = map[string]bool{
	"check": true, "deploy": true, "confirm": true, "rollback": true,
	"deterministic": true, "agentic": true, "approval": true,
}

// Check reports the first way p breaks the wire contract for a StartRun with digest
// contentHash and totalSteps steps: a content_hash other than contentHash, a step count other
// than totalSteps or over MaxSteps, an encoding over MaxBytes, a step whose index is not its
// position, whose name or type is empty, unknown or too long, whose input, params_json or
// argv is over MaxInputBytes, whose depends name a step out of range or itself, whose
// on_fail is not halt, rollback or continue, or whose timeout is negative. The error names
// the field ("plan.steps[3].input") and what to do. A nil plan is valid (none sent).
func Check(p *rbookv1.RunPlan, contentHash string, totalSteps int) error {
	if p == nil {
		return nil
	}
	if p.GetContentHash() != contentHash {
		return fmt.Errorf("plan.content_hash %q is not the request's content_hash; send the plan loaded for this digest", trunc(p.GetContentHash(), 80))
	}
	n := len(p.GetSteps())
	if n > MaxSteps {
		return fmt.Errorf("plan.steps holds %d steps, over the limit of %d; send no plan for so long a run", n, MaxSteps)
	}
	if n != totalSteps {
		return fmt.Errorf("plan.steps holds %d steps but total_steps is %d; the plan lists every step, with inputs cut (truncated) to fit", n, totalSteps)
	}
	if size := proto.Size(p); size > MaxBytes {
		return fmt.Errorf("plan is %d bytes, over the limit of %d; drop inputs (set truncated) to fit", size, MaxBytes)
	}
	for i, s := range p.GetSteps() {
		field := fmt.Sprintf("plan.steps[%d]", i)
		switch {
		case int(s.GetIndex()) != i:
			return fmt.Errorf("%s.index is %d; it must be the step's position, %d", field, s.GetIndex(), i)
		case s.GetName() == "" || len(s.GetName()) > MaxNameBytes:
			return fmt.Errorf("%s.name must be 1..%d bytes", field, MaxNameBytes)
		case !StepTypes[s.GetType()]:
			return fmt.Errorf("%s.type %q is not a step or node type (check, deploy, confirm, rollback, deterministic, agentic, approval)", field, trunc(s.GetType(), 40))
		case len(s.GetInput()) > MaxInputBytes:
			return fmt.Errorf("%s.input is %d bytes, over the limit of %d; cut it and set input_truncated", field, len(s.GetInput()), MaxInputBytes)
		case len(s.GetParamsJson()) > MaxInputBytes:
			return fmt.Errorf("%s.params_json is %d bytes, over the limit of %d; cut it and set input_truncated", field, len(s.GetParamsJson()), MaxInputBytes)
		case ArgvBytes(s.GetArgv()) > MaxInputBytes:
			return fmt.Errorf("%s.argv is %d bytes, over the limit of %d; cut it and set input_truncated", field, ArgvBytes(s.GetArgv()), MaxInputBytes)
		case s.GetTimeoutSeconds() < 0:
			return fmt.Errorf("%s.timeout_seconds is %d, must be >= 0", field, s.GetTimeoutSeconds())
		}
		switch s.GetOnFail() {
		case "", "halt", "rollback", "continue":
		default:
			return fmt.Errorf("%s.on_fail %q is not halt, rollback or continue", field, trunc(s.GetOnFail(), 40))
		}
		for j, d := range s.GetDepends() {
			if d < 0 || int(d) >= n || int(d) == i {
				return fmt.Errorf("%s.depends[%d] is %d, not the index of another step (0..%d)", field, j, d, n-1)
			}
		}
	}
	return nil
}

// ArgvBytes is the size argv counts against MaxInputBytes: its entries' bytes together.
func ArgvBytes(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	return n
}

// Cut returns s cut to at most limit bytes at a UTF-8 boundary, and whether it was cut.
func Cut(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	s = s[:limit]
	for len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1] // a rune the cut split
	}
	return s, true
}

func trunc(s string, n int) string {
	t, cut := Cut(s, n)
	if cut {
		return t + "…"
	}
	return t
}
