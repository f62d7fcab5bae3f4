// Package steps holds one executor per step type (ARCHITECTURE.md): checks over MCP, the
// v1 simulated deploy and rollback, and the gates that decide confirm steps.
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// Simulated is the v1 deploy and rollback executor: it never calls
// create_template_deployment; it logs what it would do and fabricates the deployment status
// exactly as docs/spec/runbooks.md Step 5 (type=deploy, type=rollback) says.
type Simulated struct {
	// Now is the clock for the yyyymmdd in fabricated names; nil means time.Now (UTC).
	Now func() time.Time
}

// Execute implements engine.Executor for deploy and rollback steps. A step without
// kql_or_template is SKIPPED (docs/spec/runbooks.md, "Failure handling").
func (s Simulated) Execute(ctx context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
	if step.Input == nil {
		return engine.Outcome{Status: engine.StatusSkipped, Output: "kql_or_template is missing; nothing to " + string(step.Type)}
	}
	if err := ctx.Err(); err != nil {
		return engine.Outcome{Status: engine.StatusFail, Output: err.Error()}
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	params := "{}"
	if len(step.Params) > 0 {
		b, err := json.Marshal(step.Params)
		if err != nil {
			return engine.Outcome{Status: engine.StatusFail, Output: "params cannot be rendered as JSON: " + err.Error()}
		}
		params = string(b)
	}
	verb, prefix := "DEPLOY", "rbook-deploy-"
	if step.Type == runbook.TypeRollback {
		verb, prefix = "ROLLBACK", "rbook-rollback-"
	}
	name := prefix + step.Name + "-" + now().UTC().Format("20060102")
	nameJSON, _ := json.Marshal(name)
	out := fmt.Sprintf("WOULD %s (NOT EXECUTED in v1) — template: %s, params: %s\n"+
		`{"deploymentName": %s, "status": "Succeeded", "simulated": true}`, verb, *step.Input, params, nameJSON)
	o := engine.Outcome{Status: engine.StatusPass, Output: out}
	if step.Type == runbook.TypeDeploy {
		o.DeployName = name
	}
	return o
}
