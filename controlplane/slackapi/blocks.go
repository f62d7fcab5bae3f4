// Package slackapi is the part of Slack's platform rbook uses, written against Slack's
// documented shapes (docs/slack.md): the Block Kit blocks and elements of a gate's message
// and its modals, the Web API methods chat.postMessage, chat.update, chat.postEphemeral and
// views.open (Client), the interaction payloads of block_actions and view_submission, and
// the v0 request signature (Verify). Only the fields rbook writes or reads are declared.
package slackapi

// The Block Kit text object types (https://docs.slack.dev/reference/block-kit/composition-objects/text-object).
const (
	PlainTextType = "plain_text"
	MarkdownType  = "mrkdwn"
)

// The button styles (https://docs.slack.dev/reference/block-kit/block-elements/button-element).
const (
	StylePrimary = "primary"
	StyleDanger  = "danger"
)

// TextObject is a Block Kit text object. Emoji is sent for plain_text only.
type TextObject struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Emoji    *bool  `json:"emoji,omitempty"`
	Verbatim bool   `json:"verbatim,omitempty"`
}

// NewText is a text object of typ (PlainTextType or MarkdownType); emoji is kept for
// plain_text only (Slack refuses it on mrkdwn).
func NewText(typ, text string, emoji, verbatim bool) *TextObject {
	t := &TextObject{Type: typ, Text: text, Verbatim: verbatim}
	if typ != MarkdownType {
		t.Emoji = &emoji
	}
	return t
}

// Block is one Block Kit layout block (header, section, context, actions, input).
type Block interface{ blockType() string }

// HeaderBlock is a "header" block.
type HeaderBlock struct {
	Type string      `json:"type"`
	Text *TextObject `json:"text,omitempty"`
}

// SectionBlock is a "section" block: a text, or fields shown in two columns.
type SectionBlock struct {
	Type   string        `json:"type"`
	Text   *TextObject   `json:"text,omitempty"`
	Fields []*TextObject `json:"fields,omitempty"`
}

// ContextBlock is a "context" block of small text.
type ContextBlock struct {
	Type     string        `json:"type"`
	BlockID  string        `json:"block_id,omitempty"`
	Elements []*TextObject `json:"elements"`
}

// ActionBlock is an "actions" block of interactive elements (buttons here).
type ActionBlock struct {
	Type     string `json:"type"`
	BlockID  string `json:"block_id,omitempty"`
	Elements []any  `json:"elements"`
}

// InputBlock is an "input" block of a modal: a label, an element, an optional hint.
type InputBlock struct {
	Type     string      `json:"type"`
	BlockID  string      `json:"block_id,omitempty"`
	Label    *TextObject `json:"label"`
	Element  any         `json:"element"`
	Hint     *TextObject `json:"hint,omitempty"`
	Optional bool        `json:"optional,omitempty"`
}

func (*HeaderBlock) blockType() string  { return "header" }
func (*SectionBlock) blockType() string { return "section" }
func (*ContextBlock) blockType() string { return "context" }
func (*ActionBlock) blockType() string  { return "actions" }
func (*InputBlock) blockType() string   { return "input" }

// NewHeader is a header block of text.
func NewHeader(text *TextObject) *HeaderBlock { return &HeaderBlock{Type: "header", Text: text} }

// NewSection is a section block of text and/or fields.
func NewSection(text *TextObject, fields []*TextObject) *SectionBlock {
	return &SectionBlock{Type: "section", Text: text, Fields: fields}
}

// NewContext is a context block of texts.
func NewContext(blockID string, texts ...*TextObject) *ContextBlock {
	return &ContextBlock{Type: "context", BlockID: blockID, Elements: texts}
}

// NewActions is an actions block of elements.
func NewActions(blockID string, elements ...any) *ActionBlock {
	return &ActionBlock{Type: "actions", BlockID: blockID, Elements: elements}
}

// NewInput is an input block: label, hint (nil: none) and the element.
func NewInput(blockID string, label, hint *TextObject, element any, optional bool) *InputBlock {
	return &InputBlock{Type: "input", BlockID: blockID, Label: label, Element: element, Hint: hint, Optional: optional}
}

// Button is a "button" element: an action (ActionID, Value) or a link (URL).
type Button struct {
	Type     string      `json:"type,omitempty"`
	Text     *TextObject `json:"text"`
	ActionID string      `json:"action_id,omitempty"`
	URL      string      `json:"url,omitempty"`
	Value    string      `json:"value,omitempty"`
	Style    string      `json:"style,omitempty"`
}

// NewButton is a button with actionID and value; set URL or Style on the result.
func NewButton(actionID, value string, text *TextObject) *Button {
	return &Button{Type: "button", Text: text, ActionID: actionID, Value: value}
}

// Option is an option of a select menu.
type Option struct {
	Text  *TextObject `json:"text"`
	Value string      `json:"value"`
}

// NewOption is an option with value shown as text.
func NewOption(value string, text *TextObject) *Option { return &Option{Text: text, Value: value} }

// StaticSelect is a "static_select" menu.
type StaticSelect struct {
	Type          string      `json:"type,omitempty"`
	Placeholder   *TextObject `json:"placeholder,omitempty"`
	ActionID      string      `json:"action_id,omitempty"`
	Options       []*Option   `json:"options,omitempty"`
	InitialOption *Option     `json:"initial_option,omitempty"`
}

// NewStaticSelect is a menu of options; set InitialOption on the result.
func NewStaticSelect(placeholder *TextObject, actionID string, options ...*Option) *StaticSelect {
	return &StaticSelect{Type: "static_select", Placeholder: placeholder, ActionID: actionID, Options: options}
}

// PlainTextInput is a "plain_text_input" element.
type PlainTextInput struct {
	Type         string `json:"type"`
	ActionID     string `json:"action_id,omitempty"`
	InitialValue string `json:"initial_value,omitempty"`
	MaxLength    int    `json:"max_length,omitempty"`
}

// NewPlainTextInput is a one-line text input; set InitialValue or MaxLength on the result.
func NewPlainTextInput(actionID string) *PlainTextInput {
	return &PlainTextInput{Type: "plain_text_input", ActionID: actionID}
}

// ModalView is a "modal" view (views.open's view argument).
type ModalView struct {
	Type            string      `json:"type"`
	Title           *TextObject `json:"title,omitempty"`
	Blocks          []Block     `json:"blocks"`
	Close           *TextObject `json:"close,omitempty"`
	Submit          *TextObject `json:"submit,omitempty"`
	PrivateMetadata string      `json:"private_metadata,omitempty"`
	CallbackID      string      `json:"callback_id,omitempty"`
}

// ViewSubmissionResponse answers a view_submission: response_action "errors" with a
// message per input block id keeps the modal open and shows them.
type ViewSubmissionResponse struct {
	ResponseAction string            `json:"response_action"`
	Errors         map[string]string `json:"errors,omitempty"`
}

// NewErrorsResponse is the "errors" answer of a view_submission.
func NewErrorsResponse(errs map[string]string) *ViewSubmissionResponse {
	return &ViewSubmissionResponse{ResponseAction: "errors", Errors: errs}
}
