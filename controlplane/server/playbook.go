package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Limits of a RequestApprovalRequest.policy (approval_service.proto, PolicyContext; docs/decisions/auto-pass-policy.md).
const (
	// MaxPolicyJSONBytes caps each JSON text of a PolicyContext (node, bindings, playbook).
	MaxPolicyJSONBytes = 256 << 10
	// MaxPolicyCommands caps PolicyContext.commands and .tools (entries each).
	MaxPolicyCommands = 256
	// MaxPolicyCommandBytes caps one command line or tool name.
	MaxPolicyCommandBytes = 4 << 10
)

// Limits of StartRunRequest's playbook fields (run_service.proto).
const (
	// MaxStartBindingsBytes caps StartRunRequest.bindings (1 MiB).
	MaxStartBindingsBytes = 1 << 20
	// maxLinkBytes caps StartRunRequest.epic_id and session_id.
	maxLinkBytes = 128
)

// MaxListedPlaybookJSONBytes caps what ListRuns carries of a playbook run's bindings,
// iteration counts and active nodes (each): a page of MaxPageSize runs stays far below gRPC's
// 4 MiB. A larger value is left out of the listing (GetRun has it); node states are never
// listed (GetRun derives them from the transitions).
const MaxListedPlaybookJSONBytes = 1 << 10

// policyInputOf validates a PolicyContext and converts it for approval.Policy.Evaluate.
// Errors are E_INVALID_ARGUMENT naming the field.
func policyInputOf(pc *rbookv1.PolicyContext) (approval.PolicyInput, error) {
	var in approval.PolicyInput
	for _, f := range []struct {
		name, text string
		dst        *map[string]any
	}{
		{"policy.node_json", pc.GetNodeJson(), &in.Node}, {"policy.bindings_json", pc.GetBindingsJson(), &in.Bindings},
		{"policy.playbook_json", pc.GetPlaybookJson(), &in.Playbook},
	} {
		if f.text == "" {
			continue
		}
		if len(f.text) > MaxPolicyJSONBytes {
			return in, invalidArg("%s is %d bytes, over the limit of %d", f.name, len(f.text), MaxPolicyJSONBytes)
		}
		if t := bytes.TrimSpace([]byte(f.text)); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, f.dst) != nil {
			return in, invalidArg("%s must be a JSON object", f.name)
		}
	}
	for _, f := range []struct {
		name string
		list []string
		dst  *[]string
	}{{"policy.commands", pc.GetCommands(), &in.Commands}, {"policy.tools", pc.GetTools(), &in.Tools}} {
		if len(f.list) > MaxPolicyCommands {
			return in, invalidArg("%s has %d entries, over the limit of %d", f.name, len(f.list), MaxPolicyCommands)
		}
		for i, c := range f.list {
			if len(c) > MaxPolicyCommandBytes {
				return in, invalidArg("%s[%d] is %d bytes, over the limit of %d", f.name, i, len(c), MaxPolicyCommandBytes)
			}
			if !utf8.ValidString(c) {
				return in, invalidArg("%s[%d] is not valid UTF-8", f.name, i)
			}
		}
		*f.dst = f.list
	}
	return in, nil
}

// decidePolicy runs the server's auto-pass policy on a playbook approval node (docs/decisions/auto-pass-policy.md): the decision to store on the approval, and whether the gate opens approved (never
// in shadow mode, --policy-shadow, which records what the policy would have decided).
func (s *Server) decidePolicy(in approval.PolicyInput) store.AutoPassDecision {
	v := s.policy.Evaluate(in)
	d := store.AutoPassDecision{AutoPassed: v.AutoPassed, Rule: v.Rule, Action: v.Action, Reason: v.Reason}
	if s.opts.PolicyShadow {
		d.AutoPassed, d.Shadow = false, true
	}
	return d
}

// autoPassReason is an auto-passed approval's reason column: "<rule>: <reason>".
func autoPassReason(d store.AutoPassDecision) string {
	return d.Rule + ": " + d.Reason
}

func policyToProto(d *store.AutoPassDecision) *rbookv1.PolicyDecision {
	if d == nil {
		return nil
	}
	return &rbookv1.PolicyDecision{AutoPassed: d.AutoPassed, Rule: d.Rule, Action: d.Action, Reason: d.Reason, Shadow: d.Shadow}
}

// playbookToProto is Run.playbook of a playbook run: bindings, iteration counts, links,
// active nodes and (when the caller derived them) node states.
func playbookToProto(r store.Run) *rbookv1.PlaybookRunDetails {
	pb := &rbookv1.PlaybookRunDetails{EpicId: r.EpicID, SessionId: r.SessionID, ActiveNodes: r.ActiveNodes}
	if len(r.Bindings) > 0 && string(r.Bindings) != "{}" {
		pb.Bindings = string(r.Bindings)
	}
	if len(r.IterationCounts) > 0 && string(r.IterationCounts) != "{}" {
		var counts map[string]int32
		if json.Unmarshal(r.IterationCounts, &counts) == nil && len(counts) > 0 {
			pb.IterationCounts = counts
		}
	}
	for _, n := range r.Nodes {
		pb.Nodes = append(pb.Nodes, &rbookv1.NodeState{NodeId: n.NodeID, Type: n.Type, Status: n.Status,
			Iterations: int32(n.Iterations), StartedAt: ts(n.StartedAt), FinishedAt: ts(n.FinishedAt), Note: n.Note})
	}
	return pb
}

// forListing trims a playbook run for a ListRuns page (MaxListedPlaybookJSONBytes).
func forListing(r store.Run) store.Run {
	if r.Kind != store.KindPlaybook {
		return r
	}
	if len(r.Bindings) > MaxListedPlaybookJSONBytes {
		r.Bindings = nil
	}
	if len(r.IterationCounts) > MaxListedPlaybookJSONBytes {
		r.IterationCounts = nil
	}
	size := 0
	for _, n := range r.ActiveNodes {
		size += len(n) + 1
	}
	if size > MaxListedPlaybookJSONBytes {
		r.ActiveNodes = nil
	}
	r.Nodes = nil
	return r
}

// validStartBindings checks StartRunRequest.bindings, epic_id and session_id (run_service.proto).
func validStartBindings(req *rbookv1.StartRunRequest) error {
	b := req.GetBindings()
	switch {
	case len(b) > MaxStartBindingsBytes:
		return invalidArg("bindings is %d bytes, over the limit of %d (1 MiB)", len(b), MaxStartBindingsBytes)
	case b != "" && !json.Valid([]byte(b)):
		return invalidArg("bindings is not valid JSON")
	case b != "" && !bytes.HasPrefix(bytes.TrimSpace([]byte(b)), []byte("{")):
		return invalidArg("bindings must be a JSON object (the playbook's inputs)")
	case len(req.GetEpicId()) > maxLinkBytes:
		return invalidArg("epic_id is %d bytes, over the limit of %d", len(req.GetEpicId()), maxLinkBytes)
	case len(req.GetSessionId()) > maxLinkBytes:
		return invalidArg("session_id is %d bytes, over the limit of %d", len(req.GetSessionId()), maxLinkBytes)
	}
	if err := printableText("epic_id", req.GetEpicId()); err != nil {
		return err
	}
	return printableText("session_id", req.GetSessionId())
}
