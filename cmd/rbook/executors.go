package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
)

func simulatedExecutors() map[runbook.StepType]engine.Executor {
	return map[runbook.StepType]engine.Executor{runbook.TypeDeploy: steps.Simulated{}, runbook.TypeRollback: steps.Simulated{}}
}

// executors wires one executor per step type. Check steps get an MCP session that is dialled
// on first use, so a run with no check left to do never starts a server. The config is
// <dir>/<runbook>.mcp.json unless mcpConfig names another file; it is checked
// first as 'rbook validate' checks it (runbookMCPConfig), and any problem is returned as an
// exitError that refuses the run before anything is recorded.
func executors(plan *runbook.Plan, name, dir, mcpConfig string) (map[runbook.StepType]engine.Executor, func(), error) {
	execs := simulatedExecutors()
	needsMCP := false
	for _, s := range plan.Steps {
		needsMCP = needsMCP || (s.Type == runbook.TypeCheck && s.Input != nil)
	}
	if !needsMCP {
		return execs, func() {}, nil
	}
	cfg, ds := runbookMCPConfig(plan.Path, mcpConfigPath(dir, name, mcpConfig), mcpConfig)
	if len(ds) > 0 {
		return nil, nil, setupRefused(ds, "rbook validate "+name)
	}
	lazy := newLazySession(cfg)
	execs[runbook.TypeCheck] = &steps.Check{Session: lazy, Subscriptions: plan.Subscriptions}
	return execs, lazy.close, nil
}

// mcpConfigPath is the MCP configuration a run of runbook name uses: the --mcp-config
// flag's file when set, else <dir>/<name>.mcp.json (DESIGN D11). `rbook validate` checks
// the same file.
func mcpConfigPath(dir, name, flag string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(dir, name+".mcp.json")
}

// missingMCPConfig is the message for a runbook with check steps and no MCP config file.
func missingMCPConfig(runbookPath, configPath string) string {
	return fmt.Sprintf("%s has check steps, which query an MCP server, but %s does not exist; create it in the mcpServers JSON shape (see docs/runbooks.md) or pass --mcp-config FILE", runbookPath, configPath)
}

// lazySession dials the MCP server on the first call and keeps the session for the run.
//
// The connect is bounded by the calling step's context, so a server that never answers the
// initialize handshake costs that step its max_timeout_seconds (TIMED_OUT, on_fail applies)
// and its process group is killed. A failed connect is not remembered: the next check step
// dials again under its own deadline. That is a new attempt by a new step, not a retry of the
// failed call (seed runbook-executor, "Failure handling": a timed-out call is not retried),
// and it lets a server that was merely slow to start serve later checks. At most one connect
// is in progress; a check that arrives meanwhile (possible only when the engine gave up on an
// earlier step) waits for it or for its own context, whichever ends first. A session that
// breaks after connecting is kept: later calls fail with its error.
//
// mu is never held across I/O, so close never queues behind a connect.
type lazySession struct {
	cfg *mcp.Config
	// lifetime bounds every session; close ends it, which also aborts a connect in progress.
	lifetime context.Context
	end      context.CancelFunc

	mu   sync.Mutex
	sess *mcp.Session
	// dialing is closed when the connect in progress ends; nil when none is.
	dialing chan struct{}
}

func newLazySession(cfg *mcp.Config) *lazySession {
	lifetime, end := context.WithCancel(context.Background())
	return &lazySession{cfg: cfg, lifetime: lifetime, end: end}
}

// errSessionClosed is returned to a check that calls after the run closed its MCP session.
var errSessionClosed = errors.New("mcp: the run's MCP session is closed")

func (l *lazySession) CallTool(ctx context.Context, name string, args map[string]any) (mcp.Result, error) {
	s, err := l.session(ctx)
	if err != nil {
		return mcp.Result{}, err
	}
	return s.CallTool(ctx, name, args)
}

// session returns the run's session, dialling it under ctx when there is none yet.
func (l *lazySession) session(ctx context.Context) (*mcp.Session, error) {
	for {
		l.mu.Lock()
		if l.lifetime.Err() != nil {
			l.mu.Unlock()
			return nil, errSessionClosed
		}
		if l.sess != nil {
			s := l.sess
			l.mu.Unlock()
			return s, nil
		}
		if wait := l.dialing; wait != nil {
			l.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("mcp: waiting for another check's connect: %w", ctx.Err())
			}
		}
		done := make(chan struct{})
		l.dialing = done
		l.mu.Unlock()

		s, err := mcp.DialWithLifetime(ctx, l.lifetime, l.cfg, "")

		l.mu.Lock()
		l.dialing = nil
		close(done)
		if err == nil {
			l.sess = s
		}
		l.mu.Unlock()
		return s, err
	}
}

// closeWait bounds how long close waits for an aborted connect to kill its server.
const closeWait = 5 * time.Second

// close ends the run's MCP session: the established session is closed (stdin closed, then
// SIGTERM and SIGKILL for its process group) and a connect still in progress is aborted, which
// kills its server's process group. close waits for that abort to finish, at most closeWait,
// never for the connect itself. A session dialled concurrently with close is closed by the
// end of l.lifetime.
func (l *lazySession) close() {
	l.mu.Lock()
	s, dialing := l.sess, l.dialing
	l.mu.Unlock()
	if s != nil {
		_ = s.Close() // its errors are the server's business once the run is over
	}
	l.end()
	if dialing != nil {
		select {
		case <-dialing:
		case <-time.After(closeWait):
		}
	}
}
