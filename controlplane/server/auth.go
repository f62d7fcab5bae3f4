package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// Role is what an authenticated caller may do (issue 3, item 2: "bearer tokens for callers
// and approvers").
type Role string

// The roles of an auth file. Every role may read (Get*, List*, Watch*, GetEvidencePack).
const (
	// RoleExecutor may also start runs, record transitions, request approvals and cancel runs.
	RoleExecutor Role = "executor"
	// RoleApprover may also approve, reject and cancel runs.
	RoleApprover Role = "approver"
	// RoleViewer may only read.
	RoleViewer Role = "viewer"
)

// Auth-file limits.
const (
	// MinBearerTokenBytes is the shortest bearer token an auth file may hold.
	MinBearerTokenBytes = 16
	// MaxAuthFileBytes caps an auth file.
	MaxAuthFileBytes = 1 << 20
	// maxBearerBytes caps a presented Authorization value before it is hashed.
	maxBearerBytes = 4096
)

// writeRoles lists, per procedure that changes something, the roles allowed to call it.
// Procedures not listed here are reads, open to every role.
var writeRoles = map[string][]Role{
	rbookv1connect.RunServiceStartRunProcedure:             {RoleExecutor},
	rbookv1connect.RunServiceRecordTransitionProcedure:     {RoleExecutor},
	rbookv1connect.RunServiceRenewLeaseProcedure:           {RoleExecutor},
	rbookv1connect.RunServiceCancelRunProcedure:            {RoleExecutor, RoleApprover},
	rbookv1connect.ApprovalServiceRequestApprovalProcedure: {RoleExecutor},
	rbookv1connect.ApprovalServiceApproveProcedure:         {RoleApprover},
	rbookv1connect.ApprovalServiceRejectProcedure:          {RoleApprover},
}

// Caller is an authenticated identity: one line of the auth file.
type Caller struct {
	// Identity is recorded as started_by, approver and cancelled_by.
	Identity string
	// Role decides which procedures the caller may use (writeRoles).
	Role Role
}

type authEntry struct {
	caller Caller
	hash   [sha256.Size]byte
}

// Authenticator checks bearer tokens against an auth file's entries. Tokens are kept only as
// SHA-256 hashes and compared in constant time.
type Authenticator struct {
	entries []authEntry
}

// LoadAuthFile reads an auth file: one caller per line, "identity role token", where role
// is executor, approver or viewer and token is at least MinBearerTokenBytes; blank lines and
// lines starting with '#' are ignored. Errors name the file and line (never the token):
// unreadable or oversized file, wrong field count, unknown role, short or duplicate token,
// no entries.
func LoadAuthFile(path string) (*Authenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	defer f.Close()
	return ParseAuth(io.LimitReader(f, MaxAuthFileBytes+1), path)
}

// ParseAuth parses auth-file text from r; name is used in errors. See LoadAuthFile.
func ParseAuth(r io.Reader, name string) (*Authenticator, error) {
	a := &Authenticator{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxAuthFileBytes+1)
	n, size := 0, 0
	for sc.Scan() {
		n++
		size += len(sc.Bytes()) + 1
		if size > MaxAuthFileBytes {
			return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxAuthFileBytes)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"identity role token\", got %d fields", name, n, len(fields))
		}
		id, role, tok := fields[0], Role(fields[1]), fields[2]
		if role != RoleExecutor && role != RoleApprover && role != RoleViewer {
			return nil, fmt.Errorf("%s:%d: role %q is not executor, approver or viewer", name, n, role)
		}
		if len(tok) < MinBearerTokenBytes {
			return nil, fmt.Errorf("%s:%d: the token of %q is shorter than %d bytes", name, n, id, MinBearerTokenBytes)
		}
		h := sha256.Sum256([]byte(tok))
		if prev, dup := seen[h]; dup {
			return nil, fmt.Errorf("%s:%d: the token of %q is also used on line %d; give every caller its own", name, n, id, prev)
		}
		seen[h] = n
		a.entries = append(a.entries, authEntry{caller: Caller{Identity: id, Role: role}, hash: h})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(a.entries) == 0 {
		return nil, fmt.Errorf("%s: no callers (lines \"identity role token\")", name)
	}
	return a, nil
}

// lookup returns the caller whose token matches; every entry is compared, in constant time.
func (a *Authenticator) lookup(token string) (Caller, bool) {
	h := sha256.Sum256([]byte(token))
	var found Caller
	ok := 0
	for _, e := range a.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			found, ok = e.caller, 1
		}
	}
	return found, ok == 1
}

type callerKey struct{}

// CallerFrom returns the authenticated caller of an RPC; ok is false when auth is off.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// authorize checks the Authorization header for procedure and returns ctx with the caller.
func (a *Authenticator) authorize(ctx context.Context, procedure string, h http.Header) (context.Context, error) {
	v := h.Get("Authorization")
	tok, ok := strings.CutPrefix(v, "Bearer ")
	if !ok || tok == "" || len(tok) > maxBearerBytes {
		return ctx, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
			"this control plane needs \"Authorization: Bearer <token>\" from its auth file")
	}
	c, found := a.lookup(strings.TrimSpace(tok))
	if !found {
		return ctx, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated, "the bearer token is not in this control plane's auth file")
	}
	if roles, write := writeRoles[procedure]; write {
		allowed := false
		for _, r := range roles {
			allowed = allowed || r == c.Role
		}
		if !allowed {
			return ctx, rpcError(connect.CodePermissionDenied, CodePermissionDenied,
				"%s (role %s) may not call %s; it needs role %s", c.Identity, c.Role, procedure, joinRoles(roles))
		}
	}
	if slot, ok := ctx.Value(callerSlotKey{}).(*Caller); ok {
		*slot = c
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

func joinRoles(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// authInterceptor applies an Authenticator to unary and streaming handlers alike.
type authInterceptor struct{ a *Authenticator }

func (i authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.a.authorize(ctx, req.Spec().Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.a.authorize(ctx, conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
