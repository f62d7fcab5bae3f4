//go:build unix

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// nodeBin finds node, or skips the test saying how to get it.
func nodeBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: install Node.js 24 to run the Action shim tests")
	}
	return p
}

// The shim's own tests (node:test, against a local release server: bad
// checksum and missing entry refused, cache hit without a request, redirect followed,
// SIGINT/SIGTERM forwarded, exit code passed through, inputs verbatim).
func TestShimNodeTestSuitePasses(t *testing.T) {
	skipShort(t)
	node := nodeBin(t)
	cmd := exec.Command(node, "--test", filepath.Join("..", "..", "..", "action", "shim", "shim.test.js"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test action/shim/shim.test.js: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^(# |ℹ )pass \d+$`).Match(out) || !regexp.MustCompile(`(?m)^(# |ℹ )fail 0$`).Match(out) {
		t.Fatalf("node --test: no pass/fail summary:\n%s", out)
	}
}

// fakeRelease is the Action as a runner checks it out plus GitHub's release download for it:
// the real rbook packed by .ci/release for this OS/arch under version, an action folder
// (action/shim/*.js and the release.json .ci/release wrote) and a local server that redirects
// /owner/repo/releases/download/<version>/<archive> to the asset, as github.com does.
type fakeRelease struct {
	root, version, actionDir, url string
	mu                            sync.Mutex
	requests                      []string
}

func newFakeRelease(t testing.TB) *fakeRelease {
	t.Helper()
	fr := &fakeRelease{root: t.TempDir(), version: "v0.0.0-shimtest"}
	root, version := fr.root, fr.version
	dist := filepath.Join(root, "dist")
	target := runtime.GOOS + "/" + runtime.GOARCH
	pack := exec.Command("go", "run", "./.ci/release", "-version", version, "-out", dist, "-targets", target, "-bin", rbookBin)
	pack.Dir = filepath.Join("..", "..", "..")
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("go run ./.ci/release: %v\n%s", err, out)
	}
	fr.actionDir = filepath.Join(root, "action-repo")
	actionDir := fr.actionDir
	os.MkdirAll(filepath.Join(actionDir, "action", "shim"), 0o755)
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(to, data, 0o644)
	}
	for _, f := range []string{"lib.js", "main.js", "post.js"} {
		copyFile(filepath.Join("..", "..", "..", "action", "shim", f), filepath.Join(actionDir, "action", "shim", f))
	}
	copyFile(filepath.Join(dist, "release.json"), filepath.Join(actionDir, "action", "shim", "release.json"))
	name := "rbook_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fr.mu.Lock()
		fr.requests = append(fr.requests, r.URL.Path)
		fr.mu.Unlock()
		switch r.URL.Path {
		case "/owner/repo/releases/download/" + version + "/" + name:
			http.Redirect(w, r, "/asset/"+name, http.StatusFound)
		case "/asset/" + name:
			http.ServeFile(w, r, filepath.Join(dist, name))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	fr.url = srv.URL
	return fr
}

// env is a simulated runner's environment for the Action at this release: the GITHUB_*
// file commands under the release's folder, the tool cache, and the given INPUT_* pairs.
func (fr *fakeRelease) env(inputs ...string) []string {
	env := append(os.Environ(), "GITHUB_ACTIONS=true", "RBOOK_CONTROL_PLANE=", "RBOOK_TOKEN=", "GITHUB_STATE="+fr.path("github_state"),
		"GITHUB_OUTPUT="+fr.path("github_output"), "GITHUB_STEP_SUMMARY="+fr.path("summary.md"),
		"GITHUB_SERVER_URL="+fr.url, "GITHUB_ACTION_REPOSITORY=owner/repo", "GITHUB_ACTION_REF="+fr.version, "GITHUB_ACTION_PATH="+fr.actionDir,
		"RUNNER_TOOL_CACHE="+fr.path("toolcache"), "RUNNER_TEMP="+fr.root, "INPUT_BUILD-FROM-SOURCE=false")
	return append(env, inputs...)
}

// path is a file of the simulated runner.
func (fr *fakeRelease) path(name string) string { return filepath.Join(fr.root, name) }

// entry is the path of one of the Action's entry points ("main.js", "post.js").
func (fr *fakeRelease) entry(name string) string {
	return filepath.Join(fr.actionDir, "action", "shim", name)
}

// postEnv is env plus main's saved GITHUB_STATE as STATE_<name>, as the runner passes it to post.
func (fr *fakeRelease) postEnv(t *testing.T, env []string) []string {
	t.Helper()
	saved := readFile(t, fr.path("github_state"))
	for _, m := range regexp.MustCompile(`(?m)^(\w+)<<(ghadelimiter_[0-9a-f-]+)\n(.*)\n(ghadelimiter_[0-9a-f-]+)$`).FindAllStringSubmatch(saved, -1) {
		if m[2] != m[4] {
			t.Fatalf("GITHUB_STATE delimiters differ: %q", m[0])
		}
		env = append(env, "STATE_"+m[1]+"="+m[3])
	}
	return env
}

// As a simulated runner: node runs the Action's main.js, which downloads the
// real rbook (packed by .ci/release) from a local release server, checks it against
// release.json and runs the demo against `rbook serve`; SIGINT to node at the gate makes
// rbook record run_interrupted, the control plane withdraws the pending approval, and
// post.js (with the GITHUB_STATE main wrote) runs `rbook github post`, which finds it closed.
func TestShimRunsTheReleaseBinaryAndForwardsSIGINT(t *testing.T) {
	skipShort(t)
	node := nodeBin(t)
	fr := newFakeRelease(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	env := fr.env("INPUT_RUNBOOK=demo", "INPUT_DIR=runbooks", "INPUT_CONTROL-PLANE="+url)
	main := exec.Command(node, fr.entry("main.js"))
	main.Dir, main.Env = dir, env
	pr, pw, _ := os.Pipe()
	main.Stdout, main.Stderr = pw, pw
	if err := main.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { main.Process.Kill() })
	var log strings.Builder
	sc := bufio.NewScanner(pr)
	opened := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), gateOpen) {
			opened = true
			break
		}
	}
	if !opened {
		main.Wait()
		t.Fatalf("the gate never opened:\n%s", log.String())
	}
	if err := main.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	err := main.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("main.js after SIGINT: %v (want exit 1, rbook's)\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "downloaded and verified (SHA-256 ") {
		t.Errorf("main.js did not say it verified the download:\n%s", log.String())
	}
	fr.mu.Lock()
	if len(fr.requests) != 2 {
		t.Errorf("release server requests %v, want the redirect and the asset", fr.requests)
	}
	fr.mu.Unlock()
	s := readState(t, dir)
	if s.Interrupted == nil || !strings.Contains(s.Interrupted.Reason, "interrupted by SIGINT") {
		t.Fatalf("state after SIGINT: %+v\n%s", s.Interrupted, log.String())
	}
	as := approvalsOf(t, url, s.RunID)
	if len(as) != 1 || as[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED || as[0].GetDecidedBySource() != "interrupted" {
		t.Fatalf("approval after SIGINT: %v", as)
	}

	// post.js gets main's saved state as STATE_<name>, as the runner passes it.
	post := exec.Command(node, fr.entry("post.js"))
	post.Env = fr.postEnv(t, env)
	out, err := post.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "run "+s.RunID+" is unfinished and recorded interrupted on the control plane "+url+"; 0 pending approval(s) withdrawn") ||
		!strings.Contains(string(out), "Approval "+as[0].GetApprovalId()+" (gate 'confirm-rollout' of run "+s.RunID+") was withdrawn when the job was interrupted") {
		t.Fatalf("post.js: %v\n%s", err, out)
	}
	resp, gerr := cpclient.New(url, "").Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: s.RunID})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if ts := resp.GetTransitions(); ts[len(ts)-1].GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED {
		t.Fatalf("last transition %v", ts[len(ts)-1])
	}
}

// benchmarkShim runs the Action's main.js to the end of a short rbook run (`rbook run` of a runbook
// that does not exist: rbook starts, says so and exits 2), from a warm tool cache (cold false: the
// first run fills it) or a fresh one per run (cold: download from the local release server, verify,
// unpack). The target is "≤ 1 s from uses: to rbook running when the release binary is cached"
// (docs/development.md, "Benchmarks"). Run: go test -run '^$' -bench Shim ./cmd/rbook/e2e/
func benchmarkShim(b *testing.B, cold bool) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node not found: install Node.js 24 to run the Action shim benchmarks")
	}
	fr := newFakeRelease(b)
	dir := b.TempDir()
	env := fr.env("INPUT_RUNBOOK=no-such-runbook", "INPUT_DIR="+dir)
	job := func(cache string) {
		cmd := exec.Command(node, fr.entry("main.js"))
		cmd.Dir, cmd.Env = dir, append(env, "RUNNER_TOOL_CACHE="+cache)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			b.Fatalf("main.js: %v (want rbook's exit 2 for a missing runbook)\n%s", err, out)
		}
	}
	warm := filepath.Join(fr.root, "warm-cache")
	if !cold {
		job(warm)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if cold {
			job(filepath.Join(fr.root, fmt.Sprintf("cache-%d", i)))
		} else {
			job(warm)
		}
	}
}

// BenchmarkShimCacheHit is main.js with the verified binary in the tool cache.
func BenchmarkShimCacheHit(b *testing.B) { benchmarkShim(b, false) }

// BenchmarkShimColdDownload is main.js downloading, verifying and unpacking the release.
func BenchmarkShimColdDownload(b *testing.B) { benchmarkShim(b, true) }
