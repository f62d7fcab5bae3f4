package attest

import (
	"encoding/json"
	"fmt"
)

// Predicate and statement types (docs/attestations.md, "Formats").
const (
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// RunPredicateType is the predicate of a finished run's attestation (RunPredicate).
	RunPredicateType = "https://rbook.dev/attestation/run/v1"
	// GateReviewPredicateType is the predicate of one gate decision's attestation
	// (GateReviewPredicate). The in-toto attestation repository has no human-review
	// predicate in spec/predicates/, so rbook defines its own.
	GateReviewPredicateType = "https://rbook.dev/attestation/gate-review/v1"
)

// Statement is an in-toto Statement v1 (github.com/in-toto/attestation, spec/v1/statement.md)
// with its predicate kept as raw JSON.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject is one artifact a Statement is about: a name and its digests (algorithm →
// lowercase hex, e.g. "sha256").
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// NewStatement builds a Statement's JSON from subjects and a predicate (marshalled with
// encoding/json). It fails only if the predicate does not marshal.
func NewStatement(subjects []Subject, predicateType string, predicate any) ([]byte, error) {
	p, err := json.Marshal(predicate)
	if err != nil {
		return nil, fmt.Errorf("encode the %s predicate: %w", predicateType, err)
	}
	return json.Marshal(Statement{Type: StatementType, Subject: subjects, PredicateType: predicateType, Predicate: p})
}

// ParseStatement decodes a Statement's JSON and checks it is a Statement v1 with at least
// one subject, each with a digest, and a predicate type.
func ParseStatement(statementJSON []byte) (Statement, error) {
	var s Statement
	if err := json.Unmarshal(statementJSON, &s); err != nil {
		return Statement{}, fmt.Errorf("payload is not an in-toto Statement (JSON): %w", err)
	}
	switch {
	case s.Type != StatementType:
		return Statement{}, fmt.Errorf("payload _type is %q, want %q", s.Type, StatementType)
	case s.PredicateType == "":
		return Statement{}, fmt.Errorf("statement has no predicateType")
	case len(s.Subject) == 0:
		return Statement{}, fmt.Errorf("statement has no subject")
	}
	for i, sub := range s.Subject {
		if len(sub.Digest) == 0 {
			return Statement{}, fmt.Errorf("statement subject %d (%q) has no digest", i+1, sub.Name)
		}
	}
	return s, nil
}

// RunPredicate is the predicate of RunPredicateType: what the control plane recorded and
// verified about one finished run (docs/attestations.md, "The run predicate"). Times are
// RFC 3339 UTC with nanoseconds; hashes are as recorded ("sha256:<hex>" for the chain).
type RunPredicate struct {
	RunID string `json:"run_id"`
	// Name is the runbook's or playbook's name; Kind is "runbook" or "playbook".
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
	// ContentHash is the plan's content hash (lowercase hex SHA-256), as the run recorded it.
	ContentHash string `json:"content_hash"`
	// ChainHead is the hash of the run's last transition (docs/evidence-chain.md).
	ChainHead   string `json:"chain_head"`
	FinalStatus string `json:"final_status"`
	// StartedBy is the identity that started the run, as the control plane authenticated it.
	StartedBy string `json:"started_by"`
	// GitHub is the job that started the run, from its verified OIDC claims; nil without them.
	GitHub      *GitHubRun     `json:"github,omitempty"`
	StartedAt   string         `json:"started_at"`
	CompletedAt string         `json:"completed_at,omitempty"`
	Gates       []GateDecision `json:"gates"`
}

// GitHubRun is the GitHub Actions job of a run, from the claims of its OIDC token as the
// control plane verified them.
type GitHubRun struct {
	Repository string `json:"repository"`
	RunID      string `json:"run_id"`
	RunAttempt string `json:"run_attempt"`
	SHA        string `json:"sha"`
	Ref        string `json:"ref"`
	// Workflow is the workflow_ref claim ("owner/repo/.github/workflows/x.yml@ref").
	Workflow    string `json:"workflow"`
	Actor       string `json:"actor,omitempty"`
	Environment string `json:"environment,omitempty"`
}

// GateDecision is one decided gate: who decided it, when, under which policy, with which votes.
type GateDecision struct {
	ApprovalID string `json:"approval_id"`
	StepIndex  int    `json:"step_index"`
	StepName   string `json:"step_name"`
	// Verdict is approved, rejected, expired or cancelled (the approval's final status).
	Verdict     string `json:"verdict"`
	RequestedAt string `json:"requested_at"`
	DecidedAt   string `json:"decided_at"`
	// DecidedBy is the identity that made the deciding decision ("" for expiry), Channel its channel.
	DecidedBy string `json:"decided_by,omitempty"`
	Channel   string `json:"channel,omitempty"`
	// People are the deciding people (person ids, an identity without one as itself).
	People []string `json:"people,omitempty"`
	// PlanDigest is the plan digest the decision was bound to.
	PlanDigest string            `json:"plan_digest,omitempty"`
	Policy     GatePolicy        `json:"policy"`
	Votes      []Vote            `json:"votes"`
	Reason     string            `json:"reason,omitempty"`
	Inputs     map[string]string `json:"inputs,omitempty"`
	// AutoPassed is true when the playbook auto-pass policy decided the gate without a person.
	AutoPassed bool `json:"auto_passed,omitempty"`
	// Iteration is which opening of the node's gate this was (1 for the first); RedoFrom the
	// node a rejection sent the run back to.
	Iteration int    `json:"iteration,omitempty"`
	RedoFrom  string `json:"redo_from,omitempty"`
}

// GatePolicy is the gate policy captured when the gate opened (docs/approvals.md, "Gate policy").
type GatePolicy struct {
	Rule string `json:"rule"`
	// RequiredApprovals is M: distinct people needed to approve.
	RequiredApprovals int `json:"required_approvals"`
	// FourEyes is true when the control plane held the gate to four eyes: its rule forbids the
	// run's starter to approve and every vote was by a verified identity. An unverified vote
	// ("unverified:<name>") is never taken for the starter, so a gate with one is recorded
	// false (docs/attestations.md, "The run predicate").
	FourEyes bool `json:"four_eyes"`
	// IdentitiesVerified is true when every vote on the gate was by an authenticated identity
	// (a gate without votes, e.g. auto-passed, counts as verified).
	IdentitiesVerified bool     `json:"identities_verified"`
	AllowedApprovers   []string `json:"allowed_approvers,omitempty"`
	// AutoPass is the playbook auto-pass policy's decision at the node, nil when none ran.
	AutoPass *AutoPass `json:"auto_pass,omitempty"`
}

// AutoPass is the playbook auto-pass policy's decision (docs/playbooks.md).
type AutoPass struct {
	AutoPassed bool   `json:"auto_passed"`
	Rule       string `json:"rule"`
	Action     string `json:"action"`
	Reason     string `json:"reason,omitempty"`
	Shadow     bool   `json:"shadow,omitempty"`
}

// Vote is one vote on a gate.
type Vote struct {
	// Person is the people-directory person ("" when the identity has none).
	Person string `json:"person,omitempty"`
	// Identity is "channel:login" as rbook records it (e.g. "github:octocat").
	Identity string `json:"identity"`
	Channel  string `json:"channel"`
	// Verdict is approved or rejected.
	Verdict string            `json:"verdict"`
	At      string            `json:"at"`
	Reason  string            `json:"reason,omitempty"`
	Inputs  map[string]string `json:"inputs,omitempty"`
	// Verified is false for a name an unauthenticated caller asserted.
	Verified bool `json:"verified"`
}

// GateReviewPredicate is the predicate of GateReviewPredicateType: one gate decision signed
// when it was made, with the run it belongs to (docs/attestations.md, "The gate-review predicate").
type GateReviewPredicate struct {
	RunID       string       `json:"run_id"`
	Name        string       `json:"name"`
	ContentHash string       `json:"content_hash"`
	StartedBy   string       `json:"started_by"`
	GitHub      *GitHubRun   `json:"github,omitempty"`
	Gate        GateDecision `json:"gate"`
}
