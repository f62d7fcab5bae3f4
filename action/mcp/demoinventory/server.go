// Package demoinventory is rbook's demo MCP server: it answers the specification's Azure Resource
// Graph tools, validate_query and execute_query (docs/spec/runbooks.md, "Step 5", "check"),
// from a fixed, fictional inventory with a small KQL subset, so `rbook run demo` works with no
// cloud account. It never contacts Azure or any other cloud, and says so to its clients.
package demoinventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/mcp/demostdio"
)

// ServerName is the MCP server name the demo announces.
const ServerName = "rbook-demo-inventory"

// The demo's tool names, the specification's check tools (docs/spec/runbooks.md, "Step 5").
const (
	ToolValidateQuery = "validate_query"
	ToolExecuteQuery  = "execute_query"
)

const instructions = "rbook demo inventory. This server answers Azure Resource Graph-style " +
	"queries from a fixed, fictional inventory of ten resources in two fictional subscriptions (" +
	SubscriptionProd + ", " + SubscriptionDev + "). It never contacts Azure or any other cloud; " +
	"its answers describe no real resources. It understands a small KQL subset: the Resources " +
	"table, | where with ==, !=, =~, !~, in, in~, isempty(), isnotempty() joined by and, and " +
	"| project of columns or dotted properties such as tags.owner. Anything else is an error."

// QueryInput is the arguments of both tools, as in the specification's Resource Graph tools.
type QueryInput struct {
	Query         string   `json:"query" jsonschema:"a query in the demo's KQL subset, e.g. Resources | where isempty(tags.owner) | project name"`
	Subscriptions []string `json:"subscriptions,omitempty" jsonschema:"subscription ids to search; empty means both demo subscriptions"`
}

// ValidateOutput is validate_query's answer for a query the demo can run.
type ValidateOutput struct {
	Valid bool `json:"valid"`
}

// ExecuteOutput is execute_query's answer: Count rows in Data (never null).
type ExecuteOutput struct {
	Count int   `json:"count"`
	Data  []Row `json:"data"`
}

// NewServer returns the demo MCP server with validate_query and execute_query. Both take
// QueryInput; a query outside the KQL subset of Parse, or a subscription that is not one of
// the two demo subscriptions, is a tool error naming the problem (never an empty result).
func NewServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{
		Name:    ServerName,
		Title:   "rbook demo inventory (fictional data)",
		Version: "1",
	}, &mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	closedWorld := false
	annotations := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closedWorld}
	mcp.AddTool(server, &mcp.Tool{
		Name: ToolValidateQuery,
		Description: "Checks that a query is in the demo's KQL subset and can run against the fixed, " +
			"fictional demo inventory. Never touches a real cloud. Answers {\"valid\": true} or a tool error.",
		Annotations: annotations,
	}, validateQuery)
	mcp.AddTool(server, &mcp.Tool{
		Name: ToolExecuteQuery,
		Description: "Runs a query in the demo's KQL subset against the fixed, fictional demo inventory " +
			"(ten made-up resources). Never touches a real cloud. Answers {\"count\": N, \"data\": [rows]}.",
		Annotations: annotations,
	}, executeQuery)
	return server
}

// RunStdio serves NewServer over stdin/stdout until the client closes stdin (nil) or ctx ends
// (ctx's error). Other transport errors are returned.
func RunStdio(ctx context.Context) error {
	return demostdio.Run(ctx, NewServer())
}

func validateQuery(_ context.Context, _ *mcp.CallToolRequest, in QueryInput) (*mcp.CallToolResult, ValidateOutput, error) {
	if _, _, err := compile(in); err != nil {
		return nil, ValidateOutput{}, err
	}
	return nil, ValidateOutput{Valid: true}, nil
}

func executeQuery(_ context.Context, _ *mcp.CallToolRequest, in QueryInput) (*mcp.CallToolResult, ExecuteOutput, error) {
	q, inScope, err := compile(in)
	if err != nil {
		return nil, ExecuteOutput{}, err
	}
	var rows []Row
	for _, r := range Resources() {
		if inScope(r["subscriptionId"].(string)) {
			rows = append(rows, r)
		}
	}
	rows = q.Run(rows)
	if rows == nil {
		rows = []Row{}
	}
	return nil, ExecuteOutput{Count: len(rows), Data: rows}, nil
}

// compile parses the query and checks the subscriptions (case-insensitively, as ARG does);
// inScope reports whether a subscription is searched.
func compile(in QueryInput) (*Query, func(string) bool, error) {
	known := []string{SubscriptionProd, SubscriptionDev}
	for _, sub := range in.Subscriptions {
		if !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, sub) }) {
			return nil, nil, fmt.Errorf("subscription %q is not in the demo inventory (it has %s)", sub, strings.Join(known, ", "))
		}
	}
	q, err := Parse(in.Query)
	if err != nil {
		return nil, nil, fmt.Errorf("query not supported by the demo inventory: %w", err)
	}
	inScope := func(sub string) bool {
		return len(in.Subscriptions) == 0 || slices.ContainsFunc(in.Subscriptions, func(s string) bool { return strings.EqualFold(s, sub) })
	}
	return q, inScope, nil
}
