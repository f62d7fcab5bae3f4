// Package buildinfo is what rbook says of its own build: the module version (or the one set
// with -ldflags), the VCS revision and whether the tree was modified, and the toolchain, read
// from runtime/debug.BuildInfo. A build without VCS information (-buildvcs=false, as the
// container image's) can be told its revision at link time: RevisionLDFlag.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// RevisionLDFlag is the -X linker flag's symbol that stamps the VCS revision into a build
// without VCS information: go build -ldflags "-X <RevisionLDFlag>=<40-hex commit>" (what
// scripts/image.sh does with the revision of the image's org.opencontainers.image.revision
// label; docs/deploy.md, "The container image").
const RevisionLDFlag = "github.com/rbookhq/rbook-action/internal/buildinfo.revision"

// revision is set by the linker (RevisionLDFlag); "" when not stamped.
var revision string

// Version describes a binary from its build info.
type Version struct {
	// Version is the -ldflags version when set, else the main module's version: a tag or
	// pseudo-version for `go install …@v…` and (Go 1.24+) `go build` in a git checkout,
	// "(devel)" for `go run` and builds without VCS information.
	Version string
	// Module is the main module path.
	Module string
	// Revision is vcs.revision, else the revision stamped with RevisionLDFlag; "" when the
	// build has neither (go run, -buildvcs=false, a source tree outside git).
	Revision string
	// Time is vcs.time; Modified is vcs.modified=true (uncommitted changes at build time).
	Time     string
	Modified bool
	// Go is the toolchain, e.g. go1.26.0.
	Go string
}

// Read reads the running binary's build info; ldflag is the version set with -ldflags -X
// (main.version; "" or "dev" for none).
func Read(ldflag string) Version {
	bi, ok := debug.ReadBuildInfo()
	return From(bi, ok, ldflag)
}

// From is Read on given build info (ok=false: none available). The build info's
// vcs.revision wins over a stamped revision.
func From(bi *debug.BuildInfo, ok bool, ldflag string) Version {
	v := Version{Version: "(devel)", Go: runtime.Version()}
	if ok && bi != nil {
		v.Module, v.Go = bi.Main.Path, bi.GoVersion
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Revision == "" {
		v.Revision = revision
	}
	if ldflag != "" && ldflag != "dev" {
		v.Version = ldflag
	}
	return v
}

// String is the output of `rbook version`: the version line, the revision line, the toolchain.
func (v Version) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rbook %s", v.Version)
	if v.Module != "" {
		fmt.Fprintf(&b, " (module %s)", v.Module)
	}
	b.WriteString("\n")
	switch {
	case v.Revision == "":
		b.WriteString("revision unknown: built without VCS information (go run, -buildvcs=false, or outside a git checkout)\n")
	default:
		fmt.Fprintf(&b, "revision %s", v.Revision)
		var extra []string
		if v.Time != "" {
			extra = append(extra, "committed "+v.Time)
		}
		if v.Modified {
			extra = append(extra, "with uncommitted changes")
		}
		if len(extra) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(extra, ", "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "built with %s for %s/%s\n", v.Go, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// Line is the one line `rbook --version` prints: "rbook VERSION (REVISION12[+modified])".
func (v Version) Line() string {
	line := "rbook " + v.Version
	if v.Revision != "" {
		line += " (" + shortRevision(v.Revision)
		if v.Modified {
			line += "+modified"
		}
		line += ")"
	}
	return line
}

// shortRevision is a revision cut to 12 characters.
func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
