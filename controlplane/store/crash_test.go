package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const (
	crashChildEnv = "RBOOK_STORE_CRASH_CHILD"
	crashRuns     = 8
)

// TestCrashChild is the child half of TestCrashSafetyKill9: it records transitions on
// crashRuns runs as fast as it can and prints "ack RUN SEQ" after each acknowledged one,
// until it is killed. It does nothing unless started by the parent.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("child process of TestCrashSafetyKill9")
	}
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for r := 0; r < crashRuns; r++ {
		run := fmt.Sprintf("crash-%d", r)
		if _, _, err := s.StartRun(ctx, newRun(run)); err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			os.Exit(2)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(1); ; seq++ {
				if _, err := s.RecordTransition(ctx, tr(run, seq), fence1); err != nil {
					fmt.Fprintln(os.Stderr, "record:", err)
					os.Exit(2)
				}
				line := fmt.Sprintf("ack %s %d\n", run, seq)
				out.Lock()
				os.Stdout.WriteString(line) // one write(2) per line: a printed ack is a whole line
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

// Crash safety (docs/decisions/durability.md): a writer process is killed with SIGKILL in the
// middle of group commits; after reopening, every transition it acknowledged is stored, each run's
// transitions are contiguous from 1, and the database passes integrity_check.
func TestCrashSafetyKill9(t *testing.T) {
	t.Parallel()
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("running as the child")
	}
	for round, killAfter := range []int{100, 500} {
		t.Run(fmt.Sprintf("kill-after-%d-acks", killAfter), func(t *testing.T) {
			// On PostgreSQL (RBOOK_TEST_STORE=postgres) the killed process is the writer
			// replica: its connection dies mid-transaction and the server rolls it back.
			path := testDSN(t, "crash.db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := map[string]int64{} // highest acknowledged seq per run
			total, killed := 0, false
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 || f[0] != "ack" {
					continue // test framework output
				}
				seq, err := strconv.ParseInt(f[2], 10, 64)
				if err != nil {
					t.Fatalf("bad ack line %q", sc.Text())
				}
				if seq != acked[f[1]]+1 {
					t.Fatalf("child acked %s #%d after #%d", f[1], seq, acked[f[1]])
				}
				acked[f[1]] = seq
				total++
				if total == killAfter && !killed {
					// Lines already in the pipe are still read below: they were acknowledged too.
					if err := cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			}
			err = cmd.Wait()
			if !killed {
				t.Fatalf("child ended before %d acks (round %d): %v\n%s", killAfter, round, err, stderr.String())
			}

			s, err := Open(context.Background(), path)
			if err != nil {
				t.Fatalf("reopen after kill -9: %v", err)
			}
			defer s.Close()
			if !testOnPostgres() {
				var integrity string
				if err := s.reader.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
					t.Fatalf("integrity_check = %q, %v", integrity, err)
				}
			}
			for run, last := range acked {
				r, ts, err := s.GetRun(context.Background(), run)
				if err != nil {
					t.Fatalf("%s: %v", run, err)
				}
				if r.LastSeq < last {
					t.Fatalf("%s: acknowledged #%d but only #%d survived", run, last, r.LastSeq)
				}
				if int64(len(ts)) != r.LastSeq {
					t.Fatalf("%s: last_seq %d but %d transitions", run, r.LastSeq, len(ts))
				}
				for i, x := range ts {
					if sent(t, x) != tr(run, int64(i+1)) {
						t.Fatalf("%s: transition %d = %+v", run, i+1, x)
					}
				}
			}
			t.Logf("killed after %d acks; %d acknowledged transitions across %d runs all present", killAfter, total, len(acked))
		})
	}
}
