package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// The check step's default tools (docs/spec/runbooks.md, "Step 5", "check"); docs/decisions/mcp-config.md
// lets a configuration name others.
const (
	DefaultValidateTool = "validate_query"
	DefaultExecuteTool  = "execute_query"
)

// MissingInputOutput is the output of a check step that has no kql_or_template: it is
// SKIPPED, not failed (docs/spec/runbooks.md, "Failure handling").
const MissingInputOutput = "kql_or_template is missing; check step skipped"

// Caller calls one MCP tool and returns its result; *mcp.Session implements it. A tool that
// ran and failed is a Result with IsError; transport, protocol and context failures are errors.
type Caller interface {
	CallTool(ctx context.Context, name string, args map[string]any) (mcp.Result, error)
}

// Check executes type=check steps (docs/spec/runbooks.md, "Step 5"): it scopes the step's KQL to
// the run's subscriptions with InjectScope, calls the validate tool and then the execute tool
// with {"query", "subscriptions"}, and judges the result set: empty is PASS, non-empty is FAIL
// (resources violate the check). Nothing is retried.
//
// Outcomes: no kql_or_template → SKIPPED with MissingInputOutput; tool error, MCP error or a
// result whose emptiness cannot be decided → FAIL with {"tool", "error"[, "response"]} JSON;
// deadline passed → TIMED_OUT; otherwise the output is the execute tool's response JSON
// (structured content when present, else its text; docs/spec/runbooks.md, "Step 7").
type Check struct {
	// Session reaches the MCP server.
	Session Caller
	// Subscriptions scope the query; when empty, the plan's subscriptions are used.
	Subscriptions []string
	// ValidateTool and ExecuteTool name the tools; "" means DefaultValidateTool and
	// DefaultExecuteTool.
	ValidateTool, ExecuteTool string
}

// Execute runs one check step; see Check. It returns as soon as ctx ends, with TIMED_OUT for
// an expired deadline (the engine derives the same from ctx) and FAIL for a cancellation.
func (c Check) Execute(ctx context.Context, step runbook.Step, run engine.RunContext) engine.Outcome {
	if step.Input == nil {
		return engine.Outcome{Status: engine.StatusSkipped, Output: MissingInputOutput}
	}
	validate, execute := orDefault(c.ValidateTool, DefaultValidateTool), orDefault(c.ExecuteTool, DefaultExecuteTool)
	if c.Session == nil {
		return checkFailure(validate, errors.New("no MCP server is configured for check steps"), "")
	}
	subs := c.subscriptions(run)
	args := map[string]any{
		"query":         *c.RunInput(step, run),
		"subscriptions": append([]string{}, subs...), // [] rather than null on the wire
	}

	if res, err := c.Session.CallTool(ctx, validate, args); err != nil {
		return callFailure(ctx, step, validate, err)
	} else if res.IsError {
		return checkFailure(validate, errors.New(toolErrorText(res)), "")
	}

	res, err := c.Session.CallTool(ctx, execute, args)
	if err != nil {
		return callFailure(ctx, step, execute, err)
	}
	if res.IsError {
		return checkFailure(execute, errors.New(toolErrorText(res)), "")
	}
	rows, err := resultRows(res)
	if err != nil {
		return checkFailure(execute, fmt.Errorf("cannot tell whether the result set is empty: %w", err), res.Payload())
	}
	if rows == 0 {
		return engine.Outcome{Status: engine.StatusPass, Output: res.Payload()}
	}
	return engine.Outcome{Status: engine.StatusFail, Output: res.Payload()}
}

// RunInput is the query Execute sends to both tools for step: its kql_or_template with the
// scope filter injected (InjectScope), or nil when the step has none. The engine records it
// as the evidence's input (engine.InputRewriter; docs/decisions/two-renderings.md).
func (c Check) RunInput(step runbook.Step, run engine.RunContext) *string {
	if step.Input == nil {
		return nil
	}
	q := InjectScope(*step.Input, c.subscriptions(run))
	return &q
}

// subscriptions are the scope of a check: c.Subscriptions, else the plan's.
func (c Check) subscriptions(run engine.RunContext) []string {
	if len(c.Subscriptions) == 0 && run.Plan != nil {
		return run.Plan.Subscriptions
	}
	return c.Subscriptions
}

func orDefault(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// callFailure turns a failed call into an outcome: TIMED_OUT when the step's deadline passed
// (docs/spec/runbooks.md, "Failure handling": MCP timeouts are not retried), FAIL otherwise.
func callFailure(ctx context.Context, step runbook.Step, tool string, err error) engine.Outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		out := checkFailure(tool, fmt.Errorf("no answer within max_timeout_seconds (%d s); not retried: %w", step.TimeoutSeconds, err), "")
		out.Status = engine.StatusTimedOut
		return out
	}
	return checkFailure(tool, err, "")
}

// failure is a FAIL outcome whose output is {"tool", "error"} JSON, plus "response" when the
// tool's answer is worth keeping as evidence.
func checkFailure(tool string, err error, response string) engine.Outcome {
	body := struct {
		Tool     string `json:"tool"`
		Error    string `json:"error"`
		Response string `json:"response,omitempty"`
	}{tool, err.Error(), response}
	out, _ := json.Marshal(body) // strings only: cannot fail
	return engine.Outcome{Status: engine.StatusFail, Output: string(out)}
}

func toolErrorText(res mcp.Result) string {
	if text := strings.TrimSpace(res.Payload()); text != "" {
		return text
	}
	return "the tool reported an error without a message"
}

// resultRows returns how many rows a query result holds, from its structured content or, when
// that does not tell, its text. A JSON array counts its elements; an object counts the largest
// of its "count" and "totalRecords" numbers and the lengths of its "data", "rows" and
// "results" arrays (also ARG's table form {"data": {"rows": [...]}}), so any sign of a row
// makes the set non-empty. Anything else is an error: an unreadable answer never passes.
func resultRows(res mcp.Result) (int, error) {
	var firstErr error
	for _, payload := range []string{string(res.Structured), res.Text} {
		if strings.TrimSpace(payload) == "" {
			continue
		}
		n, err := countRows(payload)
		if err == nil {
			return n, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("the response is empty")
	}
	return 0, firstErr
}

func countRows(payload string) (int, error) {
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("the response is not JSON: %w", err)
	}
	if dec.More() {
		return 0, errors.New("the response has data after its JSON value")
	}
	switch v := v.(type) {
	case []any:
		return len(v), nil
	case map[string]any:
		found, n := false, 0
		for _, key := range []string{"count", "totalRecords"} {
			num, ok := v[key].(json.Number)
			if !ok {
				continue
			}
			count, err := num.Int64()
			if err != nil || count < 0 {
				return 0, fmt.Errorf("%q is not a row count", key)
			}
			found, n = true, max(n, int(count))
		}
		for _, key := range []string{"data", "rows", "results"} {
			switch d := v[key].(type) {
			case []any:
				found, n = true, max(n, len(d))
			case map[string]any:
				if rows, ok := d["rows"].([]any); ok {
					found, n = true, max(n, len(rows))
				}
			}
		}
		if !found {
			return 0, errors.New(`the response object has no "count", "totalRecords", "data", "rows" or "results"`)
		}
		return n, nil
	default:
		return 0, errors.New("the response is neither a JSON array nor an object")
	}
}

// scopeShapingOperators are the tabular operators a scope filter must come before: after them
// the rows are already limited, aggregated or projected, so filtering would change the
// answer or find no subscriptionId column.
var scopeShapingOperators = map[string]bool{
	"project": true, "project-away": true, "project-keep": true, "project-rename": true,
	"project-reorder": true, "summarize": true, "count": true, "distinct": true,
	"take": true, "limit": true, "top": true, "top-nested": true, "sample": true,
	"sample-distinct": true,
}

// InjectScope adds `| where subscriptionId in~ ('sub-a', 'sub-b')` to a KQL query (
// docs/spec/runbooks.md, "Step 5", "check"): before the first `| project` of the query's last
// statement (likewise before summarize, count, distinct, take, limit, top or sample, which
// would drop the column or the rows first), or at the end when there is none. The query is
// returned unchanged when subs is empty or a top-level where clause of the last statement
// already holds a scope filter (`subscriptionId in~ (…)`); any other mention of
// subscriptionId (isnotempty, !=, ==) does not scope the query, so the filter is still
// added (an extra filter only narrows). Pipes, quotes and the word subscriptionId inside string
// literals, comments and parenthesised subqueries are not mistaken for query structure.
// Subscription ids are quoted as KQL string literals (backslash and quote escaped).
func InjectScope(query string, subs []string) string {
	if len(subs) == 0 {
		return query
	}
	quoted := make([]string, len(subs))
	for i, s := range subs {
		quoted[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
	}
	filter := "| where subscriptionId in~ (" + strings.Join(quoted, ", ") + ")"

	stmt := lastStatement(query)
	for _, seg := range stmt.segments {
		if (seg.operator == "where" || seg.operator == "filter") && seg.scopesSubscriptionID {
			return query
		}
	}
	for _, seg := range stmt.segments {
		if seg.pipe >= 0 && scopeShapingOperators[seg.operator] {
			before := query[:seg.pipe]
			if before != "" && !strings.HasSuffix(before, " ") {
				before += " "
			}
			return before + filter + " " + query[seg.pipe:]
		}
	}
	// After the statement's last code, so a trailing comment or ';' cannot swallow the filter.
	return query[:stmt.codeEnd] + " " + filter + query[stmt.codeEnd:]
}

// kqlSegment is one top-level pipe segment of a KQL statement.
type kqlSegment struct {
	pipe                 int    // byte offset of the segment's '|', -1 for the first segment
	operator             string // first word after the pipe (e.g. where, project-away)
	scopesSubscriptionID bool   // the segment has `subscriptionId in~ (`: the specification's scope filter
}

// kqlStatement is one ';'-separated statement of a KQL query.
type kqlStatement struct {
	segments []kqlSegment
	// codeEnd is the offset just past the statement's last character that is neither space
	// nor comment.
	codeEnd int
	hasCode bool
}

// lastStatement splits the last statement of query that holds any code at its top-level
// pipes, skipping string literals ('..', "..", @'..', @"..", ```..```) and // comments.
func lastStatement(query string) kqlStatement {
	var last, stmt kqlStatement
	current := kqlSegment{pipe: -1}
	depth := 0
	wantOperator := false
	finish := func() {
		stmt.segments = append(stmt.segments, current)
		if stmt.hasCode || last.segments == nil {
			last = stmt
		}
	}
	for i := 0; i < len(query); {
		c := query[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
			continue
		case strings.HasPrefix(query[i:], "//"):
			i = skipTo(query, i, strings.IndexByte(query[i:], '\n'), 1)
			continue
		case c == ';' && depth == 0:
			finish()
			stmt, current, depth, wantOperator = kqlStatement{}, kqlSegment{pipe: -1}, 0, false
			i++
			continue
		case strings.HasPrefix(query[i:], "```"):
			i = skipTo(query, i+3, strings.Index(query[i+3:], "```"), 3)
		case c == '@' && i+1 < len(query) && (query[i+1] == '\'' || query[i+1] == '"'):
			i = skipTo(query, i+2, strings.IndexByte(query[i+2:], query[i+1]), 1)
		case c == '\'' || c == '"':
			i = skipQuoted(query, i)
		case c == '(' || c == '[' || c == '{':
			depth++
			i++
		case c == ')' || c == ']' || c == '}':
			depth = max(0, depth-1)
			i++
		case c == '|' && depth == 0:
			stmt.segments = append(stmt.segments, current)
			current = kqlSegment{pipe: i}
			wantOperator = true
			i++
		case isWordByte(c):
			for i < len(query) && (isWordByte(query[i]) || query[i] == '-' && i+1 < len(query) && isWordByte(query[i+1])) {
				i++
			}
			word := query[start:i]
			if wantOperator {
				current.operator, wantOperator = word, false
			}
			if strings.EqualFold(word, "subscriptionId") && strings.HasPrefix(strings.ToLower(strings.TrimLeft(query[i:], " \t\r\n")), "in~") {
				current.scopesSubscriptionID = true
			}
		default:
			i++
		}
		stmt.hasCode, stmt.codeEnd = true, i
	}
	finish()
	return last
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skipTo returns the offset just past a terminator found at rel bytes after from (of width
// n), or the end of query when there is none (rel < 0).
func skipTo(query string, from, rel, n int) int {
	if rel < 0 {
		return len(query)
	}
	return from + rel + n
}

// skipQuoted returns the offset just past the '..' or ".." literal starting at i, honouring
// backslash escapes; an unterminated literal runs to the end.
func skipQuoted(query string, i int) int {
	quote := query[i]
	for j := i + 1; j < len(query); j++ {
		switch query[j] {
		case '\\':
			j++
		case quote:
			return j + 1
		}
	}
	return len(query)
}
