//go:build !windows

package wine

// Version returns "" and false: only a Windows build can run under Wine.
func Version() (string, bool) { return "", false }
