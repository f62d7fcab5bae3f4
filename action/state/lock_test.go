package state

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// lockHolderEnv makes the re-executed test binary a lock holder: it takes the lock of the
// state file named by the variable, prints "locked <pid>" and holds it until its standard
// input closes or it is killed.
const lockHolderEnv = "RBOOK_STATE_TEST_LOCK_HOLDER"

// TestMain runs a child process when the environment asks for one (a lock holder, or the
// killed executor of TestJournalSurvivesKillBetweenAppendAndStateWrite), the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killEnv); dir != "" {
		os.Exit(recordUntilKilled(dir, os.Getenv(killSeqEnv)))
	}
	p := os.Getenv(lockHolderEnv)
	if p == "" {
		os.Exit(m.Run())
	}
	l, err := Acquire(p, "run")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("locked %d\n", os.Getpid())
	io.Copy(io.Discard, os.Stdin)
	l.Release()
	os.Exit(0)
}

// startHolder starts another process that holds the lock of statePath and returns it once
// it has said so.
func startHolder(t *testing.T, statePath string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+statePath)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if want := fmt.Sprintf("locked %d\n", cmd.Process.Pid); err != nil || line != want {
		t.Fatalf("holder said %q (%v), want %q", line, err, want)
	}
	return cmd
}

// The "who holds it" answer comes from the holder's record, not /proc: a
// contender and a probe are told the other process's pid, host and role.
func TestHeldByAnotherProcessNamesItsPID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	holder := startHolder(t, p)
	host, _ := os.Hostname()

	_, err := Acquire(p, "run")
	var he *HeldError
	if !errors.As(err, &he) {
		t.Fatalf("Acquire while another process holds the run: %v, want *HeldError", err)
	}
	if he.Holder.PID != holder.Process.Pid || he.Holder.Host != host || he.Holder.Role != "run" || he.Holder.SinceUTC == "" {
		t.Errorf("HeldError holder %+v, want pid %d on %s, role run", he.Holder, holder.Process.Pid, host)
	}
	if want := fmt.Sprintf("held by another executor (run, pid %d on %s since ", holder.Process.Pid, host); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
	held, h, err := Probe(p)
	if err != nil || !held || h.PID != holder.Process.Pid {
		t.Errorf("Probe = %v, %+v, %v; want held by pid %d", held, h, err, holder.Process.Pid)
	}
}

// A holder killed without releasing leaves its record in the lock file;
// that stale record is ignored, by Probe and by Acquire, because the lock itself is free.
func TestStaleHolderRecordIgnored(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	holder := startHolder(t, p)
	pid := holder.Process.Pid
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.Wait()
	if stale, err := readHolder(LockPath(p)); err != nil || stale.PID != pid {
		t.Fatalf("the killed holder's record: %+v, %v; want pid %d left behind", stale, err, pid)
	}
	if held, h, err := Probe(p); err != nil || held || h != (Holder{}) {
		t.Errorf("Probe after the holder died = %v, %+v, %v; want not held, no holder", held, h, err)
	}
	l, err := Acquire(p, "run")
	if err != nil {
		t.Fatalf("Acquire over a stale record: %v", err)
	}
	defer l.Release()
	if h, err := readHolder(LockPath(p)); err != nil || h.PID != os.Getpid() {
		t.Errorf("record after Acquire: %+v, %v; want this process, pid %d", h, err, os.Getpid())
	}
}

// Probe takes the lock for an instant; an executor acquiring at the same
// moment waits out LockRetryWindow instead of taking the prober for a holder.
func TestProbeNeverMakesAcquireFail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	var stop atomic.Bool
	var wg sync.WaitGroup
	var probes atomic.Int64
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				if _, _, err := Probe(p); err != nil {
					t.Errorf("Probe: %v", err)
					return
				}
				probes.Add(1)
			}
		})
	}
	for i := range 200 {
		l, err := Acquire(p, "run")
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("Acquire %d with probes running: %v", i, err)
		}
		l.Release()
	}
	stop.Store(true)
	wg.Wait()
	if probes.Load() == 0 {
		t.Fatal("no probe ran; the test proves nothing")
	}
}

// A lock file holding more than MaxHolderBytes is read only up to the cap.
func TestHolderRecordCapped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json.lock")
	big := `{"pid": 7, "host": "` + strings.Repeat("h", MaxHolderBytes) + `"}`
	if err := os.WriteFile(p, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := readHolder(p); err == nil || h.PID != 0 {
		t.Errorf("readHolder of a %d-byte record = %+v, %v; want a decode error past the %d-byte cap", len(big), h, err, MaxHolderBytes)
	}
	small := `{"pid": 7, "host": "h", "role": "run"}`
	if err := os.WriteFile(p, []byte(strings.Repeat("\x00", recordOffset)+small), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := readHolder(p); err != nil || h.PID != 7 || h.Role != "run" {
		t.Errorf("readHolder of a small record = %+v, %v", h, err)
	}
}
