package e2e

// What a person is told about PostgreSQL replicas and executor failover, with the real binary.

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/embedded"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// TestResumeKeepsTheStateFilesControlPlaneList: a run with --control-plane
// "A,B" interrupted at its gate prints resume and cancel hints that name the list; running
// the resume without the flag (and without RBOOK_CONTROL_PLANE) reports to A,B again (one
// line says so), starts no embedded control plane, keeps the state file's link and completes
// with every transition once on the control plane; 'rbook runs' without a flag names the
// list the state file holds.
func TestResumeKeepsTheStateFilesControlPlaneList(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := startServe(t, dir)
	front := newTCPFront(t, cp.addr)
	list := front.url + "," + cp.url()
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	t.Setenv("RBOOK_CONTROL_PLANE", "")
	p := start(t, dir, "run", "demo", "--control-plane", list)
	tokenFrom(t, p)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 1 {
		t.Fatalf("interrupted run: exit %d\n%s", code, p.output())
	}
	want := "can be resumed: rbook run demo --control-plane " + list + " (or end it: rbook cancel demo --control-plane " + list + ")."
	if !strings.Contains(p.output(), want) {
		t.Fatalf("the interrupted run's hints do not name the list; want %q in:\n%s", want, p.output())
	}

	r := start(t, dir, "run", "demo")
	r.waitFor(t, "Control plane: "+list+" (run ")
	tok := tokenFrom(t, r)
	if out, code := run(t, dir, "", "approve", tok, "--control-plane", cp.url()); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	if code := r.wait(t); code != 0 {
		t.Fatalf("resume without a flag: exit %d\n%s", code, r.output())
	}
	if strings.Contains(r.output(), "E_SEQ_GAP") || strings.Contains(r.output(), "embedded") {
		t.Fatalf("the resume used another control plane than the state file's:\n%s", r.output())
	}
	if _, err := os.Stat(filepath.Join(dir, embedded.DB)); err == nil {
		t.Fatalf("the resume created the embedded control plane's database %s", embedded.DB)
	}
	s := readState(t, dir)
	if s.ControlPlane != list || s.ControlPlaneEmbedded || s.RunStatus != "COMPLETED" || len(s.Outbox) != 0 {
		t.Fatalf("state after the resume: control_plane %q embedded %v status %s outbox %d; want %q false COMPLETED 0",
			s.ControlPlane, s.ControlPlaneEmbedded, s.RunStatus, len(s.Outbox), list)
	}
	resp := getRun(t, cp.url(), s.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if int64(len(resp.GetTransitions())) != s.Seq {
		t.Fatalf("the control plane holds %d transitions, the state file's seq is %d", len(resp.GetTransitions()), s.Seq)
	}

	out, code := run(t, dir, "", "runs")
	if code == 0 || !strings.Contains(out, "run "+s.RunID+" reports to "+list+" (.rbook/demo.state.json)") {
		t.Fatalf("'rbook runs' without a flag does not name the state file's control plane: exit %d\n%s", code, out)
	}
}

// TestResumeOnAnotherControlPlaneSaysTheLinkChanges: resuming with an explicit other control plane
// says that the run's link changes (from the state file's list to the new URL) and how to go back,
// before the state file records the new one.
func TestResumeOnAnotherControlPlaneSaysTheLinkChanges(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := startServe(t, dir)
	front := newTCPFront(t, cp.addr)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	t.Setenv("RBOOK_CONTROL_PLANE", "")
	p := start(t, dir, "run", "demo", "--control-plane", front.url)
	tokenFrom(t, p)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 1 {
		t.Fatalf("interrupted run: exit %d\n%s", code, p.output())
	}
	r := start(t, dir, "run", "demo", "--control-plane", cp.url())
	r.waitFor(t, "Note: run ")
	want := "reported to " + front.url + "; it now reports to " + cp.url() + " (from --control-plane), and its state file records that."
	tokenFrom(t, r)
	if !strings.Contains(r.output(), want) || !strings.Contains(r.output(), "resume with --control-plane "+front.url) {
		t.Fatalf("want %q and the way back in:\n%s", want, r.output())
	}
}

// TestServeRefusesAnUnknownSchemeAndNeverPrintsThePassword: `rbook serve --db`
// with a scheme typo is refused (exit 2) naming --db and what is accepted, creates nothing
// and never prints the password; a keyword/value string that cannot connect fails without
// the password and creates nothing either.
func TestServeRefusesAnUnknownSchemeAndNeverPrintsThePassword(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	out, code := run(t, dir, "", "serve", "--addr", "127.0.0.1:0", "--db", "postgress://u:s3cret@127.0.0.1:1/db")
	if code != 2 || strings.Contains(out, "s3cret") || !strings.Contains(out, "--db") ||
		!strings.Contains(out, `"postgress://" is not a database this rbook opens: give a SQLite file path, a postgres://… or postgresql://… URL, or a PostgreSQL key=value string`) {
		t.Fatalf("serve --db postgress://…: exit %d, want 2 naming --db and what is accepted, without the password:\n%s", code, out)
	}
	out, code = run(t, dir, "", "serve", "--addr", "127.0.0.1:0", "--db", "host=127.0.0.1 port=1 user=u password=s3cret dbname=db connect_timeout=2")
	if code == 0 || strings.Contains(out, "s3cret") || !strings.Contains(out, "password=xxxxx") || !strings.Contains(out, "is PostgreSQL running on 127.0.0.1:1?") {
		t.Fatalf("serve --db host=… password=…: exit %d, want a failure naming the redacted DSN and the next step:\n%s", code, out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("serve with a refused or PostgreSQL --db created %q in the working folder", ents[0].Name())
	}
}

// TestServeSaysOnceThatItMigrated: the first `rbook serve` on a new database
// prints one line "database schema migrated from version 0 to N", the next start none —
// on SQLite and on PostgreSQL (given as a keyword/value string with a password, which the
// listening line shows redacted).
func TestServeSaysOnceThatItMigrated(t *testing.T) {
	skipShort(t)
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	dbs := []string{filepath.Join(t.TempDir(), "cp.db")}
	if os.Getenv("RBOOK_TEST_POSTGRES_URL") != "" {
		u, err := url.Parse(newPGDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, fmt.Sprintf("host=%s port=%s user=%s password=s3cret dbname=%s sslmode=disable",
			u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/")))
	}
	for _, db := range dbs {
		for i := range 2 {
			p := start(t, t.TempDir(), "serve", "--addr", "127.0.0.1:0", "--db", db)
			p.waitFor(t, "rbook control plane listening on")
			p.cmd.Process.Signal(syscall.SIGTERM)
			p.wait(t)
			out := p.output()
			n := strings.Count(out, "database schema migrated from version 0 to "+strconv.Itoa(newestMigration(t))+" (db ")
			if want := 1 - i; n != want || strings.Contains(out, "s3cret") {
				t.Fatalf("start %d on %s: %d migration lines, want %d; password printed: %v\n%s", i+1, db, n, want, strings.Contains(out, "s3cret"), out)
			}
		}
	}
}

// TestNoAuthNoTerminalSaysHowToSeeTheToken: a run not on a terminal, reporting
// to a control plane without an auth file, says how to see the approval token
// (RBOOK_SHOW_TOKEN=1 or a terminal); `rbook approve <approval id>` there is refused with
// E_UNAUTHENTICATED naming the same, and without the contradicting "set RBOOK_TOKEN" line.
func TestNoAuthNoTerminalSaysHowToSeeTheToken(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := startServe(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "")
	t.Setenv("RBOOK_TOKEN", "")
	p := start(t, dir, "run", "demo", "--control-plane", cp.url())
	p.waitFor(t, "(its token is a secret and is not printed here: run rbook on a terminal, or with RBOOK_SHOW_TOKEN=1 where this output is private, to see it")
	m := regexp.MustCompile(`Approval (a-[a-z2-7]+) is open`).FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no approval id printed:\n%s", p.output())
	}
	out, code := run(t, dir, "", "approve", m[1], "--control-plane", cp.url())
	if code == 0 || !strings.Contains(out, "E_UNAUTHENTICATED") || !strings.Contains(out, "RBOOK_SHOW_TOKEN=1") || strings.Contains(out, "RBOOK_TOKEN ") ||
		strings.Contains(out, "No credentials were sent") {
		t.Fatalf("approve by id without auth: exit %d; want E_UNAUTHENTICATED naming RBOOK_SHOW_TOKEN=1 and no RBOOK_TOKEN line:\n%s", code, out)
	}
}

// TestReplicaWithAnotherSecretSaysToShareIt: a token from one control plane
// sent to one with another RBOOK_APPROVAL_SECRET (a replica set up differently) is refused
// with E_TOKEN_INVALID saying that every replica must share RBOOK_APPROVAL_SECRET.
func TestReplicaWithAnotherSecretSaysToShareIt(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	a := startServe(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	t.Setenv("RBOOK_APPROVAL_SECRET", "another-secret-0123456789abcdef")
	b := start(t, t.TempDir(), "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "b.db"))
	b.waitFor(t, "rbook control plane listening on ")
	bURL := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(b.output())[1]
	p := start(t, dir, "run", "demo", "--control-plane", a.url())
	tok := tokenFrom(t, p)
	out, code := run(t, dir, "", "approve", tok, "--control-plane", bURL)
	if code == 0 || !strings.Contains(out, "E_TOKEN_INVALID") || !strings.Contains(out, "every replica of a control plane must share RBOOK_APPROVAL_SECRET") {
		t.Fatalf("approve on a control plane with another secret: exit %d\n%s", code, out)
	}
}

// newestMigration is the newest schema version the store migrates to: the highest NNNN_
// prefix in controlplane/store/migrations (PostgreSQL's migrations_pg has the same versions).
func newestMigration(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("..", "..", "..", "controlplane", "store", "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	newest := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0]); err == nil && n > newest {
			newest = n
		}
	}
	if newest == 0 {
		t.Fatal("no NNNN_*.sql migration in controlplane/store/migrations")
	}
	return newest
}
