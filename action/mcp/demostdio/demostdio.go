// Package demostdio serves one of rbook's demo MCP servers (demoinventory, demorelease) over
// stdin/stdout: the one RunStdio rule both demos share.
package demostdio

import (
	"context"
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Run serves server over stdin/stdout until the client closes stdin (nil) or ctx ends (ctx's
// error). Other transport errors are returned.
func Run(ctx context.Context, server *mcp.Server) error {
	err := server.Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed)) {
		return nil
	}
	return err
}
