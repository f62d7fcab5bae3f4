package steps

import (
	"context"
	"os/exec"
	"time"

	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
)

// KillGrace is the time a step's process group gets between SIGTERM and SIGKILL when the
// step's deadline passes or the run is stopped (docs/decisions/step-timeouts.md).
const KillGrace = procgroup.DefaultGrace

// GroupCommand returns an unstarted command that runs in its own process group. When ctx
// ends (step deadline, cancel, signal), the whole group gets SIGTERM, then SIGKILL grace later,
// so children that ignore SIGTERM do not survive the step (docs/decisions/step-timeouts.md).
// grace <= 0 means KillGrace. The MCP stdio transport uses the same helper (action/mcp).
// On Windows the tree is a Job Object instead (procgroup; docs/development.md, "Windows under
// Wine"), and the command must be started with StartGroup.
func GroupCommand(ctx context.Context, grace time.Duration, name string, args ...string) *exec.Cmd {
	return procgroup.Command(ctx, grace, name, args...)
}

// StartGroup starts a GroupCommand (on Windows, inside its Job Object; procgroup.Start).
func StartGroup(cmd *exec.Cmd) error { return procgroup.Start(cmd) }

// KillGroup sends SIGKILL to the process group of a started GroupCommand. It returns nil when
// the command never started or its group is already gone, and the kill(2) error otherwise.
func KillGroup(cmd *exec.Cmd) error { return procgroup.Kill(cmd) }
