package server

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// Migrated is the schema version of the store before and after its start-up migrations
// (store.Store.Migrated), for the one line `rbook serve` prints when it migrated, so an
// operator sees that the schema changed (docs/control-plane.md, "Databases: SQLite and PostgreSQL").
func (r *Running) Migrated() (from, to int) { return r.st.Migrated() }

// dbUnreachableMessage is what a client gets for a call that failed because the store lost
// its database (docs/control-plane.md, "Databases: SQLite and PostgreSQL"), with code Unavailable / E_RETRY, so the
// executor's failover and back-off treat it as transient.
const dbUnreachableMessage = "the control plane's database is unreachable; retry later"

// dbWatchInterval is how often, once the database was lost, the server pings it (through
// the store's cached Reachable) until it answers again, to log one "restored" line.
const dbWatchInterval = time.Second

// dbChecker is the gRPC health checker: NOT_SERVING while the store cannot reach its
// database (store.Store.Reachable: one ping per store.ReachableTTL at most, so health checks
// never pile load on the database) or since a call failed on a lost connection until a
// later ping answers, otherwise what the static checker says (NOT_SERVING
// after EndStreams), so a load balancer stops sending calls to a replica that lost its
// database (docs/control-plane.md, "Databases: SQLite and PostgreSQL").
type dbChecker struct {
	s      *Server
	static *grpchealth.StaticChecker
}

// Check implements grpchealth.Checker.
func (c dbChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if err := c.s.st.Reachable(ctx); err != nil || c.s.dbDown.Load() {
		if err != nil {
			c.s.dbLost(err)
		}
		// Lost (a call failed on the connection, or the ping did) until the watcher's
		// ping after the loss answers.
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return c.static.Check(ctx, req)
}

// dbUnreachable is the client error for a store failure err when the database connection is
// lost (store.IsConnectionLost, or the database does not answer a ping now); nil otherwise.
// The first such failure logs "database connection lost" once and starts watching for the
// database to come back (one "database connection restored" line); the calls in between log
// nothing more.
func (s *Server) dbUnreachable(ctx context.Context, err error) *connect.Error {
	if !store.IsConnectionLost(err) && s.st.Reachable(ctx) == nil {
		return nil
	}
	s.dbLost(err)
	return rpcError(connect.CodeUnavailable, CodeRetry, dbUnreachableMessage)
}

// dbLost records that the database connection is lost: the first call after it was up logs
// one line and starts the watcher, which logs one line when a ping answers again (or ends
// with the server, EndStreams).
func (s *Server) dbLost(err error) {
	if !s.dbDown.CompareAndSwap(false, true) {
		return
	}
	s.log.Error("database connection lost", "err", err)
	go func() {
		t := time.NewTicker(dbWatchInterval)
		defer t.Stop()
		for {
			select {
			case <-s.streamsDone:
				return
			case <-t.C:
				if s.st.Reachable(context.Background()) == nil {
					s.dbDown.Store(false)
					s.log.Info("database connection restored")
					return
				}
			}
		}
	}()
}
