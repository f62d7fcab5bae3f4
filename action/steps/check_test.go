package steps

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
)

func TestInjectScope(t *testing.T) {
	subs := []string{"sub-a", "sub-b"}
	const filter = "| where subscriptionId in~ ('sub-a', 'sub-b')"
	tests := []struct {
		name, query, want string
		subs              []string
	}{
		{"before project", "Resources | where type =~ 'microsoft.web/sites' | project name",
			"Resources | where type =~ 'microsoft.web/sites' " + filter + " | project name", subs},
		{"no project: at the end", "Resources | where isempty(tags.owner)",
			"Resources | where isempty(tags.owner) " + filter, subs},
		{"table only", "Resources", "Resources " + filter, subs},
		{"before the first of several projects", "Resources | project name, type | project name",
			"Resources " + filter + " | project name, type | project name", subs},
		{"no space before the pipe", "Resources|project name", "Resources " + filter + " |project name", subs},
		// Only the scope filter itself counts as present; other mentions still get scoped.
		{"== on subscriptionId is not the scope filter", "Resources | where subscriptionId == 'sub-x' | project name",
			"Resources | where subscriptionId == 'sub-x' | where subscriptionId in~ ('sub-a', 'sub-b') | project name", subs},
		{"isnotempty(subscriptionId) does not scope", "Resources | where isnotempty(subscriptionId) | project name",
			"Resources | where isnotempty(subscriptionId) | where subscriptionId in~ ('sub-a', 'sub-b') | project name", subs},
		{"already scoped, spacing and case", "Resources | where SubscriptionId  IN~ ('sub-x') | project name",
			"Resources | where SubscriptionId  IN~ ('sub-x') | project name", subs},
		{"already filtered, in a later where", "Resources | where a == 'b' | where subscriptionId in~ ('sub-x')",
			"Resources | where a == 'b' | where subscriptionId in~ ('sub-x')", subs},
		{"subscriptionId only projected is no filter", "Resources | project name, subscriptionId",
			"Resources " + filter + " | project name, subscriptionId", subs},
		{"subscriptionId inside a string is no filter", "Resources | where name == 'subscriptionId'",
			"Resources | where name == 'subscriptionId' " + filter, subs},
		{"pipe and project inside a string", `Resources | where name == "a | project b"`,
			`Resources | where name == "a | project b" ` + filter, subs},
		{"escaped quote inside a string", `Resources | where name == 'it\'s | project' | project name`,
			`Resources | where name == 'it\'s | project' ` + filter + " | project name", subs},
		{"verbatim string", `Resources | where name == @'C:\x | project'`,
			`Resources | where name == @'C:\x | project' ` + filter, subs},
		{"comment", "Resources\n| where a == 'b' // | project name\n",
			"Resources\n| where a == 'b' " + filter + " // | project name\n", subs},
		{"trailing whitespace and semicolon", "Resources | where a == 'b';\n",
			"Resources | where a == 'b' " + filter + ";\n", subs},
		{"summarize drops the column", "Resources | summarize count() by type",
			"Resources " + filter + " | summarize count() by type", subs},
		{"take limits the rows first", "Resources | where a == 'b' | take 5",
			"Resources | where a == 'b' " + filter + " | take 5", subs},
		{"project-away", "Resources | project-away tags",
			"Resources " + filter + " | project-away tags", subs},
		{"subquery pipes are not top level",
			"Resources | join kind=inner (ResourceContainers | where subscriptionId == 'x' | project subscriptionId) on subscriptionId | project name",
			"Resources | join kind=inner (ResourceContainers | where subscriptionId == 'x' | project subscriptionId) on subscriptionId " + filter + " | project name", subs},
		{"let statement: only the last statement is scoped",
			"let t = Resources | project name; t | where name == 'x'",
			"let t = Resources | project name; t | where name == 'x' " + filter, subs},
		{"quotes in subscription ids are escaped", "Resources",
			`Resources | where subscriptionId in~ ('it\'s', 'back\\slash')`, []string{"it's", `back\slash`}},
		{"no subscriptions: unchanged", "Resources | project name", "Resources | project name", nil},
		{"YAML 1.1 look-alikes in a query keep their literals",
			"Resources | where c == 'NO' and v == '1.10' and m == '0755' | project name",
			"Resources | where c == 'NO' and v == '1.10' and m == '0755' " + filter + " | project name", subs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InjectScope(tt.query, tt.subs); got != tt.want {
				t.Errorf("InjectScope(%q)\n got %q\nwant %q", tt.query, got, tt.want)
			}
		})
	}
}

// fakeCaller answers tool calls from a table and records them.
type fakeCaller struct {
	answers map[string]func(ctx context.Context) (mcp.Result, error)
	calls   []fakeCall
}

type fakeCall struct {
	tool string
	args map[string]any
}

func (f *fakeCaller) CallTool(ctx context.Context, name string, args map[string]any) (mcp.Result, error) {
	f.calls = append(f.calls, fakeCall{name, args})
	respond, ok := f.answers[name]
	if !ok {
		return mcp.Result{}, errors.New("unknown tool " + name)
	}
	return respond(ctx)
}

func fixedAnswer(r mcp.Result, err error) func(context.Context) (mcp.Result, error) {
	return func(context.Context) (mcp.Result, error) { return r, err }
}

func structuredResult(s string) mcp.Result {
	return mcp.Result{Structured: json.RawMessage(s), Text: s}
}

var validOK = fixedAnswer(structuredResult(`{"valid":true}`), nil)

func checkStepWith(query string) runbook.Step {
	return runbook.Step{Name: "q", Type: runbook.TypeCheck, Input: &query, OnFail: runbook.OnFailHalt, TimeoutSeconds: 3}
}

func checkRunContext(subs ...string) engine.RunContext {
	return engine.RunContext{RunID: "r", Plan: &runbook.Plan{Subscriptions: subs}, StepNumber: 1, StepCount: 1}
}

func TestCheckOutcomes(t *testing.T) {
	const query = "Resources | where isempty(tags.owner) | project name"
	const scoped = "Resources | where isempty(tags.owner) | where subscriptionId in~ ('sub-a') | project name"
	tests := []struct {
		name       string
		answers    map[string]func(context.Context) (mcp.Result, error)
		wantStatus engine.StepStatus
		wantOutput string
		wantTools  []string
	}{
		{"empty result passes", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": validOK, "execute_query": fixedAnswer(structuredResult(`{"count":0,"data":[]}`), nil)},
			engine.StatusPass, `{"count":0,"data":[]}`, []string{"validate_query", "execute_query"}},
		{"rows fail with the rows as output", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": validOK, "execute_query": fixedAnswer(structuredResult(`{"count":1,"data":[{"name":"app-legacy-api"}]}`), nil)},
			engine.StatusFail, `{"count":1,"data":[{"name":"app-legacy-api"}]}`, []string{"validate_query", "execute_query"}},
		{"validation tool error fails before execute", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": fixedAnswer(mcp.Result{Text: "column 12: unsupported operator \"summarize\"", IsError: true}, nil)},
			engine.StatusFail, `{"tool":"validate_query","error":"column 12: unsupported operator \"summarize\""}`, []string{"validate_query"}},
		{"validation MCP error fails", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": fixedAnswer(mcp.Result{}, errors.New("connection closed"))},
			engine.StatusFail, `{"tool":"validate_query","error":"connection closed"}`, []string{"validate_query"}},
		{"execute tool error fails", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": validOK, "execute_query": fixedAnswer(mcp.Result{Text: "throttled", IsError: true}, nil)},
			engine.StatusFail, `{"tool":"execute_query","error":"throttled"}`, []string{"validate_query", "execute_query"}},
		{"execute MCP error fails", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": validOK, "execute_query": fixedAnswer(mcp.Result{}, errors.New("EOF"))},
			engine.StatusFail, `{"tool":"execute_query","error":"EOF"}`, []string{"validate_query", "execute_query"}},
		{"undecidable answer fails", map[string]func(context.Context) (mcp.Result, error){
			"validate_query": validOK, "execute_query": fixedAnswer(mcp.Result{Text: "all good"}, nil)},
			engine.StatusFail,
			`{"tool":"execute_query","error":"cannot tell whether the result set is empty: the response is not JSON: invalid character 'a' looking for beginning of value","response":"all good"}`,
			[]string{"validate_query", "execute_query"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caller := &fakeCaller{answers: tt.answers}
			out := Check{Session: caller}.Execute(context.Background(), checkStepWith(query), checkRunContext("sub-a"))
			if out.Status != tt.wantStatus || out.Output != tt.wantOutput {
				t.Errorf("got %s %s\nwant %s %s", out.Status, out.Output, tt.wantStatus, tt.wantOutput)
			}
			var tools []string
			for _, c := range caller.calls {
				tools = append(tools, c.tool)
				if c.args["query"] != scoped || !slices.Equal(c.args["subscriptions"].([]string), []string{"sub-a"}) {
					t.Errorf("%s called with %v, want query %q and subscriptions [sub-a]", c.tool, c.args, scoped)
				}
			}
			if !slices.Equal(tools, tt.wantTools) {
				t.Errorf("tools called %v, want %v", tools, tt.wantTools)
			}
		})
	}
}

func TestCheckMissingInputIsSkipped(t *testing.T) {
	caller := &fakeCaller{}
	step := runbook.Step{Name: "q", Type: runbook.TypeCheck, OnFail: runbook.OnFailHalt, TimeoutSeconds: 3}
	out := Check{Session: caller}.Execute(context.Background(), step, checkRunContext("sub-a"))
	if out.Status != engine.StatusSkipped || out.Output != MissingInputOutput {
		t.Errorf("got %s %q, want SKIPPED %q", out.Status, out.Output, MissingInputOutput)
	}
	if len(caller.calls) != 0 {
		t.Errorf("a skipped check called %v", caller.calls)
	}
}

func TestCheckWithoutSessionFails(t *testing.T) {
	out := Check{}.Execute(context.Background(), checkStepWith("Resources"), checkRunContext("sub-a"))
	want := `{"tool":"validate_query","error":"no MCP server is configured for check steps"}`
	if out.Status != engine.StatusFail || out.Output != want {
		t.Errorf("got %s %s, want FAIL %s", out.Status, out.Output, want)
	}
}

func TestCheckToolNamesAndSubscriptionsOverride(t *testing.T) {
	caller := &fakeCaller{answers: map[string]func(context.Context) (mcp.Result, error){
		"arg_validate": validOK, "arg_query": fixedAnswer(structuredResult(`[]`), nil)}}
	check := Check{Session: caller, Subscriptions: []string{"sub-z"}, ValidateTool: "arg_validate", ExecuteTool: "arg_query"}
	out := check.Execute(context.Background(), checkStepWith("Resources"), checkRunContext("sub-a"))
	if out.Status != engine.StatusPass {
		t.Fatalf("got %s %s, want PASS", out.Status, out.Output)
	}
	if len(caller.calls) != 2 || caller.calls[0].tool != "arg_validate" || caller.calls[1].tool != "arg_query" {
		t.Fatalf("calls %v, want arg_validate then arg_query", caller.calls)
	}
	if got := caller.calls[1].args["query"]; got != "Resources | where subscriptionId in~ ('sub-z')" {
		t.Errorf("query %q: Check.Subscriptions should override the plan's", got)
	}
}

func TestCheckDeadlineIsTimedOut(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	blocked := func(ctx context.Context) (mcp.Result, error) { <-ctx.Done(); return mcp.Result{}, ctx.Err() }
	caller := &fakeCaller{answers: map[string]func(context.Context) (mcp.Result, error){"validate_query": validOK, "execute_query": blocked}}
	out := Check{Session: caller}.Execute(ctx, checkStepWith("Resources"), checkRunContext("sub-a"))
	want := `{"tool":"execute_query","error":"no answer within max_timeout_seconds (3 s); not retried: context deadline exceeded"}`
	if out.Status != engine.StatusTimedOut || out.Output != want {
		t.Errorf("got %s %s, want TIMED_OUT %s", out.Status, out.Output, want)
	}
}

func TestCheckCancelIsFail(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blocked := func(ctx context.Context) (mcp.Result, error) { <-ctx.Done(); return mcp.Result{}, ctx.Err() }
	caller := &fakeCaller{answers: map[string]func(context.Context) (mcp.Result, error){"validate_query": blocked}}
	out := Check{Session: caller}.Execute(ctx, checkStepWith("Resources"), checkRunContext("sub-a"))
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, "context canceled") {
		t.Errorf("got %s %s, want FAIL mentioning context canceled", out.Status, out.Output)
	}
}

func TestResultRows(t *testing.T) {
	tests := []struct {
		name    string
		result  mcp.Result
		want    int
		wantErr string
	}{
		{"array", mcp.Result{Text: `[{"a":1},{"a":2}]`}, 2, ""},
		{"empty array", mcp.Result{Text: `[]`}, 0, ""},
		{"count and data", mcp.Result{Structured: json.RawMessage(`{"count":0,"data":[]}`)}, 0, ""},
		{"ARG shape", mcp.Result{Text: `{"totalRecords":3,"count":3,"data":[{},{},{}]}`}, 3, ""},
		{"count alone", mcp.Result{Text: `{"count":4}`}, 4, ""},
		{"data alone", mcp.Result{Text: `{"data":[1]}`}, 1, ""},
		{"rows", mcp.Result{Text: `{"rows":[]}`}, 0, ""},
		{"results", mcp.Result{Text: `{"results":[1,2]}`}, 2, ""},
		{"ARG table form", mcp.Result{Text: `{"data":{"columns":[{"name":"name"}],"rows":[["x"]]}}`}, 1, ""},
		{"any sign of a row wins", mcp.Result{Text: `{"count":0,"data":[{"name":"x"}]}`}, 1, ""},
		{"structured preferred over text", mcp.Result{Structured: json.RawMessage(`{"count":2}`), Text: `[]`}, 2, ""},
		{"text when structured says nothing", mcp.Result{Structured: json.RawMessage(`{"ok":true}`), Text: `{"count":1}`}, 1, ""},
		{"unknown object", mcp.Result{Text: `{"ok":true}`}, 0, `the response object has no "count", "totalRecords", "data", "rows" or "results"`},
		{"negative count", mcp.Result{Text: `{"count":-1}`}, 0, `"count" is not a row count`},
		{"fractional count", mcp.Result{Text: `{"count":1.5}`}, 0, `"count" is not a row count`},
		{"scalar", mcp.Result{Text: `0`}, 0, "the response is neither a JSON array nor an object"},
		{"trailing data", mcp.Result{Text: `[] []`}, 0, "the response has data after its JSON value"},
		{"empty", mcp.Result{}, 0, "the response is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resultRows(tt.result)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("resultRows = %d, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("resultRows = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
