package slackapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The interaction types rbook acts on (https://docs.slack.dev/reference/interaction-payloads).
const (
	InteractionBlockActions   = "block_actions"
	InteractionViewSubmission = "view_submission"
)

// InteractionCallback is an interaction payload (the JSON of the "payload" form field).
type InteractionCallback struct {
	Type      string    `json:"type"`
	TriggerID string    `json:"trigger_id"`
	Team      Team      `json:"team"`
	Channel   Channel   `json:"channel"`
	User      User      `json:"user"`
	Container Container `json:"container"`
	// Actions are a block_actions payload's actions (the button pressed first).
	Actions []BlockAction `json:"actions"`
	View    View          `json:"view"`
}

// Team is the workspace of an interaction.
type Team struct {
	ID string `json:"id"`
}

// Channel is the conversation of an interaction.
type Channel struct {
	ID string `json:"id"`
}

// User is who interacted; TeamID is their workspace.
type User struct {
	ID     string `json:"id"`
	TeamID string `json:"team_id"`
}

// Container is where the interaction happened (a message's channel_id).
type Container struct {
	Type      string `json:"type"`
	ChannelID string `json:"channel_id"`
}

// BlockAction is one action of block_actions, or one input's state in a submitted view:
// Value for a button or a text input, SelectedOption for a menu.
type BlockAction struct {
	ActionID       string `json:"action_id"`
	BlockID        string `json:"block_id"`
	Type           string `json:"type"`
	Value          string `json:"value"`
	SelectedOption struct {
		Value string `json:"value"`
	} `json:"selected_option"`
}

// View is a submitted view: its callback id, private metadata and its inputs' state.
type View struct {
	ID              string     `json:"id"`
	CallbackID      string     `json:"callback_id"`
	PrivateMetadata string     `json:"private_metadata"`
	State           *ViewState `json:"state"`
}

// ViewState holds a view's input values: block id → action id → value.
type ViewState struct {
	Values map[string]map[string]BlockAction `json:"values"`
}

// The signature headers of a request from Slack.
const (
	SignatureHeader = "X-Slack-Signature"
	TimestampHeader = "X-Slack-Request-Timestamp"
)

// MaxRequestAge is how far from now a request's timestamp may be (Slack's "Verifying
// requests from Slack": five minutes), so an old request cannot be replayed later.
const MaxRequestAge = 5 * time.Minute

// The errors of Verify that are not a mismatch.
var (
	ErrMissingHeaders   = errors.New("X-Slack-Signature or X-Slack-Request-Timestamp is missing")
	ErrExpiredTimestamp = errors.New("X-Slack-Request-Timestamp is more than five minutes from now")
	ErrBadSignature     = errors.New("the signature does not match the signing secret")
)

// Verify checks a request's v0 signature (Slack's "Verifying requests from Slack"):
// X-Slack-Signature is "v0=" + hex HMAC-SHA256 of "v0:<timestamp>:<body>" with the signing
// secret, compared in constant time (hmac.Equal), and the timestamp within MaxRequestAge of
// now. Errors: ErrMissingHeaders, ErrExpiredTimestamp, ErrBadSignature; none holds the
// secret or the signature.
func Verify(h http.Header, body []byte, secret string, now time.Time) error {
	sig, ts := h.Get(SignatureHeader), h.Get(TimestampHeader)
	if sig == "" || ts == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrExpiredTimestamp
	}
	if now.Sub(time.Unix(sec, 0)).Abs() > MaxRequestAge {
		return ErrExpiredTimestamp
	}
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "v0="))
	if err != nil || !strings.HasPrefix(sig, "v0=") {
		return ErrBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return ErrBadSignature
	}
	return nil
}
