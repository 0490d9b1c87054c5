package admin

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/store"
)

// maxBodyBytes bounds a request body of the admin API: every body it takes is a small JSON object.
const maxBodyBytes = 64 << 10

// errBadParam is a malformed caller value; the field it names goes in the 400 body, the value never.
type errBadParam struct{ field string }

func (e errBadParam) Error() string { return "admin: malformed " + e.field }

// validID is [A-Za-z0-9_-]{1,64}: tenant ids and source ids (inventory G.1).
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// query reads the caller's query parameters; each getter records the first malformed field.
type query struct {
	v   url.Values
	bad string
}

func newQuery(r *http.Request) *query { return &query{v: r.URL.Query()} }

func (q *query) fail(field string) {
	if q.bad == "" {
		q.bad = field
	}
}

// id reads a [A-Za-z0-9_-]{1,64} value ("" when absent).
func (q *query) id(field string) string {
	s := q.v.Get(field)
	if s != "" && !validID(s) {
		q.fail(field)
		return ""
	}
	return s
}

// text reads a free-text value of at most max bytes ("" when absent).
func (q *query) text(field string, max int) string {
	s := q.v.Get(field)
	if len(s) > max {
		q.fail(field)
		return ""
	}
	return s
}

// int reads a non-negative integer (def when absent).
func (q *query) int(field string, def int64) int64 {
	s := q.v.Get(field)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		q.fail(field)
		return def
	}
	return n
}

// limit reads limit: default def, clamped to max (inventory A.5: "limit clamped").
func (q *query) limit(def, max int64) int {
	return int(min(q.int("limit", def), max))
}

// hookID reads a canonical UUID (zero when absent).
func (q *query) hookID(field string) [16]byte {
	s := q.v.Get(field)
	if s == "" {
		return [16]byte{}
	}
	id, ok := parseID(s)
	if !ok {
		q.fail(field)
	}
	return id
}

// parseID accepts only the canonical 36-character form of a UUID.
func parseID(s string) ([16]byte, bool) {
	if len(s) != 36 {
		return [16]byte{}, false
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return [16]byte{}, false
	}
	return id, true
}

// A DLQ page cursor is the last entry's {dead_at, seq, sink}, base64url: opaque to callers.
func encodeDeadCursor(k store.DeadKey) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(k.At))
	b = binary.BigEndian.AppendUint64(b, k.Seq)
	b = binary.BigEndian.AppendUint16(b, k.Sink)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (q *query) deadCursor() *store.DeadKey {
	s := q.v.Get("cursor")
	if s == "" {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 18 {
		q.fail("cursor")
		return nil
	}
	return &store.DeadKey{At: int64(binary.BigEndian.Uint64(b)), Seq: binary.BigEndian.Uint64(b[8:]),
		Sink: binary.BigEndian.Uint16(b[16:])}
}

// decodeBody reads one JSON object into v, refusing unknown fields, trailing data and bodies over
// maxBodyBytes.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errBadParam{"body"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errBadParam{"body"}
	}
	return nil
}

// A quarantine page cursor is the last entry's {received_at, id}, base64url: opaque to callers.
func encodePenCursor(c store.PenCursor) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.ReceivedAt))
	return base64.RawURLEncoding.EncodeToString(append(b, c.ID[:]...))
}

func (q *query) penCursor() *store.PenCursor {
	s := q.v.Get("cursor")
	if s == "" {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 24 || int64(binary.BigEndian.Uint64(b)) < 0 {
		q.fail("cursor")
		return nil
	}
	return &store.PenCursor{ReceivedAt: int64(binary.BigEndian.Uint64(b)), ID: [16]byte(b[8:])}
}
