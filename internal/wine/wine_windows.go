//go:build windows

package wine

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Version returns Wine's version ("8.0") and true when the program runs under Wine, and ""
// and false on Windows itself. Wine is recognised by the export only its ntdll.dll has,
// wine_get_version (Wine's documented way for a program to detect it); it is looked up once.
var Version = sync.OnceValues(func() (string, bool) {
	proc := windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version")
	if proc.Find() != nil {
		return "", false
	}
	r, _, _ := proc.Call()
	if r == 0 {
		return "unknown", true
	}
	// r is the address of a static NUL-terminated string in ntdll.dll.
	return windows.BytePtrToString(*(**byte)(unsafe.Pointer(&r))), true
})
