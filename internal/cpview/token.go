package cpview

import (
	"fmt"
	"io"
	"strings"
)

// MaxTokenBytes bounds what ReadToken reads: an approval token is far shorter.
const MaxTokenBytes = 64 << 10

// ReadToken is the approval token rbook approve - and reject - read from r (stdin, keeping
// it out of shell history): at most MaxTokenBytes, spaces and the newline trimmed. Error: r
// could not be read.
func ReadToken(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxTokenBytes))
	if err != nil {
		return "", fmt.Errorf("read the token from stdin: %v", err)
	}
	return strings.TrimSpace(string(b)), nil
}
