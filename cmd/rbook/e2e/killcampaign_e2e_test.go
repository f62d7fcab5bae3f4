package e2e

// The kill -9 campaign: a ~20-step runbook (checks against the demo inventory, deploys,
// rollback steps, two confirm gates) runs with the state file only (--control-plane off) and
// against a separate `rbook serve` on SQLite. Each cycle kills `rbook run` with SIGKILL at a
// random point of the run, or at a point aimed at its last tenth, finishes the run as a user
// would, and then compares the run's records: the state file, its evidence pack file and, with
// a control plane, the control plane's record.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/attest"
	"github.com/rbookhq/rbook-action/internal/evidenceverify"
)

// Kill points per mode (kills that landed while the run was going) when RBOOK_KILL_CYCLES
// (kills at random points) and RBOOK_KILL_AIMED (kills aimed at the last tenth of a run) are
// unset: small, so CI stays under a minute. The acceptance campaign is 200 and 100 per mode
// (docs/development.md, "The kill -9 campaign").
const (
	killDefaultRandom = 3
	killDefaultAimed  = 2
)

// Random kills are sent at a delay uniform in [0, range] after the start; aimed kills wait
// until the state file says at least killAimFraction of the runbook's steps completed
// (last_completed_step_index, or a final run_status), polled every killAimPoll, and then a
// delay uniform in [0, range]: the kills cover the last steps, the evidence pack write, the
// final state write and the exit. Each family's range starts at killCampaignSpread × what the
// uninterrupted runs took (the whole run; the tail from the aim point to the exit) and then
// follows the machine's speed: a cycle whose run exited before its kill shrinks it by
// killRangeShrink, a kill that landed in the run grows it by killRangeGrow. So about one cycle
// in six (ln 1.02 / (ln 1.02 − ln 0.9)) ends before its kill, which covers "a final run, then
// a new run", and the rest land in the run however loaded the machine is.
const (
	killCampaignSpread = 1.2
	killAimFraction    = 0.9
	killAimPoll        = 2 * time.Millisecond
	killRangeShrink    = 0.9
	killRangeGrow      = 1.02
)

// killHang bounds one rbook invocation of the campaign; it is longer than the gates'
// max_timeout_seconds, so a gate nobody decided shows as a timed-out gate, not as a hang.
const killHang = 6 * time.Minute

// campaignName is the runbook the campaign writes into the work dir.
const campaignName = "campaign"

// campaignRunbook returns testdata/campaign/campaign.yaml, a runbook of 23 steps: 13 checks
// against the demo inventory (some PASS, some FAIL under on_fail continue), 5 deploys, 3
// rollback steps right after deploys and two confirm gates. Its last check's environment and on_fail come from the values file, so one runbook
// ends three ways: COMPLETED, FAILED after a compensating rollback, FAILED by halt. The gates
// wait up to 300 s (max_step_timeout_seconds); the campaign approves each as soon as it opens.
// The test fails when the file does not hold campaignSteps steps.
func campaignRunbook(t *testing.T) string {
	t.Helper()
	rb := string(fixture(t, "campaign", "campaign.yaml"))
	if n := strings.Count(rb, "\n  - {name: "); n != campaignSteps {
		t.Fatalf("testdata/campaign/campaign.yaml has %d steps, want %d (campaignSteps)", n, campaignSteps)
	}
	return rb
}

// campaignSteps is the number of steps of campaignRunbook.
const campaignSteps = 23

// campaignVariant is one values file of the campaign runbook and the final status it leads to.
type campaignVariant struct {
	env, onFail string
	want        engine.RunStatus
}

var campaignVariants = []campaignVariant{
	{"staging", "rollback", engine.RunCompleted}, // no staging resource: the check passes
	{"prod", "rollback", engine.RunFailed},       // fails, rollback-final-config compensates
	{"prod", "halt", engine.RunFailed},           // fails, the run halts
}

// killMode is where a campaign's runs are recorded.
type killMode struct {
	// name is the subtest's name and the value RBOOK_KILL_MODE selects it by.
	name string
	// serve is true for a separate `rbook serve` (SQLite), false for --control-plane off.
	serve bool
}

var killModes = []killMode{{"off", false}, {"serve", true}}

// Kill families: a cycle's kill point is drawn at random over the whole run, or aimed at its
// last tenth.
const (
	familyRandom = "random"
	familyAimed  = "aimed at the last 10%"
)

// Mismatch kinds the campaign counts.
const (
	mmUndelivered   = "final state file with an undelivered outbox"
	mmOutboxStale   = "final state file whose outbox the control plane acknowledged but the file still lists"
	mmEvidenceFile  = "final run without <run_id>.evidence.json"
	mmEvidenceAhead = "<run_id>.evidence.json holds more entries than the state file's evidence_pack (the pack was written, the final state write was not)"
	mmEvidenceDiff  = "<run_id>.evidence.json differs from the state file's evidence_pack"
	mmInvalidState  = "state file is not a valid state file"
	mmNotFinal      = "run left unfinished after the cycle"
	mmCPMissing     = "control plane has no such run"
	mmStatus        = "final status differs"
	mmSeq           = "control plane last_seq differs from the state file's seq"
	mmSeqOnce       = "control plane transitions are not seq 1..last_seq, each once"
	mmEvidence      = "evidence entries differ"
	mmDeployTwice   = "a deploy or rollback executed twice in one run"
	mmOrphan        = "control plane run that no state file records"
	mmSameID        = "two state files record one run id"
	mmStuck         = "stuck: the same command exited 2 twice in a row, the run cannot finish"
	mmResume        = "resume ended with an unexpected exit"
	mmHang          = "rbook did not exit (killed after the campaign's limit)"
	mmWrongOutcome  = "run ended with another status than its runbook leads to"
	mmStepIndexLoop = "resume kept stopping at a step in unknown state"
	mmNotVerified   = "final run whose evidence does not verify (rbook evidence verify: the chain, the pack, and with a control plane its signed attestation)"
)

// The kill points where the evidence pack file was written and the state write that makes the
// run final was not: the file holds one entry more than the state file (the last step's
// outcome went into both writes), or the same entries (the last outcome was written earlier).
const (
	phaseEvidenceAhead = "after the evidence pack file was written, before the final state write (the file one entry ahead)"
	phaseEvidenceEqual = "after the evidence pack file was written, before the final state write (same entries)"
)

var (
	unknownStepIndex = regexp.MustCompile(`--step-index (\d+)`)
	// gateWaiting is the terminal gate's prompt (action/steps TerminalGate).
	gateWaiting = regexp.MustCompile(`^Gate '([^']+)' is waiting`)
	// approvalToken is the shape of an approval token: base64url payload "." base64url MAC
	// (controlplane/approval, token.go). With RBOOK_SHOW_TOKEN=1 the executor prints it after
	// "Approval a-… is open"; nothing else it prints has this shape.
	approvalToken = regexp.MustCompile(`[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{40,}`)
)

// campaign is the state of one kill campaign: its work dir, control plane and tallies.
type campaign struct {
	t    *testing.T
	mode killMode
	dir  string
	url  string           // the control plane's URL; "" with --control-plane off
	c    *cpclient.Client // nil with --control-plane off
	seed uint64
	rng  *rand.Rand

	// reruns counts, per run id and step name, the --step-index choices that ran an in-flight
	// deploy or rollback again: each allows one more PASS of that step in the run.
	reruns map[string]map[string]int
	// reported holds "run id|kind" already reported, so a run seen again in a later cycle
	// (its .prev- file appears when the next run starts) is not counted twice.
	reported map[string]bool

	counts     map[string]int            // mismatch kind -> runs (or cycles)
	badCycles  map[string]int            // family -> cycles with a mismatch
	cycles     map[string]int            // family -> cycles run
	landed     map[string]int            // family -> kills sent while the run was going
	killPhases map[string]map[string]int // family -> where the kill landed -> cycles
	choices    map[string]int
	killRange  map[string]time.Duration // family -> the current range of its kill delays
	stuck      []string                 // "cycle N (family): run id" of every run that could not finish
	// rollbackRerunOnSkip counts resumes where the operator chose "go on after" an in-flight
	// rollback (--step-index N+1) and the run executed that rollback anyway.
	rollbackRerunOnSkip int

	// Written by the goroutines that answer gates (answerGates).
	mu          sync.Mutex
	gateAnswers map[string]int // how a gate was answered -> times
	approveErrs []string
}

// cycleLog is what a failure message says about one cycle.
type cycleLog struct {
	n         int
	family    string
	variant   campaignVariant
	kill      string // when the kill was sent
	duration  time.Duration
	afterKill string
	resume    []string
}

func (l cycleLog) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cycle %d, kill %s (verify_env=%s, on_fail=%s): %s (an uninterrupted run takes ~%s)\n",
		l.n, l.family, l.variant.env, l.variant.onFail, l.kill, l.duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "  after the kill: %s\n", l.afterKill)
	for _, r := range l.resume {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

// TestKillNineAtRandomPointsLosesNothing kills `rbook run` with SIGKILL at random points of a
// run and at points aimed at its last tenth, with the state file only and with a separate
// `rbook serve`, and finishes every run as a user would. After every cycle each run the cycle
// touched is final with the status its runbook leads to; its <run_id>.evidence.json holds the
// state file's evidence_pack entry for entry; no deploy or rollback ran twice; and, with a
// control plane, the control plane's record (status, last_seq, every transition's evidence,
// seq 1..n each once) equals the state file, whose outbox is empty. A run that cannot be
// finished (the same command exits 2 twice) fails the test with its output.
//
//	RBOOK_KILL_CYCLES=200 RBOOK_KILL_AIMED=100 RBOOK_KILL_MODE=both \
//	  go test -v -run TestKillNineAtRandomPointsLosesNothing -timeout 600m ./cmd/rbook/e2e/
//
// RBOOK_KILL_CYCLES and RBOOK_KILL_AIMED count the kills that land in a run, per mode (cycles
// whose run exits before its kill come on top); RBOOK_KILL_MODE is off, serve or both;
// RBOOK_KILL_SEED=N replays a campaign's kill points and choices (the seed is logged).
func TestKillNineAtRandomPointsLosesNothing(t *testing.T) {
	skipShort(t)
	random := envCount(t, "RBOOK_KILL_CYCLES", killDefaultRandom)
	aimed := envCount(t, "RBOOK_KILL_AIMED", killDefaultAimed)
	if random+aimed == 0 {
		t.Fatal("RBOOK_KILL_CYCLES=0 and RBOOK_KILL_AIMED=0: no cycle to run")
	}
	modes := killModes
	switch m := os.Getenv("RBOOK_KILL_MODE"); m {
	case "", "both":
	case "off":
		modes = killModes[:1]
	case "serve":
		modes = killModes[1:]
	default:
		t.Fatalf("RBOOK_KILL_MODE=%q: want off, serve or both", m)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RBOOK_KILL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RBOOK_KILL_SEED=%q: want an unsigned integer", s)
		}
		seed = n
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { runKillCampaign(t, m, random, aimed, seed) })
	}
}

// envCount reads a non-negative cycle count from the environment variable name, def when unset.
func envCount(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number of cycles, 0 or more", name, s)
	}
	return n
}

// runKillCampaign is one mode's campaign: uninterrupted runs that measure a run, then the
// kill cycles in an order drawn from the seed, then the figures.
func runKillCampaign(t *testing.T, m killMode, random, aimed int, seed uint64) {
	dir := workdir(t)
	mcpCfg, err := os.ReadFile(filepath.Join(dir, "runbooks", "demo.mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "runbooks", campaignName+".mcp.json"), mcpCfg)
	writeTestFile(t, filepath.Join(dir, "runbooks", campaignName+".yaml"), []byte(campaignRunbook(t)))
	k := &campaign{
		t: t, mode: m, dir: dir, seed: seed, rng: rand.New(rand.NewPCG(seed, 6)),
		reruns: map[string]map[string]int{}, reported: map[string]bool{}, counts: map[string]int{},
		badCycles: map[string]int{}, cycles: map[string]int{}, landed: map[string]int{}, killPhases: map[string]map[string]int{},
		choices: map[string]int{}, gateAnswers: map[string]int{}, killRange: map[string]time.Duration{},
	}
	cp := "--control-plane off (the state file only)"
	if m.serve {
		// The executor prints each approval's token only on a terminal or with
		// RBOOK_SHOW_TOKEN=1; the campaign approves with it, as a person with the token would.
		t.Setenv("RBOOK_SHOW_TOKEN", "1")
		k.url = serveCP(t, dir, "--signing-key", signingKeyFile(t, dir)) // every finished run is attested
		k.c = cpclient.New(k.url, "")
		cp = "a separate rbook serve on SQLite at " + k.url
	}
	t.Logf("kill campaign, mode %s: %d random + %d aimed kill points, RBOOK_KILL_SEED=%d, work dir %s, %s", m.name, random, aimed, seed, dir, cp)

	// One uninterrupted run per variant: each is checked like a cycle, and their medians set
	// the range of the kill points: the run's duration, and its tail from the aim point on.
	var durations, tails []time.Duration
	for i, v := range campaignVariants {
		before := k.snapshot()
		k.setVariant(v)
		began := time.Now() // measured as the cycles' kill delays are: from start to exit
		p := k.launch(k.runArgs()...)
		aimed := k.aim(p, before.current)
		reached := time.Now()
		out, code, hung := k.finish(p)
		exited := time.Now()
		d := exited.Sub(began)
		if wantCode := map[engine.RunStatus]int{engine.RunCompleted: 0, engine.RunFailed: 1}[v.want]; hung || code != wantCode || !aimed {
			t.Fatalf("uninterrupted run %d (verify_env=%s, on_fail=%s): exit %d (hung: %v), want %d; reached the aim point (%d of %d steps): %v\n%s",
				i, v.env, v.onFail, code, hung, wantCode, aimSteps(), campaignSteps, aimed, out)
		}
		durations, tails = append(durations, d), append(tails, exited.Sub(reached))
		log := cycleLog{n: -i, family: "none", variant: v, duration: d, kill: "no kill: an uninterrupted run that measures the duration"}
		if probs := k.check(before, v, log); len(probs) > 0 {
			t.Fatalf("uninterrupted run:\n%s%s", log, strings.Join(probs, "\n"))
		}
	}
	median := func(ds []time.Duration) time.Duration { return slices.Sorted(slices.Values(ds))[len(ds)/2] }
	duration := median(durations)
	k.killRange[familyRandom] = time.Duration(killCampaignSpread * float64(duration))
	k.killRange[familyAimed] = time.Duration(killCampaignSpread * float64(median(tails)))
	t.Logf("uninterrupted runs took %v, %v of it after %d of %d steps completed: random kills start in [0, %s], aimed kills at %d of %d steps completed + [0, %s]",
		durations, tails, aimSteps(), campaignSteps, k.killRange[familyRandom].Round(time.Millisecond), aimSteps(), campaignSteps,
		k.killRange[familyAimed].Round(time.Millisecond))

	// Cycles run until each family has its number of kills that landed in a run (a cycle whose
	// run exits before its kill counts as a cycle, not as a kill point); each cycle's family is
	// drawn in proportion to the kills each still needs.
	need := map[string]int{familyRandom: random, familyAimed: aimed}
	for n := 1; ; n++ {
		left := need[familyRandom] - k.landed[familyRandom]
		right := need[familyAimed] - k.landed[familyAimed]
		if left+right == 0 {
			break
		}
		// The budget leaves room for a loaded machine, where run durations drift from the
		// measured ones and several cycles pass before the kill ranges adapt to them.
		if n > 3*(random+aimed)+30 {
			t.Errorf("after %d cycles only %d of %d random and %d of %d aimed kills landed in a run: the kill ranges do not fit the runs",
				n-1, k.landed[familyRandom], random, k.landed[familyAimed], aimed)
			break
		}
		f := familyRandom
		if k.rng.IntN(left+right) >= left {
			f = familyAimed
		}
		k.cycle(n, f, campaignVariants[n%len(campaignVariants)], duration)
	}
	k.summary()
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// aimSteps is the number of completed steps at which an aimed kill's extra delay starts.
func aimSteps() int { return int(math.Ceil(killAimFraction * campaignSteps)) }

// runArgs is the command that starts and resumes the campaign's run in this mode.
func (k *campaign) runArgs() []string {
	if k.url == "" {
		return []string{"run", campaignName, "--control-plane", "off"}
	}
	return []string{"run", campaignName, "--control-plane", k.url}
}

// gated is a running rbook and the goroutine that answers its gates.
type gated struct {
	*proc
	answered chan struct{} // closed when answerGates returned
}

// launch starts `rbook args...` in the campaign's folder and answers every confirm gate it
// opens as soon as it says so (answerGates).
func (k *campaign) launch(args ...string) *gated {
	g := &gated{proc: start(k.t, k.dir, args...), answered: make(chan struct{})}
	go k.answerGates(g)
	return g
}

// answerGates reads g's output lines and approves each gate the line announces: without a
// control plane it types "yes" on the executor's stdin at the terminal gate's prompt; with
// one it calls Approve with the approval token the executor prints (RBOOK_SHOW_TOKEN=1), so
// the decision reaches the executor through the control plane (WatchApproval). It returns
// when the process ended.
func (k *campaign) answerGates(g *gated) {
	defer close(g.answered)
	approved := map[string]bool{} // tokens approved for this process
	for {
		var line string
		select {
		case line = <-g.seen:
		case <-g.done:
			return
		}
		if k.url == "" {
			if gateWaiting.MatchString(line) {
				_, err := io.WriteString(g.stdin, "yes\n")
				k.noteAnswer("yes typed on stdin at the terminal gate", err)
			}
			continue
		}
		tok := approvalToken.FindString(line)
		if tok == "" || approved[tok] {
			continue
		}
		approved[tok] = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := k.c.Approvals.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Approver: "kill-campaign", Reason: "approved by the kill campaign"})
		cancel()
		if cpclient.Code(err) == "E_APPROVAL_ALREADY_DECIDED" {
			k.noteAnswer("Approve on the control plane: already decided", nil)
			continue
		}
		k.noteAnswer("Approve on the control plane with the printed token", err)
	}
}

func (k *campaign) noteAnswer(how string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.approveErrs = append(k.approveErrs, how+": "+err.Error())
		return
	}
	k.gateAnswers[how]++
}

// finish waits until g exits (killing it after killHang) and its gates' answerer returned.
func (k *campaign) finish(g *gated) (out string, code int, hung bool) {
	select {
	case <-g.done:
	case <-time.After(killHang):
		hung = true
		g.cmd.Process.Signal(syscall.SIGKILL)
		<-g.done
	}
	<-g.answered
	return g.output(), g.code, hung
}

// aim blocks until the run g started (not the run the state file held before, prevRunID) has
// completed aimSteps() steps or is final, by the state file polled every killAimPoll, and
// reports whether it got there before g exited.
func (k *campaign) aim(g *gated, prevRunID string) bool {
	tick := time.NewTicker(killAimPoll)
	defer tick.Stop()
	var last os.FileInfo
	for {
		select {
		case <-g.done:
			return false
		case <-tick.C:
		}
		fi, err := os.Stat(k.statePath())
		if err != nil || last != nil && fi.ModTime().Equal(last.ModTime()) && fi.Size() == last.Size() && os.SameFile(fi, last) {
			continue
		}
		last = fi
		st, _, err := readStateFile(k.statePath())
		if err != nil || st.RunID == prevRunID {
			continue
		}
		if st.RunStatus.Final() || st.LastCompletedStepIndex+1 >= aimSteps() {
			return true
		}
	}
}

// killAfter sends SIGKILL to g after d unless it exits first; it reports whether it killed.
func killAfter(g *gated, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-g.done:
		return false
	case <-timer.C:
		g.cmd.Process.Signal(syscall.SIGKILL)
		return true
	}
}

// setVariant writes the values file. It is changed only between cycles, when the state file's
// run is final, so no resume ever sees an edited runbook.
func (k *campaign) setVariant(v campaignVariant) {
	writeTestFile(k.t, filepath.Join(k.dir, "runbooks", campaignName+".values.yaml"),
		fmt.Appendf(nil, "subscriptions: [sub-demo-prod]\nverify_env: %s\nverify_on_fail: %s\n", v.env, v.onFail))
}

func (k *campaign) statePath() string {
	return filepath.Join(k.dir, ".rbook", campaignName+".state.json")
}

// snap is what the folder and the control plane held before a cycle.
type snap struct {
	files   map[string][32]byte // state file and .prev- files -> content hash
	cpRuns  map[string]bool
	current string // run id of the state file, "" when there is none
}

func (k *campaign) stateFiles() []string {
	base := k.statePath()
	prev, _ := filepath.Glob(base + ".prev-*")
	if _, err := os.Stat(base); err == nil {
		prev = append(prev, base)
	}
	return prev
}

func (k *campaign) snapshot() snap {
	s := snap{files: map[string][32]byte{}, cpRuns: k.cpRunIDs()}
	for _, p := range k.stateFiles() {
		data, err := os.ReadFile(p)
		if err != nil {
			k.t.Fatal(err)
		}
		s.files[p] = sha256.Sum256(data)
		if p == k.statePath() {
			if st, err := state.Parse(p, data); err == nil {
				s.current = st.RunID
			}
		}
	}
	return s
}

// cpRunIDs lists every run of the campaign runbook on the control plane (ListRuns, paged);
// nil without a control plane.
func (k *campaign) cpRunIDs() map[string]bool {
	if k.c == nil {
		return nil
	}
	ids := map[string]bool{}
	tok := ""
	for {
		resp, err := k.c.Runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{Name: campaignName, PageSize: 100, PageToken: tok})
		if err != nil {
			k.t.Fatalf("ListRuns: %v", err)
		}
		for _, r := range resp.GetRuns() {
			ids[r.GetRunId()] = true
		}
		if tok = resp.GetNextPageToken(); tok == "" {
			return ids
		}
	}
}

// cpRecord is the control plane's record of one run: GetRun, following next_page_token
// (small pages, so a run spans several).
func (k *campaign) cpRecord(runID string) (*rbookv1.Run, []*rbookv1.Transition, error) {
	var all []*rbookv1.Transition
	var run *rbookv1.Run
	tok := ""
	for {
		resp, err := k.c.Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID, PageSize: 16, PageToken: tok})
		if err != nil {
			return nil, nil, err
		}
		run = resp.GetRun()
		all = append(all, resp.GetTransitions()...)
		if tok = resp.GetNextPageToken(); tok == "" {
			return run, all, nil
		}
	}
}

// readStateFile reads and parses a state file.
func readStateFile(path string) (*state.State, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if !json.Valid(data) {
		return nil, data, fmt.Errorf("%s is not valid JSON", path)
	}
	st, err := state.Parse(path, data)
	return st, data, err
}

// describe says what the folder and the control plane hold right after a kill.
func (k *campaign) describe() string {
	st, _, err := readStateFile(k.statePath())
	if err != nil {
		return fmt.Sprintf("no readable state file (%v)", err)
	}
	s := fmt.Sprintf("state file %s %s seq %d, %d evidence entries, outbox %d", st.RunID, st.RunStatus, st.Seq, len(st.EvidencePack), len(st.Outbox))
	if st.InFlight != nil {
		s += fmt.Sprintf(", in flight: %s '%s' (index %d)", st.InFlight.StepType, st.InFlight.StepName, st.InFlight.StepIndex)
	}
	if st.AwaitingConfirmation != nil {
		s += fmt.Sprintf(", at gate '%s'", st.AwaitingConfirmation.StepName)
	}
	if st.RollbackFor != "" {
		s += ", rollback owed for " + st.RollbackFor
	}
	if n, err := evidenceFileEntries(k.statePath(), st.RunID); err == nil {
		s += fmt.Sprintf(", %s.evidence.json has %d entries", st.RunID, n)
	}
	if k.c == nil {
		return s
	}
	if run, _, err := k.cpRecord(st.RunID); err != nil {
		s += fmt.Sprintf("; control plane: %v", err)
	} else {
		s += fmt.Sprintf("; control plane %s last_seq %d", run.GetStatus(), run.GetLastSeq())
	}
	return s
}

// evidenceFileEntries is the number of entries of run runID's evidence pack file beside the
// state file at statePath.
func evidenceFileEntries(statePath, runID string) (int, error) {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(statePath), runID+".evidence.json"))
	if err != nil {
		return 0, err
	}
	var ev []json.RawMessage
	err = json.Unmarshal(data, &ev)
	return len(ev), err
}

// cycle kills one run at a point of family, finishes it as a user would and compares the
// records.
func (k *campaign) cycle(n int, family string, v campaignVariant, duration time.Duration) {
	t := k.t
	before := k.snapshot()
	k.setVariant(v)
	log := cycleLog{n: n, family: family, variant: v, duration: duration}
	k.cycles[family]++

	began := time.Now()
	p := k.launch(k.runArgs()...)
	killed, inRange := false, true // inRange: the run reached the point the delay counts from
	delay := time.Duration(k.rng.Int64N(int64(k.killRange[family]) + 1))
	switch family {
	case familyRandom:
		killed = killAfter(p, delay)
		log.kill = fmt.Sprintf("drawn at %s in [0, %s]", delay.Round(time.Millisecond), k.killRange[family].Round(time.Millisecond))
	default:
		extra := delay
		if k.aim(p, before.current) {
			at := time.Since(began)
			killed = killAfter(p, extra)
			log.kill = fmt.Sprintf("drawn at %d of %d steps done (%s) + %s in [0, %s]", aimSteps(), campaignSteps, at.Round(time.Millisecond),
				extra.Round(time.Millisecond), k.killRange[family].Round(time.Millisecond))
		} else {
			inRange = false
			log.kill = fmt.Sprintf("aimed at %d of %d steps done + %s; the run exited before it got there", aimSteps(), campaignSteps, extra.Round(time.Millisecond))
		}
	}
	out, code, hung := k.finish(p)
	if hung {
		log.afterKill = "(the run did not exit and was killed after " + killHang.String() + ") "
	} else if !killed {
		log.afterKill = fmt.Sprintf("(the run ended, exit %d, before the kill) ", code)
	}
	log.kill += fmt.Sprintf("; sent after %s", time.Since(began).Round(time.Millisecond))
	if killed {
		k.landed[family]++
		k.killRange[family] = time.Duration(float64(k.killRange[family]) * killRangeGrow)
	} else if inRange {
		k.killRange[family] = time.Duration(float64(k.killRange[family]) * killRangeShrink)
	}
	log.afterKill += k.describe()
	t.Logf("cycle %d (%s) after the kill: %s", n, family, log.afterKill)
	phase := "the run ended before the kill"
	if killed {
		phase = k.killPhase(before)
	}
	if k.killPhases[family] == nil {
		k.killPhases[family] = map[string]int{}
	}
	k.killPhases[family][phase]++

	var problems []string
	if hung {
		problems = append(problems, k.problem(n, "", mmHang, strings.Join(k.runArgs(), " ")+":\n"+lastLines(out, 12)))
	}
	resumed, stuck := k.resume(n, &log)
	problems = append(problems, resumed...)
	problems = append(problems, k.check(before, v, log)...)
	problems = slices.DeleteFunc(problems, func(p string) bool { return p == "" })
	if st, _, err := readStateFile(k.statePath()); err == nil && !st.RunStatus.Final() {
		// Set the unfinished run aside so the next cycle starts clean (it was reported).
		q := k.statePath() + fmt.Sprintf(".quarantine-%d", n)
		os.Rename(k.statePath(), q)
		log.resume = append(log.resume, "the unfinished state file was moved to "+filepath.Base(q))
		stuck = st.RunID
	}
	if stuck != "" {
		k.stuck = append(k.stuck, fmt.Sprintf("cycle %d (%s, kill %s): run %s", n, family, phase, stuck))
	}
	t.Logf("cycle %d (%s): kill %s, %s; %s", n, family, log.kill, phase, strings.Join(log.resume, "; "))
	if len(problems) > 0 {
		k.badCycles[family]++
		t.Errorf("kill campaign, mode %s (RBOOK_KILL_SEED=%d):\n%s%s", k.mode.name, k.seed, log, strings.Join(problems, "\n"))
	}
}

// resume finishes the cycle's run as a user would: the same command again, and at "step in
// unknown state" the --step-index the message offers (run the step again, or go on after it,
// drawn at random). A command that exits 2 for another reason is tried once more; exiting 2
// again, the run is stuck, and resume returns its run id.
func (k *campaign) resume(n int, log *cycleLog) (problems []string, stuck string) {
	args := k.runArgs()
	lastExit2 := "" // the command that exited 2 (not at a step in unknown state) last
	skippedRollback := ""
	defer func() {
		if runID, step, ok := strings.Cut(skippedRollback, "|"); ok && k.ranAfterSkip(runID, step) {
			k.rollbackRerunOnSkip++
			k.t.Logf("cycle %d: run %s: the operator chose --step-index past the in-flight rollback '%s', and the resume ran it again", n, runID, step)
		}
	}()
	for unknown := 0; ; {
		cmd := "rbook " + strings.Join(args, " ")
		out, code, hung := k.finish(k.launch(args...))
		if hung {
			log.resume = append(log.resume, fmt.Sprintf("resume: `%s` did not exit within %s", cmd, killHang))
			return append(problems, k.problem(n, "", mmHang, cmd+":\n"+lastLines(out, 12))), ""
		}
		if code == 2 && strings.Contains(out, "step in unknown state") {
			if unknown++; unknown > 2 {
				return append(problems, k.problem(n, "", mmStepIndexLoop, lastLines(out, 6))), ""
			}
			st, _, err := readStateFile(k.statePath())
			m := unknownStepIndex.FindAllStringSubmatch(out, -1)
			if err != nil || st.InFlight == nil || len(m) != 2 {
				return append(problems, k.problem(n, "", mmResume, fmt.Sprintf("cannot read the --step-index choices (%v):\n%s", err, lastLines(out, 6)))), ""
			}
			rerun, skip := m[0][1], m[1][1]
			if rerun != strconv.Itoa(st.InFlight.StepIndex) || skip != strconv.Itoa(st.InFlight.StepIndex+1) {
				return append(problems, k.problem(n, "", mmResume, fmt.Sprintf("the message offers --step-index %s and %s for in-flight step index %d:\n%s",
					rerun, skip, st.InFlight.StepIndex, lastLines(out, 6)))), ""
			}
			choice, idx := "skip", skip
			if st.InFlight.StepType == "rollback" {
				skippedRollback = st.RunID + "|" + st.InFlight.StepName
			}
			if k.rng.IntN(2) == 0 {
				skippedRollback = ""
				choice, idx = "rerun", rerun
				if k.reruns[st.RunID] == nil {
					k.reruns[st.RunID] = map[string]int{}
				}
				k.reruns[st.RunID][st.InFlight.StepName]++
			}
			k.choices[choice+" "+st.InFlight.StepType]++
			log.resume = append(log.resume, fmt.Sprintf("resume: exit 2, step in unknown state: %s '%s' (index %d); chose %s: --step-index %s",
				st.InFlight.StepType, st.InFlight.StepName, st.InFlight.StepIndex, choice, idx))
			args = append(k.runArgs(), "--step-index", idx)
			continue
		}
		log.resume = append(log.resume, fmt.Sprintf("resume: `%s` exit %d", cmd, code))
		if code == 2 {
			if lastExit2 != cmd {
				lastExit2 = cmd // a user tries the same command once more
				continue
			}
			runID := ""
			if st, _, err := readStateFile(k.statePath()); err == nil {
				runID = st.RunID
			}
			return append(problems, k.problem(n, "", mmStuck, fmt.Sprintf("`%s` exited 2 twice; its output:\n%s", cmd, lastLines(out, 12)))), runID
		}
		if code != 0 && code != 1 {
			problems = append(problems, k.problem(n, "", mmResume, fmt.Sprintf("`%s` exit %d:\n%s", cmd, code, lastLines(out, 8))))
		}
		return problems, ""
	}
}

// ranAfterSkip reports whether run runID's state file holds a PASS of rollback step.
func (k *campaign) ranAfterSkip(runID, step string) bool {
	for _, p := range k.stateFiles() {
		st, _, err := readStateFile(p)
		if err != nil || st.RunID != runID {
			continue
		}
		for _, e := range st.EvidencePack {
			if e.StepName == step && e.Status == engine.StatusPass {
				return true
			}
		}
	}
	return false
}

// killPhase classifies where the kill landed, from what the folder holds now compared with
// before the cycle.
func (k *campaign) killPhase(before snap) string {
	st, _, err := readStateFile(k.statePath())
	switch {
	case err != nil:
		return "no state file (the previous run's moved to .prev-, the new run's not written yet)"
	case st.RunID == before.current:
		return "before the new run's first state write"
	case st.RunStatus.Final():
		return "after the state file turned final, before the executor exited"
	}
	if n, err := evidenceFileEntries(k.statePath(), st.RunID); err == nil {
		if n > len(st.EvidencePack) {
			return phaseEvidenceAhead
		}
		return phaseEvidenceEqual
	}
	switch {
	case st.AwaitingConfirmation != nil:
		return "at a confirm gate, waiting for its decision"
	case st.InFlight != nil:
		return "during a deploy or rollback"
	default:
		return "mid-run"
	}
}

// problem formats one mismatch and counts its kind once per run. It returns "" for a run and
// kind reported in an earlier cycle (a run's .prev- file appears in the cycle after it ended).
func (k *campaign) problem(cycle int, runID, kind, detail string) string {
	key := runID + "|" + kind
	if runID == "" {
		key = fmt.Sprintf("cycle %d|%s", cycle, kind)
	}
	if k.reported[key] {
		return ""
	}
	k.reported[key] = true
	k.counts[kind]++
	who := ""
	if runID != "" {
		who = " run " + runID
	}
	return fmt.Sprintf("  MISMATCH%s: %s\n%s", who, kind, indent(detail, "    "))
}

// check compares every run the cycle touched (state file and .prev- files that are new or
// changed, and the run the state file held before) with its evidence pack file and the
// control plane, and looks for control plane runs the cycle created that no state file
// records.
func (k *campaign) check(before snap, v campaignVariant, log cycleLog) []string {
	var problems []string
	add := func(p string) {
		if p != "" {
			problems = append(problems, p)
		}
	}
	files := map[string][]string{} // run id -> every state file that records it
	touched := map[string]bool{}
	for _, p := range k.stateFiles() {
		st, data, err := readStateFile(p)
		if err != nil {
			add(k.problem(log.n, filepath.Base(p), mmInvalidState, err.Error()))
			continue
		}
		files[st.RunID] = append(files[st.RunID], p)
		if h, ok := before.files[p]; !ok || h != sha256.Sum256(data) || st.RunID == before.current {
			touched[st.RunID] = true
		}
	}
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if ps := files[id]; len(ps) > 1 {
			names := make([]string, len(ps))
			for i, p := range ps {
				names[i] = filepath.Base(p)
			}
			add(k.problem(log.n, id, mmSameID, strings.Join(names, " and ")+" both record it"))
		}
		for _, p := range files[id] {
			problems = append(problems, k.compare(log.n, id, p, v)...)
		}
	}
	if k.c == nil {
		return problems
	}
	var orphans []string
	for id := range k.cpRunIDs() {
		if !before.cpRuns[id] && len(files[id]) == 0 {
			orphans = append(orphans, id)
		}
	}
	sort.Strings(orphans)
	for _, id := range orphans {
		run, ts, err := k.cpRecord(id)
		detail := fmt.Sprintf("%v", err)
		if err == nil {
			detail = fmt.Sprintf("%s, last_seq %d, %d transitions, lease epoch %d; no state file or .prev- file in %s names it",
				run.GetStatus(), run.GetLastSeq(), len(ts), run.GetLease().GetEpoch(), filepath.Dir(k.statePath()))
		}
		add(k.problem(log.n, id, mmOrphan, detail))
	}
	return problems
}

// signingKeyFile writes a new Ed25519 signing key (PKCS#8 PEM) into dir for `rbook serve
// --signing-key` and returns its path.
func signingKeyFile(t *testing.T, dir string) string {
	t.Helper()
	_, pemKey, err := attest.GenerateEd25519()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "signing-key.pem")
	if err := os.WriteFile(p, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// verifyEvidence checks a final run's evidence as `rbook evidence verify` does
// (docs/evidence-verify.md): its journal's chain from seq 1 and its pack against the chain
// and, with a control plane, the attestation that control plane signed, checked with the keys
// it publishes. It returns "" when the run verifies (with --control-plane off, when the chain
// and the pack agree: there is nothing signed), else what failed.
func (k *campaign) verifyEvidence(path, runID string) string {
	o := evidenceverify.Options{Pack: filepath.Join(filepath.Dir(path), runID+".evidence.json")}
	var remote evidenceverify.Remote
	want := evidenceverify.ExitUnsigned
	if k.url != "" {
		r, err := evidenceverify.NewRemote(k.url)
		if err != nil {
			return err.Error()
		}
		remote, want = r, evidenceverify.ExitVerified
	}
	in, err := evidenceverify.Load(context.Background(), o, remote)
	if err != nil {
		return err.Error()
	}
	rep := evidenceverify.Verify(in)
	if rep.Code() == want {
		return ""
	}
	var b strings.Builder
	rep.WriteText(&b, false)
	return fmt.Sprintf("exit %d, want %d:\n%s", rep.Code(), want, indent(b.String(), "    "))
}

// evidenceFileDiff compares run runID's <run_id>.evidence.json beside the state file at path
// with that state file's evidence_pack, entry for entry (each entry's JSON decoded, so only
// the layout of the file may differ). It returns "" when they are equal, else the mismatch
// kind and what differs.
func evidenceFileDiff(path, runID string) (kind, detail string) {
	evPath := filepath.Join(filepath.Dir(path), runID+".evidence.json")
	data, err := os.ReadFile(evPath)
	if err != nil {
		return mmEvidenceFile, err.Error()
	}
	var file []json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		return mmEvidenceDiff, fmt.Sprintf("%s is not a JSON array: %v", evPath, err)
	}
	var st rawState
	if raw, err := os.ReadFile(path); err != nil || json.Unmarshal(raw, &st) != nil {
		return mmEvidenceDiff, fmt.Sprintf("%s: cannot read its evidence_pack: %v", path, err)
	}
	if sameEntries(file, st.EvidencePack) {
		return "", ""
	}
	n := min(len(file), len(st.EvidencePack))
	first := n
	for i := range n {
		if !sameEntries(file[i:i+1], st.EvidencePack[i:i+1]) {
			first = i
			break
		}
	}
	if first == n && len(file) > n {
		return mmEvidenceAhead, fmt.Sprintf("%s has %d entries, %s's evidence_pack %d (the same first %d); the file's next entry: %s",
			filepath.Base(evPath), len(file), filepath.Base(path), n, n, cut(string(file[n]), 200))
	}
	detail = fmt.Sprintf("%s has %d entries, %s's evidence_pack %d; they differ from entry %d on", filepath.Base(evPath), len(file), filepath.Base(path), len(st.EvidencePack), first)
	if first < n {
		detail += fmt.Sprintf(":\n- %s\n+ %s", cut(string(st.EvidencePack[first]), 200), cut(string(file[first]), 200))
	}
	return mmEvidenceDiff, detail
}

// cpStatus maps a final state-file status to the control plane's, written out
// here rather than taken from the code under test.
var cpStatus = map[engine.RunStatus]rbookv1.RunStatus{
	engine.RunCompleted: rbookv1.RunStatus_RUN_STATUS_SUCCEEDED,
	engine.RunFailed:    rbookv1.RunStatus_RUN_STATUS_FAILED,
	engine.RunCancelled: rbookv1.RunStatus_RUN_STATUS_CANCELLED,
}

// stateWord renders a control plane status in the state file's words, so the diff of two
// records shows only real differences.
func stateWord(s rbookv1.RunStatus) string {
	for word, cp := range cpStatus {
		if cp == s {
			return string(word)
		}
	}
	return "IN_PROGRESS (" + s.String() + ")"
}

// compare checks one run's state file: final with the status its runbook leads to, its
// evidence pack file equal to its evidence_pack, no deploy run twice, and, with a control
// plane, the control plane's record of it equal to it.
func (k *campaign) compare(cycle int, runID, path string, v campaignVariant) []string {
	var problems []string
	add := func(kind, detail string) {
		if p := k.problem(cycle, runID, kind, detail); p != "" {
			problems = append(problems, p)
		}
	}
	st, _, err := readStateFile(path)
	if err != nil {
		add(mmInvalidState, err.Error())
		return problems
	}
	evKind, evDetail := evidenceFileDiff(path, runID)
	if evKind == mmEvidenceAhead {
		add(evKind, evDetail) // final or not: it is what keeps such a run from finishing
	}
	if !st.RunStatus.Final() {
		cp := ""
		if k.c != nil {
			if run, _, err := k.cpRecord(runID); err != nil {
				cp = fmt.Sprintf("; the control plane: %v", err)
			} else {
				cp = "; the control plane says " + run.GetStatus().String()
			}
		}
		add(mmNotFinal, fmt.Sprintf("%s is %s (seq %d)%s", filepath.Base(path), st.RunStatus, st.Seq, cp))
		return problems
	}
	if st.RunStatus != v.want && path == k.statePath() {
		add(mmWrongOutcome, fmt.Sprintf("%s, want %s for verify_env=%s on_fail=%s", st.RunStatus, v.want, v.env, v.onFail))
	}
	if evKind != "" && evKind != mmEvidenceAhead {
		add(evKind, evDetail)
	}
	if detail := k.verifyEvidence(path, runID); detail != "" {
		add(mmNotVerified, detail)
	}

	// No deploy executed twice (a rollback neither), unless the operator chose to run an
	// in-flight one again.
	passes := map[string]int{}
	for _, e := range st.EvidencePack {
		if (e.Type == "deploy" || e.Type == "rollback") && e.Status == engine.StatusPass {
			passes[e.StepName]++
		}
	}
	for name, n := range passes {
		if allowed := 1 + k.reruns[runID][name]; n > allowed {
			add(mmDeployTwice, fmt.Sprintf("'%s' has %d PASS entries (%d allowed: %d --step-index reruns chosen)", name, n, allowed, allowed-1))
		}
	}

	if k.c == nil {
		return problems
	}
	run, ts, err := k.cpRecord(runID)
	if err != nil {
		add(mmCPMissing, err.Error())
		return problems
	}

	// Seq 1..last_seq, each once.
	contiguous := int64(len(ts)) == run.GetLastSeq()
	for i, tr := range ts {
		if tr.GetSeq() != int64(i+1) {
			contiguous = false
		}
	}
	if !contiguous {
		seqs := make([]string, len(ts))
		for i, tr := range ts {
			seqs[i] = strconv.FormatInt(tr.GetSeq(), 10)
		}
		add(mmSeqOnce, fmt.Sprintf("last_seq %d, transitions with seq %s", run.GetLastSeq(), strings.Join(seqs, ",")))
	}

	cpEv := cpEvidence(ts)
	stLines, cpLines := recordLines(string(st.RunStatus), st.Seq, st.EvidencePack), recordLines(stateWord(run.GetStatus()), run.GetLastSeq(), cpEv)
	sameEvidence := slices.Equal(stLines[2:], cpLines[2:])
	same := run.GetStatus() == cpStatus[st.RunStatus] && run.GetLastSeq() == st.Seq && sameEvidence
	diff := "diff (- state file, + control plane):\n" + lineDiff(stLines, cpLines)

	// A final state file must have an empty outbox once the next command in the folder ran:
	// every cycle ends with a command that ran after each file it touched.
	if len(st.Outbox) > 0 {
		// The control plane's record plus the outbox transitions it lacks is the state file's.
		withOutbox := recordLines("", 0, append(slices.Clip(cpEv), outboxEvidence(st.Outbox, run.GetLastSeq())...))
		explained := run.GetLastSeq() >= st.Outbox[0].Seq-1 && run.GetLastSeq() <= st.Seq && slices.Equal(stLines[2:], withOutbox[2:])
		kind := mmUndelivered
		if same {
			kind = mmOutboxStale
		}
		detail := fmt.Sprintf("%s is %s at seq %d with %d transition(s) in its outbox (seq %d..%d); the control plane says %s at last_seq %d",
			filepath.Base(path), st.RunStatus, st.Seq, len(st.Outbox), st.Outbox[0].Seq, st.Outbox[len(st.Outbox)-1].Seq,
			run.GetStatus(), run.GetLastSeq())
		if explained {
			// The rest of the difference is the undelivered outbox: one mismatch, not four.
			add(kind, detail+"; that is all the records differ by\n"+diff)
			return problems
		}
		add(kind, detail)
	}
	if same {
		return problems
	}
	if run.GetStatus() != cpStatus[st.RunStatus] {
		add(mmStatus, fmt.Sprintf("state file %s, control plane %s", st.RunStatus, run.GetStatus()))
	}
	if run.GetLastSeq() != st.Seq {
		add(mmSeq, fmt.Sprintf("state file seq %d, control plane last_seq %d", st.Seq, run.GetLastSeq()))
	}
	if !sameEvidence {
		add(mmEvidence, "see the diff below")
	}
	if len(problems) > 0 {
		problems = append(problems, indent(diff, "    "))
	}
	return problems
}

// outboxEvidence is the evidence of outbox transitions past the control plane's last_seq.
func outboxEvidence(ob []engine.Transition, cpLast int64) []engine.Evidence {
	var ev []engine.Evidence
	for _, tr := range ob {
		if tr.Seq > cpLast && tr.Evidence != nil {
			ev = append(ev, *tr.Evidence)
		}
	}
	return ev
}

// cpEvidence is the evidence the control plane's transitions carry, in seq order.
func cpEvidence(ts []*rbookv1.Transition) []engine.Evidence {
	var out []engine.Evidence
	for _, tr := range ts {
		if e := tr.GetEvidence(); e != nil {
			out = append(out, engine.Evidence{
				StepName: e.GetStepName(), Type: e.GetType(), Input: e.Input, Output: e.GetOutput(),
				Status: engine.StepStatus(strings.TrimPrefix(e.GetStatus().String(), "STEP_STATUS_")), TimestampUTC: e.GetTimestampUtc(),
			})
		}
	}
	return out
}

// recordLines renders a run's record as comparable lines: status, seq, then one line per
// evidence entry with every field the two records share.
func recordLines(status string, seq int64, ev []engine.Evidence) []string {
	lines := []string{"status " + status, "seq " + strconv.FormatInt(seq, 10)}
	for i, e := range ev {
		in := "<null>"
		if e.Input != nil {
			in = strconv.Quote(*e.Input)
		}
		lines = append(lines, fmt.Sprintf("evidence[%d] %s %s %s at %s input=%s output=%s", i, e.StepName, e.Type, e.Status, e.TimestampUTC, in, strconv.Quote(e.Output)))
	}
	return lines
}

// lineDiff shows the lines that differ, index by index, with long lines cut for reading
// (the comparison itself used the full lines).
func lineDiff(a, b []string) string {
	var out strings.Builder
	equal := 0
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x == y {
			equal++
			continue
		}
		if x != "" {
			fmt.Fprintf(&out, "- %s\n", cut(x, 160))
		}
		if y != "" {
			fmt.Fprintf(&out, "+ %s\n", cut(y, 160))
		}
	}
	fmt.Fprintf(&out, "(%d of %d/%d lines equal)", equal, len(a), len(b))
	return out.String()
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// summary logs the mode's figures: cycles per family, where the kills landed, how the gates
// were answered, the operator's choices, mismatches by kind and the runs that could not
// finish.
func (k *campaign) summary() {
	var b bytes.Buffer
	total, bad := 0, 0
	for _, f := range []string{familyRandom, familyAimed} {
		total, bad = total+k.cycles[f], bad+k.badCycles[f]
	}
	fmt.Fprintf(&b, "kill campaign figures, mode %s (RBOOK_KILL_SEED=%d): %d cycles, %d with a mismatch; %d runs stuck\n",
		k.mode.name, k.seed, total, bad, len(k.stuck))
	for _, f := range []string{familyRandom, familyAimed} {
		fmt.Fprintf(&b, "  kills %s: %d cycles, %d kills landed in a run, %d cycles with a mismatch; where they landed:\n",
			f, k.cycles[f], k.landed[f], k.badCycles[f])
		for _, kv := range sortedCounts(k.killPhases[f]) {
			fmt.Fprintf(&b, "    %4d  %s\n", kv.n, kv.k)
		}
	}
	k.mu.Lock()
	b.WriteString("  gates answered:\n")
	for _, kv := range sortedCounts(k.gateAnswers) {
		fmt.Fprintf(&b, "    %4d  %s\n", kv.n, kv.k)
	}
	for _, e := range k.approveErrs {
		fmt.Fprintf(&b, "    error: %s\n", e)
	}
	k.mu.Unlock()
	if len(k.choices) > 0 {
		b.WriteString("  step in unknown state, operator's --step-index choice:\n")
		for _, kv := range sortedCounts(k.choices) {
			fmt.Fprintf(&b, "    %4d  %s\n", kv.n, kv.k)
		}
	}
	b.WriteString("  mismatches (runs, or cycles for cycle-level kinds):\n")
	if len(k.counts) == 0 {
		b.WriteString("    none\n")
	}
	for _, kv := range sortedCounts(k.counts) {
		fmt.Fprintf(&b, "    %4d  %s\n", kv.n, kv.k)
	}
	if len(k.stuck) > 0 {
		b.WriteString("  runs that could not finish (their state files were moved to .quarantine-N):\n")
		for _, s := range k.stuck {
			fmt.Fprintf(&b, "    %s\n", s)
		}
	}
	if k.rollbackRerunOnSkip > 0 {
		fmt.Fprintf(&b, "  note: %d time(s) the operator passed --step-index N+1 for an in-flight rollback and the resume ran that rollback again\n", k.rollbackRerunOnSkip)
	}
	k.t.Log(b.String())
}

type kindCount struct {
	k string
	n int
}

func sortedCounts(m map[string]int) []kindCount {
	var out []kindCount
	for k, n := range m {
		out = append(out, kindCount{k, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n || out[i].n == out[j].n && out[i].k < out[j].k })
	return out
}
