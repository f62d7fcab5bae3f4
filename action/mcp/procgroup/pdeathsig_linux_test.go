package procgroup

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the re-executed test binary start a group leader, print its pid and wait
// to be killed.
const helperEnv = "RBOOK_PROCGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "start-and-wait":
	case "read-parent-environ", "hide-then-read-parent-environ":
		readParentEnviron(os.Getenv(helperEnv) == "hide-then-read-parent-environ")
	default:
		os.Exit(m.Run())
	}
	cmd := Command(context.Background(), 0, "sleep", "60")
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(cmd.Process.Pid)
	_ = cmd.Wait() // until the test kills this process
	os.Exit(0)
}

// TestKilledParentTakesLeaderAlong: when the process that started a Command dies by SIGKILL
// (no cleanup runs), the kernel kills the command's leader too (Pdeathsig).
func TestKilledParentTakesLeaderAlong(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), helperEnv+"=start-and-wait")
	parent.Stderr = os.Stderr
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("reading the child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	if err := AwaitGone(pid, 10*time.Second); err != nil {
		t.Fatalf("the leader outlived its killed parent: %v", err)
	}
}
