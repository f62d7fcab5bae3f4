package approval

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// The auto-pass policy (docs/spec/playbooks.md, "Policy evaluator"; docs/decisions/auto-pass-policy.md):
// ordered rules, each a CEL condition over the playbook approval node and what it guards, with
// the action auto-approve or require-human and a reason. See (*Policy).Evaluate for the order.

// Policy actions (PolicyRule.Action, PolicyVerdict.Action; the proto's PolicyDecision.action).
const (
	// ActionAutoApprove lets a gate pass without a human.
	ActionAutoApprove = "auto-approve"
	// ActionRequireHuman makes a human decide the gate.
	ActionRequireHuman = "require-human"
)

// Auto-pass policy limits (docs/decisions/auto-pass-policy.md), checked when rules are loaded and compiled.
const (
	// MaxAutoPassRules caps the custom rules of one --playbook-policy file.
	MaxAutoPassRules = 200
	// MaxAutoPassFileBytes caps a --playbook-policy file (1 MiB, as every rbook YAML file; docs/decisions/yaml-safety.md).
	MaxAutoPassFileBytes = 1 << 20
	// MaxRuleExprBytes caps a rule's `when` expression (bytes); the CEL parser is also limited
	// to this many code points.
	MaxRuleExprBytes = 4 << 10
	// MaxRuleTextBytes caps a rule's name (and, times four, its reason).
	MaxRuleTextBytes = 256
	// MaxEvalCost is the CEL runtime cost limit of one rule evaluation (cel.CostLimit: roughly
	// one unit per operation and per byte a string function scans). A rule that would cost more
	// stops with an error and counts as require-human (fail closed): no policy can stall a gate.
	MaxEvalCost = 1_000_000
)

// PolicyRule is one auto-pass rule: when When (a CEL expression yielding bool) holds for a
// gate, Action ("auto-approve" or "require-human") applies for Reason. File and Line say
// where a custom rule was written ("" and 0 for DefaultPolicyRules), for load errors.
type PolicyRule struct {
	Name   string
	When   string
	Action string
	Reason string
	File   string
	Line   int
}

// NodePolicyKey is the key of PolicyInput.Node that holds the approval node's own policy, as a
// playbook writes it on the node (policy: require-human; the executor sends it in the policy
// context's node JSON). NodePolicyRule is the verdict's Rule when it decided the gate; no
// custom rule may take that name.
const (
	NodePolicyKey  = "policy"
	NodePolicyRule = "node-policy"
)

// PolicyInput is what a rule's expression sees (the proto's PolicyContext): the variables
// `node`, `bindings`, `playbook` (JSON objects as maps), `commands` (the resolved command
// lines of the deterministic nodes the gate guards) and `tools` ("agent/skill" of the agentic
// nodes it guards). Nil maps and lists are empty.
type PolicyInput struct {
	Node, Bindings, Playbook map[string]any
	Commands, Tools          []string
}

// PolicyVerdict is what the policy decided at a gate: AutoPassed when a human is not needed;
// Rule is the deciding rule's name ("" when no rule matched), Action its action as applied
// ("require-human" when no rule matched, a rule failed or a require-human rule overrode an
// auto-approve) and Reason says why.
type PolicyVerdict struct {
	AutoPassed bool
	Rule       string
	Action     string
	Reason     string
}

// Policy is a compiled rule list. Build it with CompilePolicy; it is safe for concurrent use.
type Policy struct {
	rules []compiledRule
}

type compiledRule struct {
	PolicyRule
	prg cel.Program
}

// Names of the default rules (DefaultPolicyRules), in their order.
const (
	RulePublish        = "default-publish"
	RuleGitPush        = "default-git-push"
	RuleGitTag         = "default-git-tag"
	RuleGitHubRelease  = "default-gh-release-create"
	RuleGitHubWorkflow = "default-gh-workflow-run"
	RuleDestructive    = "default-destructive"
	RuleOutboundHTTP   = "default-outbound-http"
	RuleRemoteAccess   = "default-remote-access"
	RuleReadOnly       = "default-read-only"
)

// readOnlyCommandRE is a command line the default rules auto-approve: a known read-only or QA
// command with plain arguments: no shell metacharacters (even though commands run without a
// shell), no line breaks or other control characters, no "{" (an arg whose template could not
// be rendered when the gate opened is sent as written, "{{ node.key }}", and its value is
// unknown), no leading "K=V" environment assignment (the engine puts a node's env in front of
// its command line: PATH, GOFLAGS or GIT_CONFIG_* change what runs) and no path to the program
// (docs/decisions/auto-pass-policy.md: fail closed for anything not clearly read-only).
const readOnlyCommandRE = `^(go[ \t]+(test|vet|build)|(pnpm|npm|yarn)[ \t]+(run[ \t]+)?(test|lint|build|typecheck)|git[ \t]+(status|diff|log|show)|ls|cat|echo)([ \t]+[^;&|<>$` + "`" + `{}\x00-\x08\x0a-\x1f\x7f]*)?$`

// writingOptionRE finds options that make the read-only commands execute or write: go test
// -exec/-toolexec, go vet -vettool, go build -o, and git's --output… / --ext… (any spelling
// that starts so, in case a git version accepts abbreviated long options).
const writingOptionRE = `\s-(-?)(exec|toolexec|vettool|o)(\s|=|$)|\s--(out|ext)`

// anyCommand is the CEL text of "some command matches re" (re is a Go string literal body).
func anyCommand(re string) string {
	return "commands.exists(c, c.matches(" + celString(re) + "))"
}

// celString quotes s as a CEL raw string literal; the default patterns hold no triple quotes.
func celString(s string) string { return `r'''` + s + `'''` }

// DefaultPolicyRules are the conservative defaults of the specification's DEFAULT_POLICY_RULES
// (docs/spec/playbooks.md, "Policy evaluator": "a safe conservative default set"; docs/decisions/auto-pass-policy.md): a
// human decides a gate that guards a publish (npm|pnpm|yarn … publish), git … push, git … tag,
// gh … release create, gh … workflow run, a destructive command (rm -r…, drop table, truncate,
// delete from), outbound HTTP (any curl or wget) or remote access (any ssh or sftp; scp|rsync
// with user@ or host:), all in any case and with options between the words; it auto-approves
// only a gate that guards at least one command, no agentic node, and only known read-only or
// QA commands (go test|vet|build, pnpm|npm|yarn [run] test|lint|build|typecheck, git
// status|diff|log|show, ls, cat, echo, with plain, fully rendered arguments and no env; see
// readOnlyCommandRE);
// everything else needs a human (no rule matches). A fresh copy each call.
func DefaultPolicyRules() []PolicyRule {
	human := func(name, re, reason string) PolicyRule {
		return PolicyRule{Name: name, When: anyCommand(re), Action: ActionRequireHuman, Reason: reason}
	}
	return []PolicyRule{
		human(RulePublish, `(?i)\b(npm|pnpm|yarn)\b[^;&|]*\spublish\b`, "publishing a package needs a human"),
		human(RuleGitPush, `(?i)\bgit\b[^;&|]*\spush\b`, "git push needs a human"),
		human(RuleGitTag, `(?i)\bgit\b[^;&|]*\stag\b`, "git tag needs a human"),
		human(RuleGitHubRelease, `(?i)\bgh\b[^;&|]*\srelease\s+create\b`, "gh release create needs a human"),
		human(RuleGitHubWorkflow, `(?i)\bgh\b[^;&|]*\sworkflow\s+run\b`, "gh workflow run needs a human"),
		human(RuleDestructive, `(?i)(\brm\b[^;&|]*\s-(-recursive\b|[a-z]*r)|\bdrop\s+table\b|\btruncate\b|\bdelete\s+from\b)`,
			"a destructive command (rm -r, drop table, truncate, delete from) needs a human"),
		human(RuleOutboundHTTP, `(?i)\b(curl|wget)\b`, "outbound HTTP (curl, wget) needs a human"),
		human(RuleRemoteAccess, `(?i)\b(ssh|sftp)\b|\b(scp|rsync)\b.*(@|\s[^\s/:]+:)`, "remote access (ssh, scp, sftp, rsync) needs a human"),
		{Name: RuleReadOnly, Action: ActionAutoApprove,
			When: "size(commands) > 0 && size(tools) == 0 && commands.all(c, c.matches(" + celString(readOnlyCommandRE) +
				") && !c.matches(" + celString(writingOptionRE) + "))",
			Reason: "only read-only or QA commands, no agentic node"},
	}
}

// policyEnv is the CEL environment of every rule: the five variables, the standard library
// and the strings extension (lowerAscii, split, …), parser limits on expression size. It is
// built by the first CompilePolicy (a few milliseconds and most of a megabyte), not at start,
// so commands that compile no policy do not pay for it.
var policyEnv = sync.OnceValue(func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("node", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("bindings", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("playbook", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("commands", cel.ListType(cel.StringType)),
		cel.Variable("tools", cel.ListType(cel.StringType)),
		ext.Strings(),
		cel.ParserExpressionSizeLimit(MaxRuleExprBytes),
		cel.ParserRecursionLimit(100),
	)
	if err != nil {
		panic("approval: CEL environment: " + err.Error()) // static declarations; cannot fail
	}
	return env
})

// where names a rule in errors: `file:line: rule "name"`, or `default rule "name"`.
func (r PolicyRule) where() string {
	if r.File == "" {
		return fmt.Sprintf("default rule %q", r.Name)
	}
	return fmt.Sprintf("%s:%d: rule %q", r.File, r.Line, r.Name)
}

// CompilePolicy checks and compiles rules in order (docs/decisions/auto-pass-policy.md). Each needs a name (unique
// in the list), an action "auto-approve" or "require-human" and a `when` that compiles to a
// bool (or dyn) CEL expression over node, bindings, playbook, commands and tools. Errors name
// the file, line and rule ("policy.yaml:7: rule \"docs\": when does not compile: …"); every
// problem is listed, joined by newlines. The server uses custom rules followed by
// DefaultPolicyRules() (see LoadPlaybookPolicy).
func CompilePolicy(rules []PolicyRule) (*Policy, error) {
	p := &Policy{}
	var errs []error
	seen := map[string]string{}
	for _, r := range rules {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", r.where(), fmt.Sprintf(format, args...)))
		}
		switch {
		case r.Name == "":
			errs = append(errs, fmt.Errorf("%s:%d: a rule needs a name", r.File, r.Line))
			continue
		case len(r.Name) > MaxRuleTextBytes:
			bad("name is longer than %d bytes", MaxRuleTextBytes)
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			bad("the name is used twice (also %s)", prev)
			continue
		}
		seen[r.Name] = r.where()
		if r.Action != ActionAutoApprove && r.Action != ActionRequireHuman {
			bad("action %q is not %q or %q", r.Action, ActionAutoApprove, ActionRequireHuman)
			continue
		}
		if len(r.Reason) > 4*MaxRuleTextBytes {
			bad("reason is longer than %d bytes", 4*MaxRuleTextBytes)
			continue
		}
		if strings.TrimSpace(r.When) == "" {
			bad("when is required (a CEL expression)")
			continue
		}
		if len(r.When) > MaxRuleExprBytes {
			bad("when is %d bytes, over the limit of %d", len(r.When), MaxRuleExprBytes)
			continue
		}
		ast, iss := policyEnv().Compile(r.When)
		if iss != nil && iss.Err() != nil {
			bad("when does not compile: %s", oneLine(iss.Err().Error()))
			continue
		}
		if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
			bad("when yields %s, not bool", t)
			continue
		}
		prg, err := policyEnv().Program(ast, cel.CostLimit(MaxEvalCost), cel.InterruptCheckFrequency(100))
		if err != nil {
			bad("when does not compile: %s", oneLine(err.Error()))
			continue
		}
		p.rules = append(p.rules, compiledRule{PolicyRule: r, prg: prg})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// oneLine joins a multi-line CEL error (which carries a caret diagram) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Rules returns the policy's rules in evaluation order (a copy).
func (p *Policy) Rules() []PolicyRule {
	out := make([]PolicyRule, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.PolicyRule
	}
	return out
}

// Evaluate decides a gate (docs/spec/playbooks.md, "Policy evaluator"; docs/decisions/auto-pass-policy.md). Rules are evaluated in order;
// the first that matches decides, except that no auto-approve passes while any require-human
// rule matches: the rules after a matching auto-approve are evaluated too, and the first
// require-human one that matches decides instead, its reason noting the auto-approve rule it
// overrode. A rule that fails to evaluate (a missing key, a wrong type, a non-bool result, the
// MaxEvalCost limit), whatever its action, counts as a matching require-human rule whose
// reason says so: the policy fails closed. No match: a human decides, Rule "". A nil Policy
// decides nothing automatically.
//
// Before any rule, the node's own policy (Node[NodePolicyKey]) is honoured: "require-human"
// pins the node to a person, and any other value that is not "" is not understood and counts
// the same (fail closed); the verdict's Rule is then NodePolicyRule. No rule can override it.
func (p *Policy) Evaluate(in PolicyInput) PolicyVerdict {
	if pin, ok := in.Node[NodePolicyKey]; ok && pin != "" && pin != nil {
		reason := "the playbook pins this approval node to a person (policy: require-human); no auto-pass rule applies"
		if pin != ActionRequireHuman {
			reason = fmt.Sprintf("the approval node's policy %q is not understood here, so a person decides (fail closed)", truncateRule(fmt.Sprint(pin)))
		}
		return PolicyVerdict{Rule: NodePolicyRule, Action: ActionRequireHuman, Reason: reason}
	}
	if p == nil {
		return PolicyVerdict{Action: ActionRequireHuman, Reason: "no auto-pass policy: a human decides"}
	}
	vars := map[string]any{
		"node": orEmpty(in.Node), "bindings": orEmpty(in.Bindings), "playbook": orEmpty(in.Playbook),
		"commands": orNone(in.Commands), "tools": orNone(in.Tools),
	}
	var first, human *PolicyVerdict
	for _, r := range p.rules {
		if human != nil {
			break // a human decides; nothing later changes that
		}
		// Every rule runs until a require-human one matches: a later auto-approve rule that
		// fails to evaluate still counts as require-human (docs/decisions/auto-pass-policy.md).
		matched, err := r.eval(vars)
		var v PolicyVerdict
		switch {
		case err != nil:
			v = PolicyVerdict{Rule: r.Name, Action: ActionRequireHuman,
				Reason: fmt.Sprintf("rule %s failed to evaluate, so a human decides: %s", r.Name, oneLine(err.Error()))}
		case !matched:
			continue
		default:
			v = PolicyVerdict{Rule: r.Name, Action: r.Action, Reason: r.Reason, AutoPassed: r.Action == ActionAutoApprove}
		}
		if first == nil {
			first = &v
		}
		if v.Action == ActionRequireHuman && human == nil {
			human = &v
		}
	}
	switch {
	case first == nil:
		return PolicyVerdict{Action: ActionRequireHuman, Reason: "no auto-pass rule matched: a human decides"}
	case first.AutoPassed && human != nil:
		out := *human
		out.Reason += fmt.Sprintf(" (overrides auto-approve rule %s)", first.Rule)
		return out
	}
	return *first
}

// eval runs one rule; a non-bool result is an error.
func (r compiledRule) eval(vars map[string]any) (bool, error) {
	out, _, err := r.prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the expression yielded %s, not bool", out.Type().TypeName())
	}
	return b, nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func orNone(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// ruleNameRE is a custom rule's name.
var ruleNameRE = lazyregexp.New(`^[A-Za-z0-9._-]{1,256}$`)

// LoadPolicyRules reads custom auto-pass rules (rbook serve --playbook-policy FILE; docs/decisions/auto-pass-policy.md):
//
//	rules:
//	  - name: docs-only                       # [A-Za-z0-9._-], unique, not a default's name
//	    when: 'commands.all(c, c.startsWith("echo "))'   # CEL over node, bindings, playbook, commands, tools
//	    action: auto-approve                  # or require-human
//	    reason: only echo commands            # shown on the gate
//
// The file is read as strictly as the gate policy (one document, at most MaxAutoPassFileBytes,
// no unknown or duplicate keys, no aliases or non-core tags). Every rule is compiled: a `when`
// that does not compile is an error naming the file, line and rule. Errors are
// "file:line: message".
func LoadPolicyRules(file string) ([]PolicyRule, error) {
	data, err := readRulesFile(file, "playbook policy", MaxAutoPassFileBytes)
	if err != nil {
		return nil, err
	}
	return ParsePolicyRules(data, file)
}

// ParsePolicyRules parses --playbook-policy text; file names it in errors. See LoadPolicyRules.
func ParsePolicyRules(data []byte, file string) ([]PolicyRule, error) {
	list, errAt, err := parseRulesList(data, file, "playbook policy", MaxAutoPassFileBytes, MaxAutoPassRules)
	if err != nil {
		return nil, err
	}
	defaults := map[string]bool{}
	for _, d := range DefaultPolicyRules() {
		defaults[d.Name] = true
	}
	var rules []PolicyRule
	for i, n := range list.Content {
		if n.Kind != yaml.MappingNode {
			return nil, errAt(n, "rules[%d]: want a mapping (name, when, action, reason)", i)
		}
		r := PolicyRule{File: file, Line: n.Line}
		for j := 0; j < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			field := fmt.Sprintf("rules[%d].%s", i, k.Value)
			var dst *string
			switch k.Value {
			case "name":
				dst = &r.Name
			case "when":
				dst = &r.When
			case "action":
				dst = &r.Action
			case "reason":
				dst = &r.Reason
			default:
				return nil, errAt(k, "rules[%d]: unknown field %q (fields: name, when, action, reason)", i, k.Value)
			}
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
				return nil, errAt(v, "%s: want a string", field)
			}
			*dst = v.Value
		}
		switch {
		case r.Name == "":
			return nil, errAt(n, "rules[%d].name: missing", i)
		case !ruleNameRE.MatchString(r.Name):
			return nil, errAt(n, "rules[%d].name: %q is not 1-256 of A-Z a-z 0-9 . _ -", i, truncateRule(r.Name))
		case defaults[r.Name]:
			return nil, errAt(n, "rules[%d].name: %q is the name of a default rule", i, r.Name)
		case r.Name == NodePolicyRule:
			return nil, errAt(n, "rules[%d].name: %q names a node's own policy (policy: require-human) in verdicts; choose another name", i, r.Name)
		case r.When == "":
			return nil, errAt(n, "rules[%d].when: missing (a CEL expression over node, bindings, playbook, commands, tools)", i)
		case r.Action == "":
			return nil, errAt(n, "rules[%d].action: missing (%s or %s)", i, ActionAutoApprove, ActionRequireHuman)
		case r.Reason == "":
			return nil, errAt(n, "rules[%d].reason: missing (shown on the gate)", i)
		}
		rules = append(rules, r)
	}
	if _, err := CompilePolicy(rules); err != nil {
		return nil, err
	}
	return rules, nil
}

func truncateRule(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// LoadPlaybookPolicy is the server's auto-pass policy (docs/decisions/auto-pass-policy.md): the custom rules of
// file (none when file is "") followed by DefaultPolicyRules(). Evaluate's rule that no
// auto-approve passes while a require-human rule matches means a custom auto-approve can
// never pass a gate a default require-human rule matches. Errors: LoadPolicyRules' errors.
func LoadPlaybookPolicy(file string) (*Policy, error) {
	var custom []PolicyRule
	if file != "" {
		var err error
		if custom, err = LoadPolicyRules(file); err != nil {
			return nil, err
		}
	}
	return CompilePolicy(append(custom, DefaultPolicyRules()...))
}
