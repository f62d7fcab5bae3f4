package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

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
// <dir>/<runbook>.mcp.json unless mcpConfig names another file (DESIGN D11).
func executors(plan *runbook.Plan, name, dir, mcpConfig string) (map[runbook.StepType]engine.Executor, func(), error) {
	execs := simulatedExecutors()
	needsMCP := false
	for _, s := range plan.Steps {
		needsMCP = needsMCP || (s.Type == runbook.TypeCheck && s.Input != nil)
	}
	if !needsMCP {
		return execs, func() {}, nil
	}
	path := mcpConfig
	if path == "" {
		path = filepath.Join(dir, name+".mcp.json")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s has check steps, which query an MCP server, but %s does not exist; create it in the mcpServers JSON shape (see the README) or pass --mcp-config FILE", plan.Path, path)
		}
	}
	cfg, err := mcp.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	lazy := &lazySession{cfg: cfg}
	execs[runbook.TypeCheck] = &steps.Check{Session: lazy, Subscriptions: plan.Subscriptions}
	return execs, lazy.close, nil
}

// lazySession dials the MCP server on the first call and keeps the session for the run.
type lazySession struct {
	cfg  *mcp.Config
	mu   sync.Mutex
	sess *mcp.Session
}

func (l *lazySession) CallTool(ctx context.Context, name string, args map[string]any) (mcp.Result, error) {
	l.mu.Lock()
	if l.sess == nil {
		// The session outlives this step's deadline; each call is still bounded by ctx.
		s, err := mcp.Dial(context.WithoutCancel(ctx), l.cfg, "")
		if err != nil {
			l.mu.Unlock()
			return mcp.Result{}, err
		}
		l.sess = s
	}
	s := l.sess
	l.mu.Unlock()
	return s.CallTool(ctx, name, args)
}

func (l *lazySession) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil {
		l.sess.Close()
	}
}
