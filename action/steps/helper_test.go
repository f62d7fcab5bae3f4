package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/mcp/demorelease"
)

// helperModeEnv makes the re-executed test binary act as a helper process instead of running
// tests: "argv" prints {"argv": os.Args[1:], "env": $HOSTILE, "cwd": working folder} as JSON;
// "environ" prints {"environ": os.Environ()}; "demo-release" serves the demo release MCP server over stdio; "one-tool" serves an MCP
// server with the single tool "wait", which blocks until the call is cancelled. Started with
// the arguments "mcp demo-release" (as the shipped configs do), it is the demo release server.
const helperModeEnv = "RBOOK_STEPS_TEST_HELPER"

func TestMain(m *testing.M) {
	mode := os.Getenv(helperModeEnv)
	if len(os.Args) == 3 && os.Args[1] == "mcp" && os.Args[2] == "demo-release" {
		// The shipped runbooks/*.mcp.json start "rbook mcp demo-release"; "rbook" is
		// os.Executable, this test binary, which stands in for rbook's subcommand.
		mode = "demo-release"
	}
	switch mode {
	case "":
		os.Exit(m.Run())
	case "argv":
		cwd, _ := os.Getwd()
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"argv": os.Args[1:], "env": os.Getenv("HOSTILE"), "cwd": cwd})
		os.Exit(0)
	case "environ":
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"environ": os.Environ()})
		os.Exit(0)
	case "demo-release":
		if err := demorelease.RunStdio(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "demo-release:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "one-tool":
		server := sdk.NewServer(&sdk.Implementation{Name: "one-tool", Version: "1"}, nil)
		sdk.AddTool(server, &sdk.Tool{Name: "wait", Description: "test: blocks until the call is cancelled"},
			func(ctx context.Context, _ *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, map[string]any, error) {
				<-ctx.Done()
				return nil, nil, ctx.Err()
			})
		if err := server.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "unknown", helperModeEnv)
		os.Exit(2)
	}
}
