package mcp

// ServerPID exposes a stdio session's server pid (its process group id) to the external
// tests, which check that the whole group is gone after Close or ctx cancellation.
func ServerPID(s *Session) int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}
