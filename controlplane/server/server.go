// Package server is the rbook control plane's RPC layer (ARCHITECTURE.md;
// docs/control-plane.md): the rbook.v1 RunService and ApprovalService handlers over controlplane/store,
// served with Connect, gRPC and gRPC-Web on one port, with gRPC reflection and health,
// bearer-token auth, message-size limits, one structured log line per RPC, watch fan-out
// and the gate-deadline timer.
//
// Store errors are mapped to connect codes here, with an rbook.v1.ErrorInfo detail and a
// message that starts with the rbook code; no SQL text and no token reaches a client or a
// log line (ARCHITECTURE.md; docs/decisions/approval-tokens.md).
package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/console"
	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/signin"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// DefaultMaxMessageBytes caps a request message (4 MiB); larger ones get RESOURCE_EXHAUSTED
// before they are decoded.
const DefaultMaxMessageBytes = 4 << 20

// Options configure the handlers.
type Options struct {
	// Secret is the approval-token HMAC secret, at least approval.MinSecretBytes; required
	// (docs/decisions/approval-tokens.md: the server refuses to start without one). See approval.SecretFromEnv.
	// It signs every token and verifies them.
	Secret []byte
	// PreviousSecret, when set, only verifies: tokens of gates opened before the secret was
	// rotated still decide them (RBOOK_APPROVAL_SECRET_PREVIOUS; docs/tls.md, "Rotating
	// the approval secret"). At least approval.MinSecretBytes when set.
	PreviousSecret []byte
	// ClientCAs, when set, are the CAs TLS client certificates must chain to (rbook serve
	// --tls-client-ca; docs/tls.md, "Client certificates"): a request whose certificate does
	// not verify is refused (E_UNAUTHENTICATED), and a verified one is the executor
	// cert:<subject common name> when the request has no Authorization header or session.
	// With it and no Auth, New creates an empty Authenticator, so callers without
	// credentials are refused.
	ClientCAs *x509.CertPool
	// Auth checks bearer tokens on every rbook.v1 RPC; nil turns auth off (loopback laptop
	// mode: every call is allowed). Reflection and health never need a token.
	Auth *Authenticator
	// GatePolicy says, per runbook and gate, how many distinct approvers a gate needs, who may
	// decide it and whether the run's starter may approve (docs/approvals.md, "Gate policy"); it is captured on
	// each approval when the gate opens. Nil: every gate needs one approval by anyone with the
	// approver role, not by the run's starter (approval.Default). Who is who needs Auth:
	// without it, approver names are unverified and only approvals_required applies.
	GatePolicy *approval.GatePolicy
	// OIDC verifies GitHub Actions OIDC tokens (docs/control-plane.md, "OIDC"): a bearer value shaped like a
	// JWT goes to it, anything else to Auth. With OIDC and no Auth, only OIDC callers get in.
	// New attaches it to Auth (creating an empty one when Auth is nil).
	OIDC *auth.Verifier
	// Logger receives one line per RPC and storage failures; nil means slog.Default().
	Logger *slog.Logger
	// MaxMessageBytes caps request messages; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// GitHub, when set, serves the GitHub App's webhook at /github/webhook (docs/approvals.md, "GitHub App webhook");
	// nil answers that path 404.
	GitHub *GitHubOptions
	// PlaybookPolicy is the auto-pass policy evaluated at playbook approval nodes
	// (RequestApproval with a policy context; docs/decisions/auto-pass-policy.md), e.g.
	// approval.LoadPlaybookPolicy(file) for rbook serve --playbook-policy; nil means
	// approval.DefaultPolicyRules() alone.
	PlaybookPolicy *approval.Policy
	// PolicyShadow records what the policy would have decided on each playbook gate without
	// acting on it: every gate waits for a human (rbook serve --policy-shadow).
	PolicyShadow bool
	// LocalApprover, on a control plane without Auth, is a secret that lets a caller on a
	// loopback address decide gates by approval id: it sends the secret as its bearer token,
	// and the vote is recorded as "unverified:<the name it gives>". The embedded control plane
	// of `rbook run` sets it from .rbook/local-approver-key (0600), which the CLI reads. Without
	// it (and with Auth set, where it is ignored), deciding by approval id needs an
	// authenticated caller: on a networked control plane the token is the only capability.
	LocalApprover []byte
	// LocalPerson is the OS user name of the person at the keyboard, on a control plane
	// without Auth (the embedded one of `rbook run` sets it). A same-origin browser request
	// from a loopback peer, with a loopback Host header, is that person: WhoAmI answers
	// method "local", identity "unverified:<LocalPerson>", and Approve and Reject by approval
	// id record that identity (docs/console-signin.md, "The laptop run"). Requests with any
	// other Host header are refused (DNS rebinding). Ignored when Auth is set.
	LocalPerson string
	// SignIn is the parsed --sign-in-config: the OIDC and GitHub providers people sign in to
	// the console with and the rules that give them a role (docs/console-signin.md). With
	// SignIn or an auth file, the server serves /auth/ (token sign-in needs the auth file),
	// and a console session cookie is a credential beside bearer tokens. SignIn without Auth
	// creates an empty Authenticator, as OIDC does.
	SignIn *auth.SignInConfig
	// PublicURL is the URL approvers reach this control plane's console at (rbook serve
	// --public-url), as consolelink.ParsePublicURL accepts it; New trims its trailing slash.
	// With it every Approval a response carries has approval_url, the gate's page
	// (consolelink.ApprovalURL), and GitHub status reports link to that page. "" means no links.
	// Sign-in providers redirect back to it, WhoAmI reports it, and an https URL makes the
	// console's cookies Secure behind a TLS proxy.
	PublicURL string
	// Notify, when set, turns the notification outbox on (store.EnableNotificationOutbox)
	// and runs its delivery loop: gate and run events routed to the configured channels
	// (rbook serve --notify-config; docs/notifications.md). nil sends nothing.
	Notify *NotifyOptions
	// People is the directory of people (rbook serve --people; docs/people.md): who is the
	// same person across the auth file, GitHub, Slack and console sign-ins. Votes record
	// their person, M-of-N counts distinct people and four-eyes compares people. New folds the
	// auth file's github= links into it (people.Directory.LinkAuth); nil is an empty directory,
	// to which New still adds those links. New may add to the Directory given.
	People *people.Directory
	// Limits are the per-client rate limits and body caps of the webhook, Slack, sign-in and
	// console endpoints (limits.go; rbook serve sets DefaultLimits and its --rate-limit-*
	// flags); nil limits nothing (the embedded control plane, tests).
	Limits *Limits
	// Retention, when set with a positive Age, runs the retention loop: finished runs older
	// than Age are pruned in batches, exported first to ExportDir when set (rbook serve
	// --retention; docs/backup.md, "Retention"). nil keeps every run.
	Retention *RetentionOptions
	// Metrics, when set, is served at /metrics (metrics.Path) and counts what the control
	// plane does (docs/metrics.md; rbook serve --metrics). nil serves and counts nothing.
	Metrics *metrics.Metrics
	// MetricsToken, when set, is the bearer token /metrics requires (rbook serve
	// --metrics-token-file); empty serves it to everyone, as health is.
	MetricsToken []byte
	// Signer, when set, signs each finished run's attestation and each gate decision's review
	// attestation, and its public key is published at attest.KeysPath (rbook serve
	// --signing-key; docs/attestations.md). nil signs nothing: GetAttestation answers
	// E_ATTESTATION_UNAVAILABLE.
	Signer attest.Signer
	// PreviousKeys are retired signing keys, published at attest.KeysPath for verification
	// only, so attestations they signed still verify after a rotation (rbook serve
	// --signing-key-previous; docs/attestations.md, "Rotation").
	PreviousKeys []attest.PublicKey
}

// Server is the control plane's http.Handler. Create it with New; Close it before closing
// its store.
type Server struct {
	st     *store.Store
	opts   Options
	log    *slog.Logger
	hub    *hub
	mux    *http.ServeMux
	health *grpchealth.StaticChecker

	rearm       chan struct{} // wakes the deadline loop when a gate with a deadline opens
	streamsDone chan struct{} // closed by EndStreams: every open stream returns
	endOnce     sync.Once
	dbDown      atomic.Bool // the store lost its database (dbhealth.go)
	stopLoop    context.CancelFunc
	loopDone    chan struct{}
	// gates is the GitHub App's handler and protection rule delivery loop (nil without
	// GitHub options); gatesDone closes when that loop ended.
	gates     *githubGates
	gatesDone chan struct{}
	// notifier delivers the notification outbox (nil without Options.Notify); notifyDone
	// closes when its loop ended.
	notifier   *notifier
	notifyDone chan struct{}
	// retentionDone closes when the retention loop ended (nil without Options.Retention).
	retentionDone chan struct{}
	// policy is opts.PlaybookPolicy, else the compiled default rules.
	policy *approval.Policy
	// signin serves /auth/ and looks console sessions up (nil without Auth and SignIn).
	signin *signin.Handler
	// handler is mux wrapped in cross-origin protection and the local-person check.
	handler http.Handler
	// people is opts.People with the auth file folded in (never nil).
	people *people.Directory
	// limits are the buckets of Options.Limits (nil without them).
	limits *limiters
	// certs caches client certificates' verdicts (tls.go); nil without Options.ClientCAs.
	certs *certVerdicts
	// metrics is opts.Metrics (nil: off; its methods then do nothing); resume holds the
	// approve-to-resume clocks (metrics.go).
	metrics *metrics.Metrics
	resume  resumeClock
}

// New builds the handler over st and starts the gate-deadline timer. It must be called
// before st serves other writers (it loads the pending gates first). Errors: a missing or
// short Secret, a storage failure while loading pending gates.
//
// Over a store from store.OpenReadOnly it is a read-only view (the CLI
// reads an ended embedded run's history in-process): no Secret is needed, no deadline timer
// runs, reads answer as usual and every write RPC fails with PERMISSION_DENIED.
func New(st *store.Store, opts Options) (*Server, error) {
	if len(opts.Secret) < approval.MinSecretBytes && !st.ReadOnly() {
		return nil, fmt.Errorf("server: %w", approval.ErrWeakSecret)
	}
	if len(opts.PreviousSecret) > 0 && len(opts.PreviousSecret) < approval.MinSecretBytes {
		return nil, fmt.Errorf("server: the previous approval secret: %w", approval.ErrWeakSecret)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pub, err := consolelink.ParsePublicURL(opts.PublicURL, "public URL")
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	opts.PublicURL = pub
	dir := opts.People
	if dir == nil {
		dir = people.Empty()
	}
	if err := dir.LinkAuth(opts.Auth.PeopleLinks()); err != nil {
		return nil, fmt.Errorf("server: people: %w", err)
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	s := &Server{st: st, opts: opts, log: opts.Logger, rearm: make(chan struct{}, 1),
		streamsDone: make(chan struct{}), loopDone: make(chan struct{}), people: dir, metrics: opts.Metrics}
	if opts.ClientCAs != nil {
		s.certs = newCertVerdicts(opts.ClientCAs)
	}
	s.policy = opts.PlaybookPolicy
	if s.policy == nil {
		p, err := approval.CompilePolicy(approval.DefaultPolicyRules())
		if err != nil {
			return nil, fmt.Errorf("server: default auto-pass policy: %w", err)
		}
		s.policy = p
	}
	s.hub = newHub(s.wakeDeadlines)
	if err := s.hub.load(context.Background(), st); err != nil {
		return nil, fmt.Errorf("server: load pending approvals: %w", err)
	}
	unsubscribe := st.Subscribe(s.hub.publish)

	if opts.OIDC != nil || opts.SignIn != nil || opts.ClientCAs != nil {
		if opts.Auth == nil {
			opts.Auth = &Authenticator{}
		}
		if opts.OIDC != nil {
			opts.Auth.oidc = opts.OIDC
		}
		opts.Auth.certs = opts.ClientCAs != nil
		s.opts.Auth = opts.Auth
	}
	if s.signin, err = s.sessionHandler(); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.signin != nil {
		opts.Auth.sessions = s.signin
	}
	interceptors := []connect.Interceptor{logInterceptor{s.log}}
	if opts.Auth != nil {
		interceptors = append(interceptors, authInterceptor{opts.Auth})
	} else if len(opts.LocalApprover) > 0 {
		interceptors = append(interceptors, localApproverInterceptor{opts.LocalApprover})
	}
	handlerOpts := []connect.HandlerOption{
		connect.WithInterceptors(traceInterceptor{}), // outermost: the log line and the handlers see the span (tracing.go)
		connect.WithInterceptors(interceptors...),
		connect.WithReadMaxBytes(opts.MaxMessageBytes),
		connect.WithRecover(s.recoverPanic),
	}
	s.mux = http.NewServeMux()
	s.mux.Handle(rbookv1connect.NewRunServiceHandler(runService{s}, handlerOpts...))
	s.mux.Handle(rbookv1connect.NewApprovalServiceHandler(approvalService{s}, handlerOpts...))
	s.mux.Handle(rbookv1connect.NewIdentityServiceHandler(identityService{s}, handlerOpts...))
	if s.signin != nil {
		s.mux.Handle("/auth/", s.signin)
	}
	s.handler = s.withLimits(s.buildHandler())
	files, err := reflectionResolver()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// Reflection resolves from the descriptors with the proto's comments.
	names := []string{rbookv1connect.RunServiceName, rbookv1connect.ApprovalServiceName, rbookv1connect.IdentityServiceName, grpchealth.HealthV1ServiceName}
	reflector := grpcreflect.NewReflector(grpcreflect.NamerFunc(func() []string { return names }), grpcreflect.WithDescriptorResolver(files))
	s.mux.Handle(grpcreflect.NewHandlerV1(reflector))
	s.mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	s.health = grpchealth.NewStaticChecker(rbookv1connect.RunServiceName, rbookv1connect.ApprovalServiceName, rbookv1connect.IdentityServiceName)
	s.mux.Handle(grpchealth.NewHandler(dbChecker{s: s, static: s.health}))
	if err := s.mountGitHub(); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.mountSlack()
	if err := s.mountKeys(); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("server: %w", err)
	}
	unsubMetrics := s.mountMetrics()
	// The approver's console: every path no service claims gets the page or its assets
	// (docs/console.md). The Connect services keep their /rbook.v1.X/ paths.
	s.mux.Handle("/", console.Handler())

	ctx, cancel := context.WithCancel(context.Background())
	s.stopLoop = func() { cancel(); unsubscribe(); unsubMetrics() }
	if st.ReadOnly() {
		close(s.loopDone) // gates cannot expire in a database nobody writes
		return s, nil
	}
	go s.deadlineLoop(ctx)
	if s.gates != nil {
		s.gatesDone = make(chan struct{})
		unsubGates := st.Subscribe(func(c store.Change) {
			if len(c.Approvals) > 0 {
				s.gates.poke()
			}
		})
		stop := s.stopLoop
		s.stopLoop = func() { stop(); unsubGates() }
		go s.gates.loop(ctx, s.gatesDone)
	}
	if opts.Notify != nil && opts.Notify.Config != nil {
		st.EnableNotificationOutbox()
		s.notifier = newNotifier(s, opts.Notify)
		s.notifyDone = make(chan struct{})
		unsubNotify := st.Subscribe(func(c store.Change) {
			if c.Notifies() {
				s.notifier.poke()
			}
		})
		stop := s.stopLoop
		s.stopLoop = func() { stop(); unsubNotify() }
		go s.notifier.start(ctx, s.notifyDone)
	}
	s.startRetention(ctx)
	return s, nil
}

// ServeHTTP routes to the RPC handlers and /auth/, behind cross-origin protection
// (buildHandler).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// EndStreams marks the server not serving (gRPC health) and makes every open WatchRun and
// WatchApproval stream end with UNAVAILABLE (E_RETRY), so a graceful shutdown is not held
// up by streams that would otherwise last as long as a run.
func (s *Server) EndStreams() {
	s.endOnce.Do(func() {
		s.health.SetStatus("", grpchealth.StatusNotServing)
		s.health.SetStatus(rbookv1connect.RunServiceName, grpchealth.StatusNotServing)
		s.health.SetStatus(rbookv1connect.ApprovalServiceName, grpchealth.StatusNotServing)
		s.health.SetStatus(rbookv1connect.IdentityServiceName, grpchealth.StatusNotServing)
		close(s.streamsDone)
	})
}

// Close ends open streams, stops the deadline timer and unsubscribes from the store. It
// does not close the store. It always returns nil.
func (s *Server) Close() error {
	s.EndStreams()
	s.stopLoop()
	<-s.loopDone
	if s.notifyDone != nil {
		<-s.notifyDone
	}
	if s.gatesDone != nil {
		<-s.gatesDone
	}
	if s.retentionDone != nil {
		<-s.retentionDone
	}
	return nil
}

func (s *Server) recoverPanic(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
	s.log.ErrorContext(ctx, "panic in handler", "procedure", spec.Procedure, "panic", fmt.Sprint(p))
	return rpcError(connect.CodeInternal, CodeInternal, "internal error; details are in the server log")
}

// wakeDeadlines re-arms the deadline loop; it never blocks (it runs on the store's writer).
func (s *Server) wakeDeadlines() {
	select {
	case s.rearm <- struct{}{}:
	default:
	}
}

// deadlineRetry is how long the deadline loop waits after a storage failure.
const deadlineRetry = 5 * time.Second

// deadlineLoop sleeps until the earliest pending gate deadline (store.NextDeadline), closes
// due gates as expired (store.ExpireDueApprovals; their tokens stop working, so a late
// decision cannot approve a step that already timed out) and
// sleeps again. A new gate with a deadline wakes it to re-read the earliest one.
func (s *Server) deadlineLoop(ctx context.Context) {
	outboxLoop{wake: s.rearm}.run(ctx, s.loopDone, s.expireDue)
}

// expireDue closes the gates that are due and returns how long until the next deadline
// (ok=false: no pending deadline).
func (s *Server) expireDue(ctx context.Context) (wait time.Duration, ok bool) {
	for {
		next, ok, err := s.st.NextDeadline(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) && s.dbUnreachable(ctx, err) == nil {
				s.log.Error("reading the next gate deadline failed", "err", err)
			}
			return deadlineRetry, true
		}
		if !ok {
			return 0, false
		}
		now := time.Now()
		if next.After(now) {
			return next.Sub(now), true
		}
		expired, err := s.st.ExpireDueApprovals(ctx, now)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) && s.dbUnreachable(ctx, err) == nil {
				s.log.Error("closing expired gates failed", "err", err)
			}
			return deadlineRetry, true
		}
		for _, a := range expired {
			s.log.Info("gate expired", "approval_id", a.ApprovalID, "run_id", a.RunID, "node_id", a.NodeID)
			s.reviewAttestation(ctx, a) // an expiry is a decision too (docs/attestations.md)
		}
	}
}

// logInterceptor writes one line per RPC: procedure, protocol, peer, caller, connect code,
// rbook code and duration. It never logs messages (they may carry tokens).
type logInterceptor struct{ log *slog.Logger }

func (l logInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start, slot := time.Now(), new(Caller)
		res, err := next(context.WithValue(ctx, callerSlotKey{}, slot), req)
		l.line(ctx, req.Spec().Procedure, req.Peer(), *slot, start, err)
		return res, err
	}
}

func (l logInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l logInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start, slot := time.Now(), new(Caller)
		err := next(context.WithValue(ctx, callerSlotKey{}, slot), conn)
		l.line(ctx, conn.Spec().Procedure, conn.Peer(), *slot, start, err)
		return err
	}
}

// callerSlotKey holds a *Caller that the auth interceptor (inside the log interceptor)
// fills in, so the log line can name the caller.
type callerSlotKey struct{}

func (l logInterceptor) line(ctx context.Context, procedure string, peer connect.Peer, caller Caller, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	attrs := []slog.Attr{
		slog.String("procedure", procedure), slog.String("protocol", peer.Protocol), slog.String("peer", peer.Addr),
		slog.String("code", code), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
	}
	if caller.Identity != "" {
		attrs = append(attrs, slog.String("caller", caller.Identity))
	}
	if rc := errorCode(err); rc != "" {
		attrs = append(attrs, slog.String("error_code", rc))
	}
	level := slog.LevelInfo
	if connect.CodeOf(err) == connect.CodeInternal {
		level = slog.LevelError
	}
	l.log.LogAttrs(ctx, level, "rpc", attrs...)
}
