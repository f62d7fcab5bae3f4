package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// maxPageTokenBytes bounds a page token before it is decoded.
const maxPageTokenBytes = 1024

// pageKey is the last row of a page: the keyset (time text, id) to continue after.
type pageKey struct {
	Scope string `json:"s"` // the listing and its filters; a token only continues its own listing
	At    string `json:"t"`
	ID    string `json:"i"`
}

// encodePageToken makes an opaque token. It is not signed: it only positions a read the
// caller may already make, and decodePageToken validates its shape.
func encodePageToken(scope string, k pageKey) string {
	k.Scope = scope
	b, _ := json.Marshal(k) // cannot fail: strings only
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(tok, scope string) (pageKey, error) {
	bad := fmt.Errorf("%w: page_token is not a token from this listing with these filters", ErrInvalidArgument)
	if len(tok) > maxPageTokenBytes {
		return pageKey{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return pageKey{}, bad
	}
	var k pageKey
	if err := json.Unmarshal(b, &k); err != nil || k.Scope != scope || k.At == "" || k.ID == "" {
		return pageKey{}, bad
	}
	return k, nil
}
