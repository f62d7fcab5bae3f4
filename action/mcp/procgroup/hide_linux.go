package procgroup

import "golang.org/x/sys/unix"

// HideEnvironment keeps processes of the same user — a node's command, an MCP server, anything
// they start — from reading this process's memory and the environment it started with
// (/proc/<pid>/environ, where Environ's filtering does not reach): it marks the process not
// dumpable (prctl PR_SET_DUMPABLE 0), so both need CAP_SYS_PTRACE from then on, as ssh-agent
// does for its keys. It also turns off core dumps of rbook. A process rbook starts is
// dumpable again from its exec, so nothing it does changes. Errors: prctl's.
// docs/decisions/mcp-config.md, "Environment".
func HideEnvironment() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
