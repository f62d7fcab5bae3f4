package e2e

// Two `rbook serve` replicas on one PostgreSQL database behind a small TCP proxy, driven with the
// real binary: the demo runs through replica A, waits at its gate, is approved through replica B
// and completes while `rbook watch` on B sees every transition; then replica A is killed with
// SIGKILL while a second run waits at its gate, and that run completes through B with no transition
// lost or duplicated (read back from the database). Skipped with docs/decisions/postgres-tests.md's
// message without RBOOK_TEST_POSTGRES_URL.

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the test's reads
	"google.golang.org/protobuf/encoding/protojson"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// pgSkipMessage is the skip message of docs/decisions/postgres-tests.md.
const pgSkipMessage = "set RBOOK_TEST_POSTGRES_URL (see .ci/postgres) to run this PostgreSQL test"

// newPGDatabase creates database rbook_t_<random> from RBOOK_TEST_POSTGRES_URL, drops it
// WITH (FORCE) when the test ends, and returns its DSN.
func newPGDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("RBOOK_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip(pgSkipMessage)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "rbook_t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// tcpProxy is the test's load balancer: every accepted connection goes to the pinned
// backend, or, when that one refuses, to the next one in order (a dead replica's clients
// move on when they reconnect).
type tcpProxy struct {
	ln       net.Listener
	backends []string // host:port
	mu       sync.Mutex
	pin      int
	dialed   map[string]int // connections forwarded per backend
	open     map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, backends ...string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, backends: backends, dialed: map[string]int{}, open: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *tcpProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *tcpProxy) count(backend string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dialed[backend]
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	p.mu.Lock()
	pin := p.pin
	p.mu.Unlock()
	var up net.Conn
	for i := range p.backends {
		b := p.backends[(pin+i)%len(p.backends)]
		var err error
		if up, err = net.DialTimeout("tcp", b, 2*time.Second); err == nil {
			p.mu.Lock()
			p.dialed[b]++
			p.open[c], p.open[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			break
		}
	}
	if up == nil {
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.open, c)
	delete(p.open, up)
	p.mu.Unlock()
}

// watchProc runs `rbook watch RUN_ID -o json` and collects the transition seqs it prints.
type watchProc struct {
	cmd  *exec.Cmd
	seqs []int64
	errs strings.Builder
	done chan struct{}
	err  error
}

func startWatch(t *testing.T, dir, cp, runID string) *watchProc {
	t.Helper()
	w := &watchProc{cmd: exec.Command(rbookBin, "watch", runID, "-o", "json", "--control-plane", cp), done: make(chan struct{})}
	w.cmd.Dir = dir
	w.cmd.Stderr = &w.errs
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m rbookv1.WatchRunResponse
			if err := protojson.Unmarshal(sc.Bytes(), &m); err != nil {
				w.err = fmt.Errorf("rbook watch printed %q: %v", sc.Text(), err)
				continue
			}
			if tr := m.GetTransition(); tr != nil {
				w.seqs = append(w.seqs, tr.GetSeq())
			}
		}
		if err := w.cmd.Wait(); err != nil && w.err == nil {
			w.err = fmt.Errorf("rbook watch: %v\n%s", err, w.errs.String())
		}
	}()
	t.Cleanup(func() { w.cmd.Process.Kill(); <-w.done })
	return w
}

// result waits for the watch to end (the run finished) and returns the seqs it printed.
func (w *watchProc) result(t *testing.T) []int64 {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("rbook watch did not end within 90s of the run's end; seqs so far %v", w.seqs)
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	return w.seqs
}

// storedSeqs reads the run's transitions back from the database: seqs in order and kinds.
func storedSeqs(t *testing.T, db *sql.DB, runID string) (seqs []int64, finals int) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT seq, kind FROM run_transitions WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var kind string
		if err := rows.Scan(&seq, &kind); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
		if kind == "run_finished" {
			finals++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return seqs, finals
}

func oneToN(n int64) string {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i + 1)
	}
	return fmt.Sprint(s)
}

func TestTwoReplicasOnePostgreSQL(t *testing.T) {
	skipShort(t)
	dsn := newPGDatabase(t)
	a := startServeDB(t, dsn)
	b := startServeDB(t, dsn)
	lb := newTCPProxy(t, a.addr, b.addr) // pinned to A while A lives
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	t.Setenv("RBOOK_SHOW_TOKEN", "1")

	// 1. The demo runs through A (behind the proxy), waits at its gate, is approved through B.
	dir1 := workdir(t)
	p1 := start(t, dir1, "run", "demo", "--control-plane", lb.url())
	tok := tokenFrom(t, p1)
	run1 := readState(t, dir1).RunID
	watch := startWatch(t, dir1, b.url(), run1)
	out, code := run(t, dir1, "", "approve", tok, "--control-plane", b.url(), "--reason", "approved on B")
	if code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("rbook approve through B: exit %d\n%s", code, out)
	}
	if code := p1.wait(t); code != 0 {
		t.Fatalf("run 1 exit %d\n%s", code, p1.output())
	}
	seen := watch.result(t)
	resp := getRun(t, b.url(), run1)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if n := int64(len(resp.GetTransitions())); fmt.Sprint(seen) != oneToN(n) {
		t.Fatalf("rbook watch on B printed seqs %v; GetRun has 1..%d", seen, n)
	}
	if lb.count(b.addr) != 0 {
		t.Fatalf("the executor of run 1 reached B through the proxy %d times; it was pinned to A", lb.count(b.addr))
	}
	decided := decidedMessage(resp)
	if !strings.Contains(decided, "approved on B") {
		t.Fatalf("gate_decided message %q: want B's approval reason", decided)
	}

	// 2. Two more runs are mid-way (at their gates, through A) when A is killed with SIGKILL:
	// run 2's executor was given both URLs, run 3's talks to the proxy. Both complete
	// through B, approved there, with no transition lost or duplicated.
	type midway struct {
		name, dir, runID, token string
		p                       *proc
		before                  []int64
	}
	runs := []*midway{{name: "run 2 (--control-plane A,B)"}, {name: "run 3 (the proxy)"}}
	for i, m := range runs {
		cp := a.url() + "," + b.url()
		if i == 1 {
			cp = lb.url()
		}
		m.dir = workdir(t)
		m.p = start(t, m.dir, "run", "demo", "--control-plane", cp)
		m.token = tokenFrom(t, m.p)
		m.runID = readState(t, m.dir).RunID
	}
	if runs[0].runID == run1 || runs[1].runID == run1 || runs[0].runID == runs[1].runID {
		t.Fatalf("run ids %s, %s, %s: want three distinct", run1, runs[0].runID, runs[1].runID)
	}
	viaB := lb.count(b.addr)
	for _, m := range runs {
		m.before, _ = storedSeqs(t, db, m.runID)
	}
	a.kill()
	for _, m := range runs {
		out, code := run(t, m.dir, "", "approve", m.token, "--control-plane", b.url(), "--reason", "A is gone")
		if code != 0 || !strings.Contains(out, "approved") {
			t.Fatalf("%s: rbook approve through B after A died: exit %d\n%s", m.name, code, out)
		}
	}
	for _, m := range runs {
		if code := m.p.wait(t); code != 0 {
			t.Fatalf("%s: exit %d after A was killed\n%s", m.name, code, m.p.output())
		}
		seqs, finals := storedSeqs(t, db, m.runID)
		st := readState(t, m.dir)
		if fmt.Sprint(seqs) != oneToN(st.Seq) || finals != 1 || len(st.Outbox) != 0 || st.RunStatus != "COMPLETED" {
			t.Fatalf("%s in the database: seqs %v (%d run_finished); state file: seq %d, %d unsent, %s; want 1..seq once each, one run_finished, nothing unsent",
				m.name, seqs, finals, st.Seq, len(st.Outbox), st.RunStatus)
		}
		if len(m.before) == 0 || len(seqs) <= len(m.before) {
			t.Fatalf("%s had %d transitions when A died and %d at the end: want some recorded through each replica", m.name, len(m.before), len(seqs))
		}
		checkTransitions(t, getRun(t, b.url(), m.runID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	}
	if want := fmt.Sprintf("control plane: %s unreachable; using %s", a.url(), b.url()); !strings.Contains(runs[0].p.output(), want) {
		t.Fatalf("run 2 did not say it moved (%q):\n%s", want, runs[0].p.output())
	}
	if lb.count(b.addr) == viaB {
		t.Fatal("after A died run 3's executor never reached B through the proxy")
	}
}
