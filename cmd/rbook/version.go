package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion describes a binary from its build info (issue 6, item 3.4).
type buildVersion struct {
	// Version is the -ldflags version when set, else the main module's version: a tag or
	// pseudo-version for `go install …@v…` and (Go 1.24+) `go build` in a git checkout,
	// "(devel)" for `go run` and builds without VCS information.
	Version string
	// Module is the main module path.
	Module string
	// Revision is vcs.revision, "" when the build has no VCS information (go run,
	// -buildvcs=false, a source tree outside git).
	Revision string
	// Time is vcs.time; Modified is vcs.modified=true (uncommitted changes at build time).
	Time     string
	Modified bool
	// Go is the toolchain, e.g. go1.26.0.
	Go string
}

// readBuildVersion reads the running binary's build info; ldflag is main.version.
func readBuildVersion(ldflag string) buildVersion {
	bi, ok := debug.ReadBuildInfo()
	return versionFrom(bi, ok, ldflag)
}

// versionFrom is readBuildVersion on given build info (ok=false: none available).
func versionFrom(bi *debug.BuildInfo, ok bool, ldflag string) buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version()}
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
	if ldflag != "" && ldflag != "dev" {
		v.Version = ldflag
	}
	return v
}

// String is the output of `rbook version`: the version line, the revision line, the toolchain.
func (v buildVersion) String() string {
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

// versionLine is the one line `rbook --version` prints.
func versionLine() string {
	v := readBuildVersion(version)
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

func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print rbook's version, VCS revision and toolchain",
		Long: `Print the version of this rbook binary: the module version (a release tag, or a
pseudo-version such as v0.0.0-20260512103000-a1b2c3d4e5f6 for a build from a git checkout;
"(devel)" under 'go run'), the VCS revision it was built from and whether the tree had
uncommitted changes, and the Go toolchain. A build without VCS information ('go run',
'go build -buildvcs=false') says that its revision is unknown.

Exit codes: 0 always (2 for a usage error).`,
		Example: `  rbook version
  rbook --version                      # the first line only, shorter`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), readBuildVersion(version).String())
			return nil
		},
	}
}
