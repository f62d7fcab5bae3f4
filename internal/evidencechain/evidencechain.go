// Package evidencechain is the one home of a run's hash chain: the canonical encoding of a
// transition, its hash, and the verification of a chain of them (docs/evidence-chain.md).
// Every transition carries the hash of the one before it (PrevHash) and its own hash over
// the canonical encoding, which includes PrevHash; so the last hash, the chain head, pins
// every transition before it. The encoding is length-prefixed bytes, not JSON, so key order
// and whitespace cannot change a hash. The package uses the standard library only, so the
// executor, the control plane and `rbook evidence verify` share it.
package evidencechain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Genesis is the prev_hash of a run's first transition (seq 1): "sha256:" and 64 zeros.
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Magic opens every canonical encoding: the encoding's name and version, then a newline.
const Magic = "rbook.transition.v1\n"

// TimeLayout is the layout of Link.Time in the encoding: RFC 3339 in UTC with exactly nine
// fraction digits (the same layout as the engine's timestamps).
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// Entry is the evidence entry a transition carries (a step_finished's entry, or the cancel
// audit entry of a run_finished), without its transition_hash, which names the link itself.
// Input and SourceInput are pointers because an absent input and an empty one differ.
type Entry struct {
	StepName     string  `json:"step_name"`
	Type         string  `json:"type"`
	Input        *string `json:"input"`
	Output       string  `json:"output"`
	Status       string  `json:"status"`
	TimestampUTC string  `json:"timestamp_utc"`
	SourceInput  *string `json:"source_input"`
}

// Link is one transition as the chain sees it: the engine's transition fields in the
// engine's words (Kind "step_finished", RunStatus "IN_PROGRESS"), StepIndex -1 for run-level
// transitions, and the two hashes ("sha256:" + 64 lowercase hex).
type Link struct {
	RunID          string    `json:"run_id"`
	Seq            int64     `json:"seq"`
	Kind           string    `json:"kind"`
	Time           time.Time `json:"time"`
	StepIndex      int       `json:"step_index"`
	StepName       string    `json:"step_name"`
	StepType       string    `json:"step_type"`
	RunStatus      string    `json:"run_status"`
	LastDeployName string    `json:"last_deploy_name"`
	RollbackFor    string    `json:"rollback_for"`
	Message        string    `json:"message"`
	Evidence       *Entry    `json:"evidence"`
	PrevHash       string    `json:"prev_hash"`
	Hash           string    `json:"hash"`
}

// Encode returns the canonical encoding of l (docs/evidence-chain.md, "Encoding"): Magic,
// then each field in a fixed order as a presence byte (0 absent, 1 present) followed, when
// present, by uvarint(length) and the bytes. It covers l.PrevHash and never l.Hash.
func Encode(l Link) []byte {
	b := make([]byte, 0, 256)
	b = append(b, Magic...)
	b = appendString(b, l.RunID)
	b = appendString(b, strconv.FormatInt(l.Seq, 10))
	b = appendString(b, l.Kind)
	b = appendString(b, l.Time.UTC().Format(TimeLayout))
	b = appendString(b, strconv.Itoa(l.StepIndex))
	b = appendString(b, l.StepName)
	b = appendString(b, l.StepType)
	b = appendString(b, l.RunStatus)
	b = appendString(b, l.LastDeployName)
	b = appendString(b, l.RollbackFor)
	b = appendString(b, l.Message)
	if l.Evidence == nil {
		b = append(b, 0)
	} else {
		b = appendString(b, string(encodeEntry(*l.Evidence)))
	}
	return appendString(b, l.PrevHash)
}

// encodeEntry is the nested encoding of an evidence entry: its fields in order, each as in
// Encode, without Magic.
func encodeEntry(e Entry) []byte {
	b := make([]byte, 0, 128)
	b = appendString(b, e.StepName)
	b = appendString(b, e.Type)
	b = appendOptional(b, e.Input)
	b = appendString(b, e.Output)
	b = appendString(b, e.Status)
	b = appendString(b, e.TimestampUTC)
	return appendOptional(b, e.SourceInput)
}

func appendString(b []byte, s string) []byte {
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendOptional(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendString(b, *s)
}

// HashOf returns "sha256:" and the lowercase hex SHA-256 of Encode(l): the hash l must carry.
func HashOf(l Link) string {
	sum := sha256.Sum256(Encode(l))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Seal makes l the link after prev: it sets l.PrevHash to prev and l.Hash to HashOf(*l).
func Seal(prev string, l *Link) {
	l.PrevHash = prev
	l.Hash = HashOf(*l)
}

// WellFormed reports whether h is a hash string as the chain writes them: "sha256:" and 64
// lowercase hex digits.
func WellFormed(h string) bool {
	hexPart, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hexPart) != 64 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		c := hexPart[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// BreakError is the first place a chain fails to verify: the seq of the transition that
// fails and the reason, in words an auditor can act on.
type BreakError struct {
	Seq    int64
	Reason string
}

func (e *BreakError) Error() string {
	return fmt.Sprintf("chain broken at seq %d: %s", e.Seq, e.Reason)
}

// Verify checks a whole run's chain: links[0] is seq 1 with PrevHash Genesis, each later link
// has the next seq, the same run id, the previous link's hash as PrevHash, and every link's
// Hash is HashOf the link. It returns the head (the last link's hash; Genesis for no links)
// or a *BreakError naming the first link that fails.
func Verify(links []Link) (head string, err error) {
	if len(links) > 0 && links[0].Seq != 1 {
		return "", &BreakError{Seq: links[0].Seq, Reason: fmt.Sprintf("the chain starts at seq %d, not 1: the transitions before it are missing", links[0].Seq)}
	}
	return VerifyFrom(Genesis, links)
}

// VerifyFrom checks a chain that continues from the link whose hash is prev (Genesis for a
// whole run; a head kept elsewhere for a suffix): links[0].PrevHash must be prev, and the
// rest as Verify says. It returns the head (prev for no links) or a *BreakError.
func VerifyFrom(prev string, links []Link) (head string, err error) {
	head = prev
	for i, l := range links {
		if i > 0 {
			if want := links[i-1].Seq + 1; l.Seq != want {
				return "", &BreakError{Seq: l.Seq, Reason: fmt.Sprintf("seq %d follows seq %d (want %d): a transition was removed, duplicated or reordered", l.Seq, links[i-1].Seq, want)}
			}
			if l.RunID != links[0].RunID {
				return "", &BreakError{Seq: l.Seq, Reason: fmt.Sprintf("run id %q differs from the chain's %q: the transition belongs to another run", l.RunID, links[0].RunID)}
			}
		}
		if l.Hash == "" {
			return "", &BreakError{Seq: l.Seq, Reason: "the transition has no hash"}
		}
		if l.PrevHash != head {
			return "", &BreakError{Seq: l.Seq, Reason: fmt.Sprintf("prev_hash %s is not the previous transition's hash %s: a transition before it was removed, reordered or edited", orNone(l.PrevHash), head)}
		}
		if got := HashOf(l); l.Hash != got {
			return "", &BreakError{Seq: l.Seq, Reason: fmt.Sprintf("hash %s does not match the transition's content (%s): the transition was edited", l.Hash, got)}
		}
		head = l.Hash
	}
	return head, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
