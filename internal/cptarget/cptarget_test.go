package cptarget

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
)

// fakeFolder is a Folder in dir whose embedded control plane is simulated: nothing listens,
// nothing serves the database, and Serve and OpenHistory record that they were called.
type fakeFolder struct {
	Folder
	served, opened bool
}

func newFakeFolder(t *testing.T) *fakeFolder {
	t.Helper()
	dir := t.TempDir()
	f := &fakeFolder{}
	f.Folder = Folder{
		URLFile:   filepath.Join(dir, "controlplane.url"),
		DB:        filepath.Join(dir, "controlplane.db"),
		Listening: func(string) bool { return false },
		Served:    func(string) bool { return false },
		Loopback:  func(u string) bool { return strings.Contains(u, "127.0.0.1") },
		LocalKey:  func() string { return "local-key" },
		Serve: func(context.Context) (string, func(), error) {
			f.served = true
			return "http://127.0.0.1:7999", func() {}, nil
		},
		OpenHistory: func(_ context.Context, db string) (*cpclient.Client, func(), error) {
			f.opened = true
			return &cpclient.Client{URL: db}, func() {}, nil
		},
		Note: func() string { return " (a note)" },
	}
	return f
}

// folderWithDB is a fake folder that holds a database, with $RBOOK_CONTROL_PLANE set to env.
func folderWithDB(t *testing.T, env string) *fakeFolder {
	t.Helper()
	f := newFakeFolder(t)
	t.Setenv("RBOOK_CONTROL_PLANE", env)
	writeFile(t, f.DB, "")
	return f
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolveTakesTheFlagThenTheEnvironmentThenTheURLFile(t *testing.T) {
	cases := []struct {
		name, flag, env, urlFile, runCmd string
		wantURL                          string
		wantStale, wantFromFile          bool
		wantErr                          string
	}{
		{name: "flag, normalised", flag: "http://a:1/ , http://b:2", env: "http://e:3", urlFile: "http://127.0.0.1:9\n", wantURL: "http://a:1,http://b:2"},
		{name: "environment", env: "http://e:3/", urlFile: "http://127.0.0.1:9\n", wantURL: "http://e:3"},
		{name: "environment off reads the URL file", env: "off", urlFile: "http://127.0.0.1:9\n", wantURL: "http://127.0.0.1:9", wantStale: true, wantFromFile: true},
		{name: "URL file", urlFile: "http://127.0.0.1:9\n", wantURL: "http://127.0.0.1:9", wantStale: true, wantFromFile: true},
		{name: "nothing", wantErr: "no control plane to talk to: pass --control-plane URL or set RBOOK_CONTROL_PLANE (a running 'rbook run' starts an embedded one and leaves its address in ./"},
		{name: "flag off", flag: "off", urlFile: "http://127.0.0.1:9\n", wantErr: "rbook: --control-plane off (no control plane) is for rbook run, status and cancel; this command talks to a control plane"},
		{name: "flag off, playbook command", flag: "off", runCmd: "rbook playbook run", wantErr: "rbook: --control-plane off (no control plane) is for 'rbook playbook run'; this command talks to a control plane"},
		{name: "flag without a scheme", flag: "a:1", wantErr: "rbook: --control-plane "},
		{name: "environment without a scheme", env: "a:1", wantErr: "rbook: RBOOK_CONTROL_PLANE "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFolder(t)
			t.Setenv("RBOOK_CONTROL_PLANE", tc.env)
			if tc.urlFile != "" {
				writeFile(t, f.URLFile, tc.urlFile)
			}
			tg := &Target{Flag: tc.flag, RunCmd: tc.runCmd, Folder: &f.Folder}
			u, stale, err := tg.Resolve()
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve() error = %v, want one starting %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u != tc.wantURL || stale != tc.wantStale || tg.FromFile != tc.wantFromFile {
				t.Fatalf("Resolve() = %q, stale %v, from file %v; want %q, %v, %v", u, stale, tg.FromFile, tc.wantURL, tc.wantStale, tc.wantFromFile)
			}
		})
	}
}

func TestSourceNamesTheFlagOrTheEnvironment(t *testing.T) {
	t.Setenv("RBOOK_CONTROL_PLANE", "http://e:3")
	if got := (&Target{Flag: "http://a:1"}).Source(); got != "--control-plane" {
		t.Fatalf("Source() with the flag = %q", got)
	}
	if got := (&Target{}).Source(); got != "RBOOK_CONTROL_PLANE" {
		t.Fatalf("Source() without the flag = %q", got)
	}
}

func TestClientServesTheLocalDatabaseOnlyWhenNoURLIsNamed(t *testing.T) {
	cases := []struct {
		name, flag, env string
		wantServed      bool
	}{
		{name: "nothing named", wantServed: true},
		{name: "environment off", env: "off", wantServed: true},
		{name: "flag", flag: "http://10.0.0.1:7070"},
		{name: "environment", env: "http://10.0.0.1:7070"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := folderWithDB(t, tc.env)
			tg := &Target{Flag: tc.flag, Folder: &f.Folder}
			var errw bytes.Buffer
			c, done, err := tg.Client(context.Background(), &errw)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			if f.served != tc.wantServed || tg.Local != tc.wantServed {
				t.Fatalf("served %v, Local %v; want %v", f.served, tg.Local, tc.wantServed)
			}
			wantURL, line := "http://10.0.0.1:7070", ""
			if tc.wantServed {
				wantURL, line = "http://127.0.0.1:7999", "No control plane is running: this command serves "+f.DB+" (the embedded control plane of this folder's runs) until it ends.\n"
			}
			if c.URL != wantURL || errw.String() != line {
				t.Fatalf("client of %q, stderr %q; want %q, %q", c.URL, errw.String(), wantURL, line)
			}
		})
	}
}

func TestReaderReadsTheLocalDatabaseWhenNothingRuns(t *testing.T) {
	f := folderWithDB(t, "")
	var errw bytes.Buffer
	c, done, err := (&Target{Folder: &f.Folder}).Reader(context.Background(), &errw)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	want := "No control plane is running: read the local database " + f.DB + " (read-only; the history of this folder's embedded runs). (a note)\n"
	if !f.opened || c.URL != f.DB || errw.String() != want {
		t.Fatalf("opened %v, client of %q, stderr %q; want the database and %q", f.opened, c.URL, errw.String(), want)
	}
}

func TestReaderNeverReplacesAGivenURLWithTheLocalDatabase(t *testing.T) {
	cases := []struct{ name, flag, env, wantErr string }{
		{name: "flag", flag: "http://10.0.0.1:7070"},
		{name: "environment", env: "http://10.0.0.1:7070"},
		{name: "flag off", flag: "off", wantErr: "rbook: --control-plane off (no control plane) is for rbook run, status and cancel"},
		{name: "a bad flag", flag: "a:1", wantErr: "rbook: --control-plane "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := folderWithDB(t, tc.env)
			c, done, err := (&Target{Flag: tc.flag, Folder: &f.Folder}).Reader(context.Background(), &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("Reader() error = %v, want one starting %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else {
				defer done()
				if c.URL != "http://10.0.0.1:7070" {
					t.Fatalf("client of %q", c.URL)
				}
			}
			if f.opened || f.served {
				t.Fatalf("the local database was used (opened %v, served %v)", f.opened, f.served)
			}
		})
	}
}
