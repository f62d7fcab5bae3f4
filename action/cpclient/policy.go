package cpclient

import (
	"encoding/json"
	"fmt"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Limits of the policy context the control plane accepts (proto PolicyContext; docs/decisions/auto-pass-policy.md). PolicyContextProto refuses more before anything is sent, naming the field.
const (
	// MaxPolicyJSONBytes caps each JSON text of a PolicyContext (node, bindings, playbook).
	MaxPolicyJSONBytes = 256 << 10
	// MaxPolicyCommands caps the commands and the tools of a PolicyContext, each.
	MaxPolicyCommands = 256
	// MaxPolicyCommandBytes caps one command line of a PolicyContext.
	MaxPolicyCommandBytes = 4 << 10
)

// SourcePolicy is Approval.decided_by_source, and engine.Decision.Source, of a gate the
// auto-pass policy approved without a human (docs/spec/playbooks.md, "Approval nodes").
const SourcePolicy = "policy"

// PolicyContextProto turns the engine's policy context of a playbook approval node into the
// wire form of RequestApprovalRequest.policy (docs/decisions/auto-pass-policy.md): node, bindings and playbook as
// compact JSON objects (nil maps are sent as {}), commands and tools as they are. It returns
// nil for a nil context (a runbook's confirm step). Errors: a JSON text over
// MaxPolicyJSONBytes, more than MaxPolicyCommands commands or tools, a command over
// MaxPolicyCommandBytes, or a value encoding/json cannot encode; each names the field.
func PolicyContextProto(pc *engine.PolicyContext) (*rbookv1.PolicyContext, error) {
	if pc == nil {
		return nil, nil
	}
	obj := func(field string, m map[string]any) (string, error) {
		if m == nil {
			return "{}", nil
		}
		b, err := json.Marshal(m)
		if err != nil {
			return "", fmt.Errorf("policy context %s: %w", field, err)
		}
		if len(b) > MaxPolicyJSONBytes {
			return "", fmt.Errorf("policy context %s is %d bytes of JSON, over the control plane's limit of %d", field, len(b), MaxPolicyJSONBytes)
		}
		return string(b), nil
	}
	var out rbookv1.PolicyContext
	var err error
	if out.NodeJson, err = obj("node", pc.Node); err != nil {
		return nil, err
	}
	if out.BindingsJson, err = obj("bindings", pc.Bindings); err != nil {
		return nil, err
	}
	if out.PlaybookJson, err = obj("playbook", pc.Playbook); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		field string
		list  []string
	}{{"commands", pc.Commands}, {"tools", pc.Tools}} {
		if len(l.list) > MaxPolicyCommands {
			return nil, fmt.Errorf("policy context %s: %d entries, over the control plane's limit of %d", l.field, len(l.list), MaxPolicyCommands)
		}
		for i, c := range l.list {
			if len(c) > MaxPolicyCommandBytes {
				return nil, fmt.Errorf("policy context %s[%d] is %d bytes, over the control plane's limit of %d", l.field, i, len(c), MaxPolicyCommandBytes)
			}
		}
	}
	out.Commands, out.Tools = pc.Commands, pc.Tools
	return &out, nil
}

// PolicyDecisionOf is the engine's form of Approval.policy (docs/decisions/auto-pass-policy.md): nil when the
// approval carries none (a runbook's confirm step, or no policy ran).
func PolicyDecisionOf(p *rbookv1.PolicyDecision) *engine.PolicyDecision {
	if p == nil {
		return nil
	}
	return &engine.PolicyDecision{AutoPassed: p.GetAutoPassed(), Rule: p.GetRule(), Action: p.GetAction(), Reason: p.GetReason(), Shadow: p.GetShadow()}
}
