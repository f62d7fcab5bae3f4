// Command release builds rbook's release archives reproducibly and writes their checksums
// (docs/action.md, "How the Action runs rbook"): for each target (linux, darwin, windows × amd64, arm64) it runs
//
//	CGO_ENABLED=0 GOOS=… GOARCH=… go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=VERSION" -o … ./cmd/rbook
//
// and packs the binary as rbook_VERSION_OS_ARCH.tar.gz with fixed metadata (mtime, owner,
// mode, an empty gzip header), so the same source and Go toolchain give byte-identical
// archives. That lets the checksums be computed and committed in action/shim/release.json
// before tagging, and the release workflow verify that the archives it rebuilt match them
// before uploading (GoReleaser is not needed for this; a plain go build matrix is enough).
//
//	go run ./.ci/release -version v0.7.0 -out dist -write action/shim/release.json   # before tagging
//	go run ./.ci/release -version v0.7.0 -out dist -verify action/shim/release.json  # in the release workflow
//
// -bin FILE packs an existing binary for the one target in -targets instead of building
// (tests). dist/ gets the archives, checksums.txt (sha256sum format) and release.json.
// Exit status: 0 done, 1 a build failed or -verify found a difference, 2 usage.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Targets are the release's GOOS/GOARCH pairs (docs/action.md, "How the Action runs rbook": every runner OS).
var Targets = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}

// ArchiveTime is the modification time of every archive entry: fixed, so archives are
// reproducible (1980-01-01, the earliest time every archive format can hold).
var ArchiveTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Release is action/shim/release.json: the version the Action's shim downloads, the Go
// toolchain that built it (the release workflow installs exactly that one, so its rebuilt
// archives match), each archive's SHA-256 and the SHA-256 of the rbook binary inside it
// (lowercase hex; the shim checks a cached binary against the latter without unpacking).
type Release struct {
	Version  string            `json:"version"`
	Go       string            `json:"go"`
	Archives map[string]string `json:"archives"`
	Binaries map[string]string `json:"binaries"`
}

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

func main() {
	version := flag.String("version", "", "release version, vMAJOR.MINOR.PATCH[-pre] (the tag)")
	out := flag.String("out", "dist", "folder for the archives, checksums.txt and release.json")
	targets := flag.String("targets", strings.Join(Targets, ","), "comma-separated GOOS/GOARCH list")
	bin := flag.String("bin", "", "pack this binary for the single target instead of building")
	write := flag.String("write", "", "also write release.json to this file (action/shim/release.json)")
	verify := flag.String("verify", "", "compare the archives' checksums with this release.json; exit 1 on a difference")
	flag.Parse()
	if !versionRE.MatchString(*version) || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./.ci/release -version vX.Y.Z [-out dist] [-targets os/arch,…] [-bin FILE] [-write FILE | -verify FILE]")
		os.Exit(2)
	}
	ts := strings.Split(*targets, ",")
	if *bin != "" && len(ts) != 1 {
		fmt.Fprintln(os.Stderr, "release: -bin packs one binary: give exactly one -targets entry")
		os.Exit(2)
	}
	rel, err := build(*version, *out, ts, *bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	if *write != "" {
		if err := writeJSON(*write, rel); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s\n", *write)
	}
	if *verify != "" {
		if err := verifyAgainst(*verify, rel); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
		fmt.Printf("the %d archives match the checksums committed in %s\n", len(rel.Archives), *verify)
	}
}

// build builds (or, with bin, packs) every target into out and writes checksums.txt and
// release.json there. Errors: a failed build, an unwritable out.
func build(version, out string, targets []string, bin string) (Release, error) {
	rel := Release{Version: version, Go: runtime.Version(), Archives: map[string]string{}, Binaries: map[string]string{}}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return rel, err
	}
	var sums []string
	for _, t := range targets {
		goos, goarch, ok := strings.Cut(t, "/")
		if !ok || goos == "" || goarch == "" {
			return rel, fmt.Errorf("target %q: want GOOS/GOARCH", t)
		}
		exe := "rbook"
		if goos == "windows" {
			exe += ".exe"
		}
		src := bin
		if src == "" {
			src = filepath.Join(out, "build", goos+"_"+goarch, exe)
			cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -X main.version="+version, "-o", src, "./cmd/rbook")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return rel, fmt.Errorf("go build for %s: %w", t, err)
			}
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return rel, err
		}
		archive, err := Pack(exe, data)
		if err != nil {
			return rel, err
		}
		name := fmt.Sprintf("rbook_%s_%s_%s.tar.gz", version, goos, goarch)
		if err := os.WriteFile(filepath.Join(out, name), archive, 0o644); err != nil {
			return rel, err
		}
		sum := sha256.Sum256(archive)
		rel.Archives[name] = hex.EncodeToString(sum[:])
		binSum := sha256.Sum256(data)
		rel.Binaries[name] = hex.EncodeToString(binSum[:])
		sums = append(sums, rel.Archives[name]+"  "+name)
		fmt.Printf("%s  %s\n", rel.Archives[name], name)
	}
	if bin == "" {
		os.RemoveAll(filepath.Join(out, "build"))
	}
	slices.Sort(sums)
	if err := os.WriteFile(filepath.Join(out, "checksums.txt"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return rel, err
	}
	return rel, writeJSON(filepath.Join(out, "release.json"), rel)
}

// Pack returns a .tar.gz holding one regular file, name (mode 0755), with fixed metadata:
// ArchiveTime, uid/gid 0, no owner names, USTAR format, and a gzip header without name or
// time — the same bytes for the same content, on any machine.
func Pack(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	h := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: ArchiveTime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeJSON writes rel as indented JSON (keys sorted: encoding/json sorts map keys).
func writeJSON(path string, rel Release) error {
	data, err := json.MarshalIndent(rel, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// verifyAgainst compares rel with the committed release.json at path: same version, same Go
// toolchain, and every archive with the same checksum. It returns an error listing each
// difference.
func verifyAgainst(path string, rel Release) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var want Release
	if err := json.Unmarshal(data, &want); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var diffs []string
	if want.Version != rel.Version {
		diffs = append(diffs, fmt.Sprintf("version: committed %q, built %q", want.Version, rel.Version))
	}
	if want.Go != rel.Go {
		diffs = append(diffs, fmt.Sprintf("go: committed %q, built with %q (install that toolchain)", want.Go, rel.Go))
	}
	for name, sum := range rel.Archives {
		if want.Archives[name] != sum {
			diffs = append(diffs, fmt.Sprintf("%s: committed %q, built %s", name, want.Archives[name], sum))
		}
	}
	for name, sum := range rel.Binaries {
		if want.Binaries[name] != sum {
			diffs = append(diffs, fmt.Sprintf("%s: committed binary checksum %q, built %s", name, want.Binaries[name], sum))
		}
	}
	for name := range want.Archives {
		if _, ok := rel.Archives[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: committed but not built", name))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return fmt.Errorf("the rebuilt archives do not match %s:\n  %s", path, strings.Join(diffs, "\n  "))
	}
	return nil
}
