//go:build linux

package e2e

// End-to-end tests of the control-plane container image (deploy/container/Containerfile,
// docs/deploy.md): built with scripts/image.sh, run with podman as an operator would.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

const (
	imageExecToken     = "image-exec-token-0123456789"
	imageApproverToken = "image-approver-token-0123456789"
)

// podman runs podman as scripts/podman-env.sh does (runc, cgroupfs, a containers.conf
// without default ulimits; $RBOOK_PODMAN_FLAGS replaces the global flags) and returns its
// combined output and error.
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := podmanCmd(t, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func podmanCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	global := strings.Fields("--runtime runc --cgroup-manager cgroupfs")
	if f, ok := os.LookupEnv("RBOOK_PODMAN_FLAGS"); ok {
		global = strings.Fields(f)
	}
	cmd := exec.Command("podman", append(global, args...)...)
	cmd.Env = os.Environ()
	if os.Getenv("CONTAINERS_CONF") == "" {
		conf := filepath.Join(t.TempDir(), "containers.conf")
		if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "CONTAINERS_CONF="+conf)
	}
	return cmd
}

// testImage is the image under test: $RBOOK_TEST_IMAGE, else one scripts/image.sh builds
// now. It skips the test when podman is missing or cannot run a container here.
func testImage(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (Debian: apt-get install podman runc): the image is not built or run")
	}
	image := os.Getenv("RBOOK_TEST_IMAGE")
	if image == "" {
		t.Log("building the image with scripts/image.sh (set RBOOK_TEST_IMAGE to use one already built)")
		cmd := exec.Command("bash", filepath.Join("..", "..", "..", "scripts", "image.sh"), "--tag", "e2e")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scripts/image.sh: %v\n%s", err, stderr.String())
		}
		image = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	probe := podmanCmd(t, "run", "--rm", "--no-healthcheck", "--entrypoint", "/rbook", image, "version")
	var stderr strings.Builder
	probe.Stderr = &stderr
	if out, err := probe.Output(); err != nil || !strings.HasPrefix(string(out), "rbook ") {
		t.Skipf("podman cannot run a container here (podman run %s version: %v): %s%s", image, err, out, stderr.String())
	}
	return image
}

// imageContainer is one running container of the image.
type imageContainer struct {
	name, url string
}

// runImage starts a container of image on volume with an auth file and the approval
// secret, waits for its server's "listening on" line and returns it; the test's cleanup
// removes it.
func runImage(t *testing.T, image, volume, authFile string) imageContainer {
	t.Helper()
	name := fmt.Sprintf("rbook-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "0", name) })
	out, err := podman(t, "run", "-d", "--name", name, "-p", "127.0.0.1::7070",
		"-v", volume+":/var/lib/rbook", "-v", authFile+":/etc/rbook/auth.txt:ro",
		"-e", "RBOOK_APPROVAL_SECRET="+testSecret, "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		image, "--addr", "0.0.0.0:7070", "--db", "/var/lib/rbook/controlplane.db", "--auth-file", "/etc/rbook/auth.txt")
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	logs := podmanCmd(t, "logs", "-f", name)
	pr, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs.Stderr = logs.Stdout
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { logs.Process.Kill(); logs.Wait() }()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		var seen strings.Builder
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "rbook control plane listening on") {
				listening <- ""
				return
			}
		}
		listening <- seen.String()
	}()
	select {
	case rest := <-listening:
		if rest != "" {
			t.Fatalf("the container's server ended before it listened:\n%s", rest)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the container's server did not say it was listening within 60s")
	}
	port, err := podman(t, "port", name, "7070/tcp")
	if err != nil {
		t.Fatalf("podman port: %v\n%s", err, port)
	}
	hostPort := strings.TrimSpace(strings.SplitN(port, "\n", 2)[0])
	return imageContainer{name: name, url: "http://" + strings.Replace(hostPort, "0.0.0.0", "127.0.0.1", 1)}
}

// TestImageKeepsItsRunsWhenTheContainerIsReplaced: the image's server, run read-only as
// user 65532 without capabilities, passes its own health check, records a demo run
// reported from the host whose gate another identity approves, stops with exit 0 on
// SIGTERM, and a new container on the same volume (the upgrade of docs/deploy.md,
// "Upgrading") serves the same run again.
func TestImageKeepsItsRunsWhenTheContainerIsReplaced(t *testing.T) {
	skipShort(t)
	image := testImage(t)
	dir := workdir(t)
	authFile := filepath.Join(dir, "auth.txt")
	// Readable by the image's user: test tokens only.
	if err := os.WriteFile(authFile, []byte("ci-executor executor "+imageExecToken+"\nci-approver approver "+imageApproverToken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	volume := fmt.Sprintf("rbook-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	if out, err := podman(t, "volume", "create", volume); err != nil {
		t.Fatalf("podman volume create: %v\n%s", err, out)
	}
	t.Cleanup(func() { podman(t, "volume", "rm", "-f", volume) })

	first := runImage(t, image, volume, authFile)
	if out, err := podman(t, "healthcheck", "run", first.name); err != nil {
		t.Fatalf("podman healthcheck run (/rbook admin health in the container): %v\n%s", err, out)
	}
	if out, _ := podman(t, "inspect", "-f", "{{.Config.User}}", first.name); strings.TrimSpace(out) != "65532:65532" {
		t.Fatalf("the container runs as %q, want 65532:65532", strings.TrimSpace(out))
	}

	t.Setenv("RBOOK_TOKEN", imageExecToken)
	p := start(t, dir, "run", "demo", "--control-plane", first.url)
	id := approvalIDFrom(t, p)
	if out, code := runAs(t, dir, imageApproverToken, "approve", id, "--control-plane", first.url, "--reason", "image e2e"); code != 0 {
		t.Fatalf("rbook approve: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("rbook run demo against the container: exit %d\n%s", code, p.output())
	}
	runID := readState(t, dir).RunID

	if out, err := podman(t, "stop", "-t", "30", first.name); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, out)
	}
	if out, _ := podman(t, "inspect", "-f", "{{.State.ExitCode}}", first.name); strings.TrimSpace(out) != "0" {
		t.Fatalf("rbook serve in the container exited %s on SIGTERM, want 0", strings.TrimSpace(out))
	}
	if os.Getuid() == 0 {
		// Rootful podman: the volume's files carry the container's own ids.
		mount, _ := podman(t, "volume", "inspect", "-f", "{{.Mountpoint}}", volume)
		info, err := os.Stat(filepath.Join(strings.TrimSpace(mount), "controlplane.db"))
		if err != nil {
			t.Fatalf("the database is not in the volume: %v", err)
		}
		if uid := info.Sys().(*syscall.Stat_t).Uid; uid != 65532 {
			t.Errorf("controlplane.db is owned by uid %d, want 65532 (the image's user)", uid)
		}
	}
	podman(t, "rm", first.name)

	second := runImage(t, image, volume, authFile)
	if out, err := podman(t, "healthcheck", "run", second.name); err != nil {
		t.Fatalf("podman healthcheck run on the replacement: %v\n%s", err, out)
	}
	resp, err := cpclient.New(second.url, imageApproverToken).Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatalf("GetRun %s on the replacement container: %v", runID, err)
	}
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}
