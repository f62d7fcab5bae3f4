// Command bcryptshim writes bcryptprimitives.dll for a Wine prefix whose Wine predates that
// DLL (Debian 12's Wine 8.0; Wine ships it from 9.0 on). Go's Windows runtime loads
// bcryptprimitives.dll!ProcessPrng at start-up and stops with "bcryptprimitives.dll not
// found" without it, so no Go program runs under such a Wine until the DLL is there.
//
// Usage:
//
//	go run ./internal/wine/bcryptshim DIR    # writes DIR/bcryptprimitives.dll
//
// DIR is the prefix's drive_c/windows/system32. The DLL holds no code: its only export,
// ProcessPrng, is forwarded to advapi32.SystemFunction036 (RtlGenRandom), which takes the
// same two arguments (buffer, length) and returns non-zero on success, as ProcessPrng does.
// .ci/wine runs it; docs/development.md, section "Windows under Wine", says why.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bcryptshim DIR  (the Wine prefix's drive_c/windows/system32)")
		os.Exit(2)
	}
	path := filepath.Join(os.Args[1], dllName)
	if err := os.WriteFile(path, forwardingDLL(dllName, exportName, forwardTo), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "bcryptshim: %v (is %s the prefix's system32 directory?)\n", err, os.Args[1])
		os.Exit(1)
	}
}
