//go:build windows && winetest

package wine

import _ "unsafe" // for go:linkname

// deleteatFallback is the standard library's switch that makes os.RemoveAll delete each
// file with FileDispositionInfo instead of FileDispositionInformationEx (POSIX semantics).
// Wine 8 answers the latter with STATUS_NOT_IMPLEMENTED, which Go does not take for "not
// supported", so every os.RemoveAll of a folder with files in it fails ("Invalid function"),
// and with it the cleanup of every t.TempDir. The fallback is the path Go itself takes on
// Windows versions without POSIX deletes.
//
// Reaching it needs the linker's -checklinkname=0, hence the winetest build tag that only
// .ci/wine sets: a Windows build without the tag never links this.
//
//go:linkname deleteatFallback internal/syscall/windows.TestDeleteatFallback
var deleteatFallback bool

func init() {
	if _, ok := Version(); ok {
		deleteatFallback = true
	}
}
