//go:build !linux

package procgroup

// HideEnvironment does nothing here: macOS and Windows have no per-process switch that keeps
// a process of the same user from reading another's environment (docs/decisions/mcp-config.md,
// "Environment" says what that leaves open). It returns nil.
func HideEnvironment() error { return nil }
