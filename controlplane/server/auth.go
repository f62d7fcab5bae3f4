package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/signin"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Role is what an authenticated caller may do (docs/control-plane.md, "Authentication: the auth file": "bearer tokens for callers
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

// b64token is the syntax of a bearer token (RFC 6750, section 2.1): letters, digits and
// "-._~+/", then optionally "=" at the end. It has no room for whitespace, so a token is
// exactly what the auth file holds.
var b64token = lazyregexp.New(`^[A-Za-z0-9._~+/-]+=*$`)

// bearerToken extracts the token of a request's Authorization header.
// Exactly one Authorization header is accepted, of the form "Bearer <token>": the scheme
// compared without regard to case (RFC 9110, section 11.1: "Bearer", "bearer" and "BEARER"
// are the same scheme), then exactly one space, then a b64token up to maxBearerBytes.
// Anything else — no header, two headers, another scheme, two spaces or a tab, whitespace or
// other characters around or inside the token — is refused, never trimmed. (HTTP/1.1 itself
// strips whitespace before and after a whole field value, RFC 9110 section 5.5, so such
// whitespace never reaches the server; HTTP/2 and gRPC deliver it, and it is refused.)
func bearerToken(h http.Header) (string, bool) {
	vs := h.Values("Authorization")
	if len(vs) != 1 || len(vs[0]) > len("Bearer ")+maxBearerBytes {
		return "", false
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !b64token.MatchString(tok) {
		return "", false
	}
	return tok, true
}

// writeRoles lists, per procedure that changes something, the roles allowed to call it.
// Procedures not listed here are reads, open to every role.
var writeRoles = map[string][]Role{
	rbookv1connect.RunServiceStartRunProcedure:             {RoleExecutor},
	rbookv1connect.RunServiceRecordTransitionProcedure:     {RoleExecutor},
	rbookv1connect.RunServiceRecordTransitionsProcedure:    {RoleExecutor},
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
	// Groups are the line's groups= attribute: names a gate policy's "group:<name>" approvers
	// match (docs/approvals.md, "Gate policy"). Nil when the line has none.
	Groups []string
	// GitHubLogin is the line's github= attribute: the GitHub login of this identity, so four-eyes
	// also refuses it as approver of a run its GitHub account started (docs/approvals.md, "Gate policy").
	GitHubLogin string
	// GitHub holds the verified claims of a GitHub Actions OIDC caller (docs/control-plane.md, "OIDC";
	// identity oidc:<repository>@<ref>, role executor); nil for an auth-file caller.
	GitHub *auth.GitHubClaims
}

type authEntry struct {
	caller Caller
	hash   [sha256.Size]byte
	// where is the entry's "file:line", for the people directory's messages.
	where string
}

// Authenticator checks bearer tokens against an auth file's entries. Tokens are kept only as
// SHA-256 hashes and compared in constant time.
type Authenticator struct {
	entries []authEntry
	// oidc, when set, verifies bearer values shaped like a JWT (Options.OIDC; oidc.go).
	oidc *auth.Verifier
	// sessions, when set, turns a console session cookie into a caller (session.go).
	sessions *signin.Handler
	// certs makes a verified TLS client certificate a caller (Options.ClientCAs; tls.go).
	certs bool
}

// LoadAuthFile reads an auth file: one caller per line, "identity role token [attr=value…]",
// where role is executor, approver or viewer and token is at least MinBearerTokenBytes of
// bearer-token characters (b64token, RFC 6750: what a client can send);
// blank lines and lines starting with '#' are ignored. Optional attributes after the token
// (docs/approvals.md, "Gate policy"): groups=sre,dba (the caller's groups, for a gate policy's "group:<name>")
// and github=LOGIN (the caller's GitHub login, for four-eyes against a run's GitHub actor);
// each at most once. Errors name the file and line (never the token): unreadable or oversized
// file, too few fields, an identity with ':' or ',' or a reserved one (checkAuthIdentity),
// two approver identities with the same github= login (compared without regard to case), unknown role, short, malformed or duplicate token, unknown, repeated
// or malformed attribute, no entries.
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
	approverLogins := map[string]struct {
		id   string
		line int
	}{} // lowercased github= login of an approver line → its identity and line
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
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want \"identity role token [groups=a,b] [github=login]\", got %s", name, n, yamlerr.Plural(len(fields), "field", "fields"))
		}
		id, role, tok := fields[0], Role(fields[1]), fields[2]
		if err := checkAuthIdentity(id); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if role != RoleExecutor && role != RoleApprover && role != RoleViewer {
			return nil, fmt.Errorf("%s:%d: role %q is not executor, approver or viewer", name, n, role)
		}
		if len(tok) < MinBearerTokenBytes {
			return nil, fmt.Errorf("%s:%d: the token of %q is shorter than %d bytes", name, n, id, MinBearerTokenBytes)
		}
		if len(tok) > maxBearerBytes || !b64token.MatchString(tok) {
			return nil, fmt.Errorf("%s:%d: the token of %q is not a bearer token: at most %d of the characters A-Z a-z 0-9 - . _ ~ + /, then optionally = at the end (RFC 6750)", name, n, id, maxBearerBytes)
		}
		h := sha256.Sum256([]byte(tok))
		if prev, dup := seen[h]; dup {
			return nil, fmt.Errorf("%s:%d: the token of %q is also used on line %d; give every caller its own", name, n, id, prev)
		}
		seen[h] = n
		c := Caller{Identity: id, Role: role}
		if err := parseAuthAttrs(&c, fields[3:]); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, n, id, err)
		}
		if c.Role == RoleApprover && c.GitHubLogin != "" {
			// One GitHub account is one person: two approver identities linked to it would
			// count twice toward a gate's M distinct approvals.
			login := strings.ToLower(c.GitHubLogin)
			if prev, dup := approverLogins[login]; dup && prev.id != id {
				return nil, fmt.Errorf("%s:%d: %s: github=%s is also the login of approver %q on line %d; one person's approvals would count twice",
					name, n, id, c.GitHubLogin, prev.id, prev.line)
			}
			approverLogins[login] = struct {
				id   string
				line int
			}{id, n}
		}
		a.entries = append(a.entries, authEntry{caller: c, hash: h, where: fmt.Sprintf("%s:%d", name, n)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(a.entries) == 0 {
		return nil, fmt.Errorf("%s: no callers (lines \"identity role token\")", name)
	}
	return a, nil
}

// reservedIdentities are names the control plane records for decisions nobody's token made
// (store.Approval.Approver "system" for deadlines and withdrawals, "policy" for auto-passed
// gates, "anonymous" for an unauthenticated caller without a name).
var reservedIdentities = map[string]bool{"system": true, "policy": true, "anonymous": true}

// checkAuthIdentity refuses an auth-file identity that could pass for another kind of name
// (docs/approvals.md, "Gate policy"): one with ':' would read as "unverified:<name>" (an asserted name),
// "github:<login>" or "group:<name>" (gate-policy approvers) or "oidc:<repo>@<ref>" (a job);
// one with ',' would split in an approver list ("alice, bob"); and the reserved names.
func checkAuthIdentity(id string) error {
	if strings.ContainsAny(id, ":,") || reservedIdentities[id] {
		return fmt.Errorf("identity %q is reserved or has ':' or ','; an identity is a plain name such as alice or ci-bot (\"github:<login>\" is the github= attribute, \"group:<name>\" the groups= attribute)", truncate(id, 40))
	}
	return nil
}

// Auth-file attribute syntax (docs/approvals.md, "Gate policy").
var (
	groupNameRE   = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)
	githubLoginRE = lazyregexp.New(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
)

// parseAuthAttrs applies an auth-file line's attributes (after the token) to c.
func parseAuthAttrs(c *Caller, attrs []string) error {
	seen := map[string]bool{}
	for i, kv := range attrs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (k != "groups" && k != "github") {
			// Never echo the field: a misplaced token may be in it.
			return fmt.Errorf("field %d is not an attribute (attributes after the token: groups=a,b and github=login)", i+4)
		}
		if seen[k] {
			return fmt.Errorf("attribute %s= is given twice", truncate(k, 40))
		}
		seen[k] = true
		switch k {
		case "groups":
			for _, g := range strings.Split(v, ",") {
				if !groupNameRE.MatchString(g) {
					return fmt.Errorf("groups=: %q is not a group name (1-64 of A-Z a-z 0-9 . _ -, separated by commas)", truncate(g, 40))
				}
				c.Groups = append(c.Groups, g)
			}
		case "github":
			if !githubLoginRE.MatchString(v) {
				return fmt.Errorf("github=: %q is not a GitHub login (1-39 letters, digits or -, not starting with -)", truncate(v, 40))
			}
			c.GitHubLogin = v
		}
	}
	return nil
}

// Approvers lists the callers of the auth file with the approver role, in file order (one
// entry per line: an identity with two tokens appears twice). For start-up checks such as a
// gate policy naming approvers nobody can be (docs/approvals.md, "Gate policy"); never tokens.
func (a *Authenticator) Approvers() []Caller {
	var out []Caller
	for _, e := range a.entries {
		if e.caller.Role == RoleApprover {
			out = append(out, e.caller)
		}
	}
	return out
}

// PeopleLinks lists every line of the auth file as the people directory folds it in
// (people.Directory.LinkAuth; docs/people.md, "The auth file"): its identity, its github=
// login and "file:line". Never tokens. Nil on a nil *Authenticator.
func (a *Authenticator) PeopleLinks() []people.AuthLink {
	if a == nil {
		return nil
	}
	out := make([]people.AuthLink, 0, len(a.entries))
	for _, e := range a.entries {
		out = append(out, people.AuthLink{Identity: e.caller.Identity, GitHubLogin: e.caller.GitHubLogin, Where: e.where})
	}
	return out
}

// lookup returns the caller whose token matches. The token is hashed and compared with every
// entry's hash in constant time (crypto/subtle), so neither which entry matched nor how much
// of a token was right shows in the time taken.
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

// authorize finds the caller of procedure and returns ctx with it: a bearer token of the
// auth file, a GitHub Actions OIDC token (a JWT), or, when the request has no Authorization
// header, a console session cookie (docs/console-signin.md, "Sessions"), which gives the
// same Caller a token does, so the role check below, the gate policy and four-eyes apply to
// every client alike. IdentityService.WhoAmI answers a caller without credentials (or with
// an ended session) as anonymous instead of refusing it.
func (a *Authenticator) authorize(ctx context.Context, procedure string, h http.Header) (context.Context, error) {
	whoAmI := procedure == rbookv1connect.IdentityServiceWhoAmIProcedure
	var (
		c   Caller
		err error
	)
	if len(h.Values("Authorization")) == 0 && a.sessions != nil {
		sess, lerr := a.sessions.Lookup(ctx, h, transportOf(ctx).tls)
		switch {
		case lerr == nil:
			c = sessionCaller(sess)
			ctx = context.WithValue(ctx, sessionKey{}, sess)
		case whoAmI && (errors.Is(lerr, signin.ErrNoSession) || errors.Is(lerr, signin.ErrSessionEnded)):
			return ctx, nil
		case errors.Is(lerr, signin.ErrSessionEnded):
			return ctx, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated, "your console session ended (signed out or expired); sign in again")
		case !errors.Is(lerr, signin.ErrNoSession):
			return ctx, rpcError(connect.CodeUnavailable, CodeRetry, "the session could not be checked: the database is unreachable; try again in a moment")
		}
	}
	if t := transportOf(ctx); a.certs && t.certErr != nil {
		return ctx, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated, "%s", t.certErr.Error())
	} else if c.Identity == "" && a.certs && t.certIdentity != "" && len(h.Values("Authorization")) == 0 {
		c = certCaller(t.certIdentity)
	}
	if c.Identity == "" {
		if whoAmI && len(h.Values("Authorization")) == 0 {
			return ctx, nil
		}
		if c, err = a.bearerCaller(ctx, h); err != nil {
			return ctx, err
		}
	}
	if !roleMay(c.Role, procedure) {
		return ctx, rpcError(connect.CodePermissionDenied, CodePermissionDenied,
			"%s (role %s) may not call %s; it needs role %s", c.Identity, c.Role, procedure, joinRoles(writeRoles[procedure]))
	}
	if slot, ok := ctx.Value(callerSlotKey{}).(*Caller); ok {
		*slot = c
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

// bearerCaller is the caller of the request's "Authorization: Bearer" token: an OIDC
// caller for a JWT, else the auth file's line with that token.
func (a *Authenticator) bearerCaller(ctx context.Context, h http.Header) (Caller, error) {
	tok, ok := bearerToken(h)
	if !ok && a.certs {
		return Caller{}, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
			"this control plane needs one \"Authorization: Bearer <token>\" header, with a token from its auth file and no other spaces, "+
				"or a TLS client certificate signed by a CA of its --tls-client-ca whose subject has a common name (RBOOK_CLIENT_CERT, RBOOK_CLIENT_KEY)")
	}
	if !ok {
		return Caller{}, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
			"this control plane needs one \"Authorization: Bearer <token>\" header, with a token from its auth file and no other spaces")
	}
	if a.oidc != nil && auth.LooksLikeJWT(tok) {
		return a.verifyOIDC(ctx, tok)
	}
	if len(a.entries) == 0 {
		return Caller{}, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
			"this control plane accepts only GitHub Actions OIDC tokens (a JWT), and the bearer token is not one")
	}
	c, found := a.lookup(tok)
	if !found {
		return Caller{}, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated, "the bearer token is not in this control plane's auth file")
	}
	return c, nil
}

// roleMay reports whether a caller with role may call procedure: every role may call a read,
// and a write (writeRoles) only the roles listed for it.
func roleMay(role Role, procedure string) bool {
	roles, write := writeRoles[procedure]
	return !write || slices.Contains(roles, role)
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
