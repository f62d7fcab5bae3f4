// Package cptarget finds the control plane a command talks to (rbook approve, reject, runs,
// get, watch, approvals, the playbook verbs, plan's policy preview) and connects to it:
// --control-plane, else $RBOOK_CONTROL_PLANE (both through run.ControlPlaneFrom, the one
// reading of the flag and the environment), else the address a running embedded control plane
// left in its URL file; when none of those is running, this folder's embedded database is
// served, or read, for the command alone (docs/control-plane.md).
//
// The embedded control plane is reached through Folder's functions, which cmd/rbook wires to
// controlplane/embedded: this package, like the rest of the executor's side, never imports
// the control plane.
package cptarget

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	pipeline "github.com/rbookhq/rbook-action/action/run"
)

// Deadline is the time one call of a command's client may take.
const Deadline = 10 * time.Second

// Folder is this folder's embedded control plane, as the commands find it.
type Folder struct {
	// URLFile is where a running embedded control plane leaves its address
	// (".rbook/controlplane.url"); DB is its database (".rbook/controlplane.db").
	URLFile, DB string
	// Listening reports whether something accepts connections at a URL.
	Listening func(url string) bool
	// Served reports whether a process serves the database at a path.
	Served func(db string) bool
	// Loopback reports whether a URL is on a loopback address.
	Loopback func(url string) bool
	// LocalKey is the local approver key of the embedded control plane, "" when there is none.
	LocalKey func() string
	// Serve serves DB on loopback in this process; it returns the URL and the func that
	// stops it, or "" when another process serves it.
	Serve func(ctx context.Context) (url string, stop func(), err error)
	// OpenHistory is a client of DB opened read-only in this process, and the func that
	// closes it.
	OpenHistory func(ctx context.Context, db string) (*cpclient.Client, func(), error)
	// Note ends the messages about this folder's history: "" or one sentence that starts with
	// a space (the control planes this folder's state files name).
	Note func() string
	// Progress gets a client's line when it moves to the next URL (cpclient.MoveNotice).
	Progress io.Writer
}

// WriteURL records the address url of the embedded control plane this process serves in
// URLFile, for other terminals; the returned func removes it. A file that cannot be written
// is left out: other terminals then name the control plane with --control-plane.
func (f *Folder) WriteURL(url string) func() {
	if err := os.MkdirAll(filepath.Dir(f.URLFile), 0o755); err != nil {
		return func() {}
	}
	if err := os.WriteFile(f.URLFile, []byte(url+"\n"), 0o600); err != nil {
		return func() {}
	}
	return func() { os.Remove(f.URLFile) }
}

// Target is one command's control plane: the flag as given and what resolving it found.
// Errors its methods return are the whole message a person sees (cmd/rbook exits 2 with it).
type Target struct {
	// Flag is --control-plane as given ("" = $RBOOK_CONTROL_PLANE, else the folder's).
	Flag string
	// RunCmd is the command whose run starts the embedded control plane, for messages: ""
	// means 'rbook run'; the playbook commands set "rbook playbook run".
	RunCmd string
	// FromFile: the URL came from Folder.URLFile (an embedded control plane).
	FromFile bool
	// Local: no control plane was running, so Client serves Folder.DB for the command alone.
	Local bool
	// Folder is this folder's embedded control plane.
	Folder *Folder
}

// RunWords is the command named in help and errors as the one that starts an embedded
// control plane: 'rbook run', or RunCmd.
func (t *Target) RunWords() string {
	if t.RunCmd != "" {
		return t.RunCmd
	}
	return "rbook run"
}

// Source names where Resolve found a URL, for messages: "--control-plane" or
// "RBOOK_CONTROL_PLANE".
func (t *Target) Source() string {
	_, from := pipeline.ControlPlaneFrom(t.Flag)
	return from
}

// named is the URL list the flag or the environment names, normalised, and where it came from;
// "" when neither names one ("off" in the environment names none).
func (t *Target) named() (u, from string) {
	u, from = pipeline.ControlPlaneFrom(t.Flag)
	if u == "off" && from != "--control-plane" {
		return "", from
	}
	return u, from
}

// noControlPlane is the error when there is nothing to talk to.
func (t *Target) noControlPlane() error {
	return fmt.Errorf("no control plane to talk to: pass --control-plane URL or set RBOOK_CONTROL_PLANE (a running '%s' starts an embedded one and leaves its address in ./%s).%s", t.RunWords(), t.Folder.URLFile, t.Folder.Note())
}

// Resolve finds the control plane URL: the flag, $RBOOK_CONTROL_PLANE, then the address a
// running embedded control plane left in Folder.URLFile. stale reports a URL file whose
// address no longer answers (its run has ended, or was killed). A list CheckURLs refuses, the
// flag "off" and nothing to talk to are errors.
func (t *Target) Resolve() (u string, stale bool, err error) {
	t.FromFile = false
	u, from := t.named()
	switch {
	case u == "off" && t.RunCmd != "":
		return "", false, fmt.Errorf("rbook: --control-plane off (no control plane) is for '%s'; this command talks to a control plane: give its URL (http://HOST:PORT), or leave the flag out for the embedded one of a running '%s' (or, for status, the local database %s)", t.RunCmd, t.RunCmd, t.Folder.DB)
	case u == "off":
		return "", false, fmt.Errorf("rbook: --control-plane off (no control plane) is for rbook run, status and cancel; this command talks to a control plane: give its URL (http://HOST:PORT), or leave the flag out for the embedded one (or, for runs, get and approvals, the local database %s)", t.Folder.DB)
	case u != "":
		if err := pipeline.CheckURLs(u, from); err != nil {
			return u, false, fmt.Errorf("rbook: %w", err)
		}
		return u, false, nil
	}
	if data, err := os.ReadFile(t.Folder.URLFile); err == nil {
		t.FromFile = true
		u := strings.TrimSpace(string(data))
		return u, !t.Folder.Listening(u), nil
	}
	return "", false, t.noControlPlane()
}

// Client connects to the control plane (see Resolve). The returned func releases it.
//
// The embedded control plane of this folder (its address from Folder.URLFile, on a loopback
// address) gets the local approver key as the bearer token, so a gate can be decided there
// by approval id; a URL from --control-plane or $RBOOK_CONTROL_PLANE never gets it, and gets
// $RBOOK_TOKEN. When neither names a control plane and none of this folder's runs is serving
// (no live URL file), the database Folder.DB, when there is one, is served on loopback for
// this command alone (a line on errw says so): every verb then works on a run whose process
// has ended.
func (t *Target) Client(ctx context.Context, errw io.Writer) (*cpclient.Client, func(), error) {
	u, stale, err := t.Resolve()
	done := func() {}
	if t.Local = false; (err != nil || stale) && t.MayServeLocal() {
		lu, stop, lerr := t.Folder.Serve(ctx)
		if lerr != nil {
			return nil, nil, fmt.Errorf("rbook: no control plane is running, and this folder's %s cannot be served: %v", t.Folder.DB, lerr)
		}
		if lu != "" {
			fmt.Fprintf(errw, "No control plane is running: this command serves %s (the embedded control plane of this folder's runs) until it ends.\n", t.Folder.DB)
			u, err, done, t.Local, t.FromFile = lu, nil, stop, true, true
		}
	}
	if err != nil {
		return nil, nil, err
	}
	bearer := os.Getenv("RBOOK_TOKEN")
	if t.FromFile && t.Folder.Loopback(u) {
		if key := t.Folder.LocalKey(); key != "" {
			bearer = key
		}
	}
	c, err := t.connect(u, bearer)
	if err != nil {
		done()
		return nil, nil, err
	}
	return c, done, nil
}

// connect is the client of the control plane at u with bearer, after its TLS check.
func (t *Target) connect(u, bearer string) (*cpclient.Client, error) {
	if err := cpclient.CheckTLS(u); err != nil {
		return nil, fmt.Errorf("rbook: %w", err)
	}
	c := cpclient.New(u, bearer)
	c.Deadline = Deadline
	c.Progress = t.Folder.Progress
	return c, nil
}

// MayServeLocal reports whether Client may serve this folder's embedded database itself: no
// URL was given (flag or environment), the database exists and no process serves it.
func (t *Target) MayServeLocal() bool {
	if u, _ := t.named(); u != "" {
		return false
	}
	if _, err := os.Stat(t.Folder.DB); err != nil {
		return false
	}
	return !t.Folder.Served(t.Folder.DB)
}

// Reader is Client for the commands that only read history (runs, get, approvals): when no
// control plane is running — no --control-plane, no RBOOK_CONTROL_PLANE, no live URL file —
// it reads Folder.DB directly, read-only, and says so on errw. A URL that was given is never
// replaced by the local database.
func (t *Target) Reader(ctx context.Context, errw io.Writer) (*cpclient.Client, func(), error) {
	if named, from := t.named(); named != "" {
		if err := pipeline.CheckURLs(named, from); err != nil || named == "off" {
			_, _, err = t.Resolve()
			return nil, nil, err
		}
	}
	u, stale, err := t.Resolve()
	if err == nil && !stale {
		c, err := t.connect(u, os.Getenv("RBOOK_TOKEN"))
		if err != nil {
			return nil, nil, err
		}
		return c, func() {}, nil
	}
	if _, serr := os.Stat(t.Folder.DB); serr != nil {
		if err != nil {
			return nil, nil, err
		}
		return t.Client(ctx, errw) // a stale URL file and no database: the call's error explains
	}
	c, closeDB, oerr := t.Folder.OpenHistory(ctx, t.Folder.DB)
	if oerr != nil {
		return nil, nil, fmt.Errorf("rbook: no control plane is running, and the local database %s cannot be read: %v", t.Folder.DB, oerr)
	}
	t.FromFile = false
	if t.Folder.Served(t.Folder.DB) {
		// An 'rbook serve' here on the default --db writes no URL file: it is running, so do
		// not say otherwise, and say how to talk to it.
		fmt.Fprintf(errw, "A control plane serves %s (an 'rbook serve' in this folder) but none was named: read the database directly (read-only); pass --control-plane URL (the address 'rbook serve' printed) to talk to it.%s\n", t.Folder.DB, t.Folder.Note())
	} else {
		fmt.Fprintf(errw, "No control plane is running: read the local database %s (read-only; the history of this folder's embedded runs).%s\n", t.Folder.DB, t.Folder.Note())
	}
	return c, closeDB, nil
}
