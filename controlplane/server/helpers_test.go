package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// pgSkipMessage is the skip message of every PostgreSQL test and benchmark without a server.
const pgSkipMessage = "set RBOOK_TEST_POSTGRES_URL (see .ci/postgres) to run this PostgreSQL test"

// testSecret is the approval secret every test server uses.
const testSecret = "server-test-secret-0123456789abcdef"

// rbookBin is the rbook binary built once by TestMain; the cases run it as `rbook serve`.
// With RBOOK_TEST_SERVE_RACE=1 it is built with the race detector too.
var rbookBin string

// testOwner is the owner id every test executor starts runs with.
const testOwner = "test-owner-0123456789"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rbook-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rbookBin = filepath.Join(dir, "rbook")
	args := []string{"build", "-o", rbookBin}
	if os.Getenv("RBOOK_TEST_SERVE_RACE") == "1" {
		args = append(args, "-race") // slower: about a second more per server start
	}
	out, err := exec.Command("go", append(args, "github.com/rbookhq/rbook-action/cmd/rbook")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building cmd/rbook for the end-to-end tests failed: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// Every -race binary sleeps 1 s at exit by default; the e2e tests start hundreds of them.
	// Races are still reported (and fail the process) without the sleep.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reading test; Changed
// signals each write, so a test waits on the output, never on a sleep.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed (and replaced) at each write; nil until Changed is called
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// Changed returns a channel closed at the next write.
func (s *syncBuffer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveProc is a running `rbook serve` process.
type serveProc struct {
	URL, Addr string
	DB        string
	Stderr    *syncBuffer
	cmd       *exec.Cmd
	exited    chan struct{}
	exitErr   error
}

var listeningRE = regexp.MustCompile(`listening on (http://(\S+))`)

// startServe runs `rbook serve --addr 127.0.0.1:0 --db TMP extra...` and waits for its
// "listening on" line. The process is stopped with SIGTERM when the test ends.
func startServe(t testing.TB, extra ...string) *serveProc {
	t.Helper()
	return startServeDir(t, "", extra...)
}

// startServeDir is startServe with the working folder dir ("" is the test's): a
// postgres:// --db must not leave files in the package folder.
func startServeDir(t testing.TB, dir string, extra ...string) *serveProc {
	t.Helper()
	p := &serveProc{DB: filepath.Join(t.TempDir(), "cp.db"), Stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(rbookBin, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", p.DB}, extra...)...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), "RBOOK_APPROVAL_SECRET="+testSecret)
	p.cmd.Stderr = p.Stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	m := listeningRE.FindStringSubmatch(line)
	if m == nil {
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("rbook serve did not report its address (read %q, %v); stderr:\n%s", line, err, p.Stderr.String())
	}
	p.URL, p.Addr = m[1], m[2]
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and waits for the process (killing it after a generous bound).
func (p *serveProc) stop(t testing.TB) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.exitErr
	default:
	}
	h2cTransport.CloseIdleConnections()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("rbook serve did not stop within 30s of SIGTERM")
	}
	return p.exitErr
}

// h2cTransport speaks HTTP/2 without TLS, as gRPC needs. It is shared so that stop can
// close its idle connections: Go's client leaves an idle HTTP/2 connection open after the
// server's GOAWAY, and the server then waits a second before closing it.
var h2cTransport = func() *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}()

func h2cClient() *http.Client { return &http.Client{Transport: h2cTransport} }

// clients are the Go Connect clients of one server, over one protocol.
type clients struct {
	runs rbookv1connect.RunServiceClient
	apps rbookv1connect.ApprovalServiceClient
}

// newClients returns Connect clients; opts choose the protocol (connect.WithGRPC(),
// connect.WithGRPCWeb(), connect.WithProtoJSON(); none means Connect with binary proto).
func newClients(url string, opts ...connect.ClientOption) clients {
	hc := h2cClient()
	return clients{runs: rbookv1connect.NewRunServiceClient(hc, url, opts...), apps: rbookv1connect.NewApprovalServiceClient(hc, url, opts...)}
}

// withBearer sends "Authorization: Bearer token" on unary and streaming calls.
func withBearer(token string) connect.ClientOption {
	return connect.WithInterceptors(bearer(token))
}

type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// grpcConn dials the server with grpc-go (a real gRPC client, not Connect's).
func grpcConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// rbookCode is the ErrorInfo code of a Connect or grpc-go error, or "".
func rbookCode(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if info, ok := v.(*rbookv1.ErrorInfo); ok {
					return info.GetCode()
				}
			}
		}
		return ""
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*rbookv1.ErrorInfo); ok {
				return info.GetCode()
			}
		}
	}
	return ""
}

// wantCode fails unless err carries the connect code and the rbook code, and its message
// starts with the rbook code.
func wantCode(t testing.TB, err error, code connect.Code, rbook string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s (%s), got success", rbook, code)
	}
	if got := connect.CodeOf(err); got != code {
		t.Fatalf("want connect code %s, got %s: %v", code, got, err)
	}
	if got := rbookCode(err); got != rbook {
		t.Fatalf("want ErrorInfo code %s, got %q: %v", rbook, got, err)
	}
	var ce *connect.Error
	if errors.As(err, &ce) && !strings.HasPrefix(ce.Message(), rbook+": ") {
		t.Fatalf("message %q does not start with %s", ce.Message(), rbook)
	}
}

// digest is a plan digest for tests: SHA-256 of name.
func digest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// startRun creates run id with plan digest digest("plan") on c.
func startRun(t testing.TB, c clients, id string) *rbookv1.Run {
	t.Helper()
	return startRunDigest(t, c, id, digest("plan"))
}

func startRunDigest(t testing.TB, c clients, id, planDigest string) *rbookv1.Run {
	t.Helper()
	res, err := c.runs.StartRun(context.Background(), &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: id, Name: "demo",
		ContentHash: planDigest, SchemaHash8: "0123abcd", TotalSteps: 5, StartedBy: "tester"})
	if err != nil {
		t.Fatalf("StartRun %s: %v", id, err)
	}
	return res.GetRun()
}

// transition builds transition seq of a run: run_started, then step_started/step_finished
// pairs with evidence; kind RUN_FINISHED when final is a final status.
func transition(runID string, seq int64, final rbookv1.RunStatus) *rbookv1.Transition {
	t := &rbookv1.Transition{RunId: runID, Seq: seq, Time: timestamppb.New(time.Unix(1_700_000_000+seq, 0)),
		RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING, StepIndex: -1}
	switch {
	case final != rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED:
		t.Kind, t.RunStatus = rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED, final
	case seq == 1:
		t.Kind = rbookv1.TransitionKind_TRANSITION_KIND_RUN_STARTED
	case seq%2 == 0:
		t.Kind, t.StepIndex, t.StepName, t.StepType = rbookv1.TransitionKind_TRANSITION_KIND_STEP_STARTED, int32(seq/2-1), fmt.Sprintf("s%d", seq/2-1), "check"
	default:
		t.Kind, t.StepIndex, t.StepName, t.StepType = rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED, int32(seq/2-1), fmt.Sprintf("s%d", seq/2-1), "check"
		t.Evidence = &rbookv1.Evidence{StepName: t.StepName, Type: "check", Output: fmt.Sprintf(`{"rows":%d}`, seq),
			Status: rbookv1.StepStatus_STEP_STATUS_PASS, TimestampUtc: time.Unix(1_700_000_000+seq, 0).UTC().Format("2006-01-02T15:04:05.000000000Z")}
	}
	return t
}

// epochOf is the run's current lease epoch (every StartRun by testOwner bumps it), or 1
// when the run does not exist.
func epochOf(t testing.TB, c clients, runID string) int64 {
	t.Helper()
	res, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID, PageSize: 1})
	if err != nil {
		return 1
	}
	return res.GetRun().GetLease().GetEpoch()
}

func record(t testing.TB, c clients, tr *rbookv1.Transition) *rbookv1.RecordTransitionResponse {
	t.Helper()
	res, err := c.runs.RecordTransition(context.Background(), &rbookv1.RecordTransitionRequest{Transition: tr, OwnerId: testOwner, Epoch: epochOf(t, c, tr.GetRunId())})
	if err != nil {
		t.Fatalf("RecordTransition %s/%d: %v", tr.GetRunId(), tr.GetSeq(), err)
	}
	return res
}

// gate opens a confirm gate on node "approve" of runID, deadline in from now.
func gate(t testing.TB, c clients, runID string, in time.Duration) (*rbookv1.Approval, string) {
	t.Helper()
	return gateDigest(t, c, runID, in, digest("plan"))
}

func gateDigest(t testing.TB, c clients, runID string, in time.Duration, planDigest string) (*rbookv1.Approval, string) {
	t.Helper()
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, runID), RunId: runID,
		StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(in)), PlanDigest: planDigest, OnFail: "halt"})
	if err != nil {
		t.Fatalf("RequestApproval %s: %v", runID, err)
	}
	if res.GetToken() == "" || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("RequestApproval %s: want a token and a PENDING approval, got %v", runID, res)
	}
	return res.GetApproval(), res.GetToken()
}

// watchApproval opens WatchApproval and returns the stream after its first (current-state)
// message, which it returns too.
func watchApproval(t testing.TB, c clients, id string) (*connect.ServerStreamForClient[rbookv1.WatchApprovalResponse], *rbookv1.Approval) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.apps.WatchApproval(ctx, &rbookv1.WatchApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() {
		t.Fatalf("WatchApproval %s: no first message: %v", id, s.Err())
	}
	return s, s.Msg().GetApproval()
}

// lastApproval reads a watch stream to its end and returns the last approval; the stream
// must end cleanly.
func lastApproval(t testing.TB, s *connect.ServerStreamForClient[rbookv1.WatchApprovalResponse]) *rbookv1.Approval {
	t.Helper()
	var last *rbookv1.Approval
	for s.Receive() {
		last = s.Msg().GetApproval()
	}
	if err := s.Err(); err != nil {
		t.Fatalf("WatchApproval ended with %v", err)
	}
	if last == nil {
		t.Fatal("WatchApproval ended without a further message")
	}
	return last
}
