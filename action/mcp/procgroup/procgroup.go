// Package procgroup runs a command so that stopping it stops everything it started: at a
// step's deadline the whole process group is gone, not only the process rbook started
// (docs/decisions/step-timeouts.md).
//
// On unix the command leads a new process group, which gets SIGTERM and then SIGKILL
// (procgroup_unix.go). On Windows it runs in a Job Object that is terminated as a whole and
// that the system closes, killing the tree, when rbook exits (procgroup_windows.go;
// docs/development.md, "Windows under Wine"). The API is the same on both: Command builds the
// command, Start starts it, Kill kills its tree, AwaitGone waits for it to be gone.
//
// It is a leaf package so that both action/mcp (stdio servers) and action/steps (step
// executors, via steps.GroupCommand) can use it without an import cycle.
package procgroup

import "time"

// DefaultGrace is how long a process group gets between SIGTERM and SIGKILL
// (docs/decisions/step-timeouts.md: SIGTERM, then SIGKILL). On Windows, where there is no SIGTERM, it is only the
// time Wait waits for the command's output pipes after the tree was killed.
const DefaultGrace = 2 * time.Second
