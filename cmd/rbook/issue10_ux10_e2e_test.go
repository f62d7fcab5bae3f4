package main

// New-user findings on PostgreSQL replicas and executor failover (issue 10, "ux10"), with
// the real binary.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// TestIssue10_UX_1_ResumeKeepsTheStateFilesControlPlaneList: a run with --control-plane
// "A,B" interrupted at its gate prints resume and cancel hints that name the list; running
// the resume without the flag (and without RBOOK_CONTROL_PLANE) reports to A,B again (one
// line says so), starts no embedded control plane, keeps the state file's link and completes
// with every transition once on the control plane; 'rbook runs' without a flag names the
// list the state file holds.
func TestIssue10_UX_1_ResumeKeepsTheStateFilesControlPlaneList(t *testing.T) {
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
	if _, err := os.Stat(filepath.Join(dir, embeddedDB)); err == nil {
		t.Fatalf("the resume created the embedded control plane's database %s", embeddedDB)
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

// TestIssue10_UX_1_RelinkIsSaid: resuming with an explicit other control plane says that the
// run's link changes (from the state file's list to the new URL) and how to go back, before
// the state file records the new one.
func TestIssue10_UX_1_RelinkIsSaid(t *testing.T) {
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
