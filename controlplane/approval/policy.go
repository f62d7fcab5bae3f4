package approval

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Gate policy limits (docs/approvals.md, "Gate policy"). They are checked when the policy file is loaded.
const (
	// MaxGateApprovals is the largest `approvals` a gate policy rule may ask for: M of M-of-N.
	MaxGateApprovals = 10
	// MaxPolicyRules caps the rules of one gate policy file.
	MaxPolicyRules = 1000
	// MaxPolicyApprovers caps the `approvers` entries of one rule.
	MaxPolicyApprovers = 100
	// MaxPolicyFileBytes caps a gate policy file (1 MiB, as every rbook YAML file; docs/decisions/yaml-safety.md).
	MaxPolicyFileBytes = 1 << 20
	// maxPolicyText caps a glob or approver entry (bytes).
	maxPolicyText = 256
)

// DefaultRuleName names the requirement of a gate no policy rule matched (or with no policy):
// one approval by anyone with the approver role, and not by the run's starter (four-eyes).
const DefaultRuleName = "the default rule (no gate-policy rule matched: 1 approval, any approver, not the run's starter)"

// GatePolicy is the control plane's gate policy (docs/decisions/identity.md): ordered rules,
// the first whose runbook and gate globs match a gate decides its requirement. Load it with
// LoadGatePolicy; a nil *GatePolicy is the default for every gate.
type GatePolicy struct {
	// File is the path the policy was loaded from, used in rule names.
	File  string
	Rules []GateRule
}

// GateRule is one rule of a gate policy file.
type GateRule struct {
	// Line is the 1-based line of the rule in File.
	Line int
	// Runbook is a glob (path.Match syntax) over the run's runbook name; "*" when omitted.
	Runbook string
	// Gate is a glob (path.Match syntax) over the gate's step name; "*" when omitted.
	Gate string
	// Approvals is how many distinct identities must approve: 1..MaxGateApprovals.
	Approvals int
	// Approvers lists who may decide: identities ("alice", "github:octocat", any identity a
	// person of the people directory has), people ("person:alice") and groups ("group:sre",
	// an auth-file groups= name or a people-directory group; docs/people.md). Empty: anyone
	// with the approver role.
	Approvers []string
	// StarterMayApprove lets the identity that started the run approve its gate (default false).
	StarterMayApprove bool
	// Notify lists who is told of the gate's events besides the approvers: "person:<id>",
	// "group:<name>" (a people-directory group) or "email:<address>"; email channels mail
	// them (docs/notifications.md, "Who a gate's policy notifies"). Empty: nobody more.
	Notify []string
}

// GateRequirement is what a gate needs, captured on the approval row when the gate opens so a
// policy edit does not change an open gate (docs/approvals.md, "Gate policy").
type GateRequirement struct {
	// Rule names the policy rule that applied ("gates.yaml rule 2 (line 7)") or DefaultRuleName.
	Rule string
	// ApprovalsRequired is M: distinct approvals that open the gate (>= 1).
	ApprovalsRequired int
	// AllowedApprovers is the rule's approvers; empty means anyone with the approver role.
	AllowedApprovers []string
	// StarterMayApprove: the run's starter may approve.
	StarterMayApprove bool
	// Notify is the rule's notify list (GateRule.Notify); nil for none.
	Notify []string
}

// Default is the requirement of a gate without a matching rule: 1 approval, any approver,
// the run's starter may not approve (four-eyes; docs/approvals.md, "Gate policy").
func Default() GateRequirement {
	return GateRequirement{Rule: DefaultRuleName, ApprovalsRequired: 1}
}

// For returns the requirement of the gate step gate of a run of runbook: the first rule whose
// globs both match, else Default(). A nil policy gives Default().
func (p *GatePolicy) For(runbook, gate string) GateRequirement {
	if p == nil {
		return Default()
	}
	for i, r := range p.Rules {
		if globMatch(r.Runbook, runbook) && globMatch(r.Gate, gate) {
			return GateRequirement{
				Rule:              fmt.Sprintf("%s rule %d (line %d)", p.File, i+1, r.Line),
				ApprovalsRequired: r.Approvals, AllowedApprovers: append([]string(nil), r.Approvers...),
				StarterMayApprove: r.StarterMayApprove, Notify: append([]string(nil), r.Notify...),
			}
		}
	}
	return Default()
}

// globMatch is path.Match with a malformed pattern never matching (LoadGatePolicy refuses those).
func globMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// Voter is who casts a vote on a gate: an authenticated identity (Verified), or a name an
// unauthenticated caller asserted ("unverified:<name>", Verified false).
type Voter struct {
	Identity string
	Verified bool
	// Groups are the identity's groups= from the auth file (or its sign-in rules), and the
	// people-directory groups of its person.
	Groups []string
	// GitHub is the identity's github= login from the auth file ("" when not linked).
	GitHub string
	// Person is the id of the identity's person in the people directory (docs/people.md);
	// "" when it has none, and then the identity is its own person.
	Person string
	// Identities are every identity of that person (Identity among them); nil without one.
	// Four-eyes and the policy's identity entries compare through them, so a person is the
	// same whichever channel they vote through.
	Identities []string
}

// Key is who v is for counting distinct approvals: "person:<id>" for a voter with a person,
// else its identity (an identity with no person counts as itself; docs/people.md).
func (v Voter) Key() string {
	if v.Person != "" {
		return "person:" + v.Person
	}
	return v.Identity
}

// is reports whether id is one of v's identities (its own, or its person's); GitHub logins
// compare without regard to case, as GitHub does.
func (v Voter) is(id string) bool {
	same := func(x string) bool {
		if x == id {
			return true
		}
		a, okA := strings.CutPrefix(x, "github:")
		b, okB := strings.CutPrefix(id, "github:")
		return okA && okB && strings.EqualFold(a, b)
	}
	if same(v.Identity) {
		return true
	}
	return slices.ContainsFunc(v.Identities, same)
}

// Starter is who started a run: started_by, and the GitHub actor of the job that started it
// when the control plane knows it (docs/control-plane.md, "OIDC" fills GitHubActor from the run's OIDC claims).
type Starter struct {
	StartedBy   string
	GitHubActor string
}

// IsRunStarter reports whether v is the person that started the run: started_by, or
// "github:<actor>" of the run's GitHub actor (how rbook spells a GitHub login as an identity), is
// one of v's identities — its own or its person's (docs/people.md: four-eyes compares
// people) — or v's github= link equals that actor (logins compared without regard to case,
// as GitHub does). An unverified voter is never taken for the starter (nothing about it is
// known). Four-eyes, also against the job's actor.
func IsRunStarter(s Starter, v Voter) bool {
	if !v.Verified {
		return false
	}
	if s.StartedBy != "" && v.is(s.StartedBy) {
		return true
	}
	if s.GitHubActor == "" {
		return false
	}
	return v.is("github:"+s.GitHubActor) || v.GitHub != "" && strings.EqualFold(s.GitHubActor, v.GitHub)
}

// Allows reports whether v may decide a gate with requirement r: an empty AllowedApprovers
// allows everyone; else an entry must be one of v's identities (its own or its person's),
// "github:"+v's linked login, "person:"+v's person, or "group:"+one of v's groups. An
// unverified voter is allowed only when the list is empty.
func (r GateRequirement) Allows(v Voter) bool {
	if len(r.AllowedApprovers) == 0 {
		return true
	}
	if !v.Verified {
		return false
	}
	for _, a := range r.AllowedApprovers {
		switch {
		case v.is(a):
			return true
		case v.Person != "" && a == "person:"+v.Person:
			return true
		case strings.HasPrefix(a, "github:") && v.GitHub != "" && strings.EqualFold(a[len("github:"):], v.GitHub):
			return true
		case strings.HasPrefix(a, "group:"):
			for _, g := range v.Groups {
				if g == a[len("group:"):] {
					return true
				}
			}
		}
	}
	return false
}

// Vote refusals returned by CheckVote.
var (
	// ErrNotAllowedApprover: the voter is not among the gate's allowed approvers (E_PERMISSION_DENIED).
	ErrNotAllowedApprover = errors.New("not an allowed approver of this gate")
	// ErrSelfApproval: the voter started the run and the gate's rule does not let the starter
	// approve (E_SELF_APPROVAL).
	ErrSelfApproval = errors.New("the identity that started the run may not approve its gates")
	// ErrUnverifiedCount: an unverified voter approved a gate that needs more than one
	// approval; asserted names are not distinct people, so they cannot count toward M
	// (E_UNAUTHENTICATED; docs/approvals.md, "Gate policy").
	ErrUnverifiedCount = errors.New("only authenticated identities count toward a gate's distinct approvals")
)

// CheckVote decides whether v may cast a vote (approve when approve is true, else reject) on
// a gate with requirement r of a run started by s. Errors: ErrNotAllowedApprover (wrapped with
// the rule's name), ErrSelfApproval (approvals only: the starter may always reject),
// ErrUnverifiedCount (an unverified approval of a gate needing more than one: whoever holds
// the token could otherwise assert M names).
func CheckVote(r GateRequirement, s Starter, v Voter, approve bool) error {
	if !r.Allows(v) {
		return fmt.Errorf("%w: %s allows only %s", ErrNotAllowedApprover, r.Rule, strings.Join(r.AllowedApprovers, ", "))
	}
	if approve && !v.Verified && r.ApprovalsRequired > 1 {
		return fmt.Errorf("%w (%s needs %d)", ErrUnverifiedCount, r.Rule, r.ApprovalsRequired)
	}
	if approve && !r.StarterMayApprove && IsRunStarter(s, v) {
		return fmt.Errorf("%w (%s)", ErrSelfApproval, r.Rule)
	}
	return nil
}

// LoadGatePolicy reads a gate policy file (docs/approvals.md, "Gate policy"):
//
//	rules:
//	  - runbook: prod*          # glob over the run's runbook name (default "*")
//	    gate: confirm-*         # glob over the gate's step name (default "*")
//	    approvals: 2            # distinct approvers, 1..MaxGateApprovals (default 1)
//	    approvers: [alice, "group:sre", "github:octocat", "person:bob"]   # default: anyone with the approver role
//	    starter_may_approve: false                          # default false
//	    notify: ["person:carol", "group:oncall", "email:ops@example.com"]   # also told of the gate's events
//
// It is read as strictly as every rbook YAML file (docs/decisions/yaml-safety.md): one document of at most
// MaxPolicyFileBytes, no unknown or duplicate keys, no aliases, merge keys or non-core tags,
// values of the right type. Errors name file:line and the field.
func LoadGatePolicy(file string) (*GatePolicy, error) {
	data, err := readRulesFile(file, "gate policy", MaxPolicyFileBytes)
	if err != nil {
		return nil, err
	}
	return ParseGatePolicy(data, file)
}

// ParseGatePolicy parses gate policy text; file names it in errors. See LoadGatePolicy.
func ParseGatePolicy(data []byte, file string) (*GatePolicy, error) {
	rules, errAt, err := parseRulesList(data, file, "gate policy", MaxPolicyFileBytes, MaxPolicyRules)
	if err != nil {
		return nil, err
	}
	p := &GatePolicy{File: file}
	for i, rn := range rules.Content {
		r, err := parseRule(rn, i, errAt)
		if err != nil {
			return nil, err
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func parseRule(n *yaml.Node, i int, errAt func(*yaml.Node, string, ...any) error) (GateRule, error) {
	r := GateRule{Line: n.Line, Runbook: "*", Gate: "*", Approvals: 1}
	if n.Kind != yaml.MappingNode {
		return r, errAt(n, "rules[%d]: want a mapping (runbook, gate, approvals, approvers, notify, starter_may_approve)", i)
	}
	var err error
	for j := 0; j < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		field := fmt.Sprintf("rules[%d].%s", i, k.Value)
		switch k.Value {
		case "runbook", "gate":
			s, err := scalarString(v, field, errAt)
			if err != nil {
				return r, err
			}
			if _, err := path.Match(s, ""); err != nil || s == "" {
				return r, errAt(v, "%s: %q is not a glob (path.Match syntax: * ? [a-z])", field, s)
			}
			if k.Value == "runbook" {
				r.Runbook = s
			} else {
				r.Gate = s
			}
		case "approvals":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
				return r, errAt(v, "%s: want a whole number 1..%d", field, MaxGateApprovals)
			}
			m, err := strconv.Atoi(v.Value)
			if err != nil || m < 1 || m > MaxGateApprovals {
				return r, errAt(v, "%s: %s is not in 1..%d", field, v.Value, MaxGateApprovals)
			}
			r.Approvals = m
		case "approvers":
			if v.Kind != yaml.SequenceNode {
				return r, errAt(v, "%s: want a list of identities, \"github:<login>\", \"person:<id>\" or \"group:<name>\"", field)
			}
			if len(v.Content) > MaxPolicyApprovers {
				return r, errAt(v, "%s: %s, over the limit of %d", field, yamlerr.Plural(len(v.Content), "entry", "entries"), MaxPolicyApprovers)
			}
			seen := map[string]bool{}
			for _, e := range v.Content {
				s, err := scalarString(e, field, errAt)
				if err != nil {
					return r, err
				}
				if !approverRE.MatchString(s) {
					return r, errAt(e, "%s: %q is not an identity, \"github:<login>\", \"person:<id>\" or \"group:<name>\" (no spaces or commas)", field, s)
				}
				if id, ok := strings.CutPrefix(s, "person:"); ok && !groupNameRE.MatchString(id) {
					return r, errAt(e, "%s: %q: no person of a people file could have that id (1-64 of A-Z a-z 0-9 . _ -), so it would match nobody", field, s)
				}
				if g, ok := strings.CutPrefix(s, "group:"); ok && !groupNameRE.MatchString(g) {
					return r, errAt(e, "%s: %q: no auth-file group could have that name (1-64 of A-Z a-z 0-9 . _ -), so it would match nobody", field, s)
				}
				if l, ok := strings.CutPrefix(s, "github:"); ok && !githubLoginRE.MatchString(l) {
					return r, errAt(e, "%s: %q is not a GitHub login (1-39 letters, digits or -, not starting with -), so it would match nobody", field, s)
				}
				if seen[s] {
					return r, errAt(e, "%s: %q is listed twice", field, s)
				}
				seen[s] = true
				r.Approvers = append(r.Approvers, s)
			}
		case "notify":
			if r.Notify, err = ParseNotify(v, field, errAt); err != nil {
				return r, err
			}
		case "starter_may_approve":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				return r, errAt(v, "%s: want true or false", field)
			}
			r.StarterMayApprove = v.Value == "true" || v.Value == "True" || v.Value == "TRUE"
		default:
			return r, errAt(k, "rules[%d]: unknown field %q (fields: runbook, gate, approvals, approvers, notify, starter_may_approve)", i, k.Value)
		}
	}
	if r.Approvals > 1 && len(r.Approvers) > 0 && !hasGroup(r.Approvers) && len(r.Approvers) < r.Approvals {
		return r, errAt(n, "rules[%d]: approvals is %d but only %s listed, so no gate could ever open", i, r.Approvals, yamlerr.Plural(len(r.Approvers), "approver is", "approvers are"))
	}
	return r, nil
}

func hasGroup(list []string) bool {
	for _, a := range list {
		if strings.HasPrefix(a, "group:") {
			return true
		}
	}
	return false
}

// approverRE is an approvers entry: an identity ("alice", "github:<login>", "slack:…",
// "oidc:…", "email:…"), "person:<id>" or "group:<name>", without
// whitespace or commas (approvers are joined with ", " on a decided gate).
var approverRE = lazyregexp.New(`^[^\s,:]{1,256}$|^(github|group|person|slack|oidc|email):[^\s,]{1,200}$`)

// groupNameRE and githubLoginRE are the auth file's groups= and github= syntax (rbook serve
// --auth-file, server.LoadAuthFile): a policy entry outside it could never match anyone.
var (
	groupNameRE   = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)
	githubLoginRE = lazyregexp.New(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
)

func scalarString(v *yaml.Node, field string, errAt func(*yaml.Node, string, ...any) error) (string, error) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return "", errAt(v, "%s: want a string", field)
	}
	if len(v.Value) > maxPolicyText {
		return "", errAt(v, "%s: longer than %d bytes", field, maxPolicyText)
	}
	return v.Value, nil
}

// checkNodes refuses what a gate policy never needs and could hide mistakes: aliases and
// anchors, merge keys, tags outside the core schema, and duplicate keys (docs/decisions/yaml-safety.md).
func checkNodes(n *yaml.Node, errAt func(*yaml.Node, string, ...any) error) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return errAt(n, "anchors and aliases are not allowed in a gate policy")
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
	default:
		if n.Kind != yaml.DocumentNode {
			return errAt(n, "tag %s is not allowed (only the YAML core schema's)", n.Tag)
		}
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]int{}
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return errAt(k, "a key must be a plain string")
			}
			if k.Value == "<<" && k.Tag == "!!merge" {
				return errAt(k, "merge keys (<<) are not allowed in a gate policy")
			}
			if prev, dup := seen[k.Value]; dup {
				return errAt(k, "duplicate key %q (first on line %d)", k.Value, prev)
			}
			seen[k.Value] = k.Line
		}
	}
	for _, c := range n.Content {
		if err := checkNodes(c, errAt); err != nil {
			return err
		}
	}
	return nil
}
