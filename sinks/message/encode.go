package message

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/ankusa-go/ankusa/sinks"
)

// Version is the message version this package writes and reads.
const Version = 1

// Meta is what the publishing instance adds to every message.
type Meta struct {
	Instance string // instance name; null in the message when empty
}

// Message is a decoded Message v1. Headers holds one entry per name, in document order, with repeated
// provider headers already joined by ", ".
type Message struct {
	ID             string
	SourceID       string
	TenantID       string // "" when null
	ReceivedAt     int64  // unix ms
	ContentType    string // "" when null
	Size           int64
	SHA256         string // lowercase hex
	DedupeKey      string // "" when null
	ReplayID       string // "" when null
	IdempotencyKey string
	Headers        []sinks.Header
	Verification   string // "" when null
	Instance       string // "" when null
	Claim          string // the claim ref; "" for an inline body

	body []byte // decoded body_base64
}

// Body returns the inline body (nil for a claimed one: see Redeem). The slice belongs to the Message.
func (m *Message) Body() []byte { return m.body }

// Inline reports whether the body travels in the message rather than by claim.
func (m *Message) Inline() bool { return m.Claim == "" }

// EncodedLen bounds the length of Encode's output for e, so a caller can size a buffer once.
func EncodedLen(e *sinks.Envelope) int {
	n := 512 + 6*(len(e.IDText)+len(e.Source)+len(e.Tenant)+len(e.ContentType)+len(e.DedupeKey)+len(e.ReplayID)) +
		2*6*len(e.DedupeKey) + 6*len(e.Claim)
	for _, h := range e.Headers {
		n += 8 + 6*(len(h.Name)+len(h.Value))
	}
	if e.Claim == "" {
		n += base64.StdEncoding.EncodedLen(len(e.Body))
	}
	return n
}

// Encode appends e as Message v1 to dst and returns the extended slice. With e.Claim set the message carries
// the claim ref instead of the body; size and sha256 always describe the hook body, which must therefore be
// in e.Body either way. The forwarded headers are e.Headers passed through sinks.Forward (Proxy allowed, as
// the source's policy already ran when the envelope was built): credentials, framing headers and x-ankusa-*
// never reach a message.
func Encode(dst []byte, e *sinks.Envelope, meta Meta) []byte {
	dst = slices.Grow(dst, EncodedLen(e))
	sum := sha256.Sum256(e.Body)
	dst = append(dst, `{"v":1,"id":`...)
	dst = appendString(dst, e.Text())
	dst = append(dst, `,"source_id":`...)
	dst = appendString(dst, e.Source)
	dst = append(dst, `,"tenant_id":`...)
	dst = appendNullable(dst, e.Tenant)
	dst = append(dst, `,"received_at":`...)
	dst = strconv.AppendInt(dst, e.ReceivedAt, 10)
	dst = append(dst, `,"content_type":`...)
	dst = appendNullable(dst, e.ContentType)
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, int64(len(e.Body)), 10)
	dst = append(dst, `,"sha256":"`...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, `","dedupe_key":`...)
	dst = appendNullable(dst, e.DedupeKey)
	dst = append(dst, `,"replay_id":`...)
	dst = appendNullable(dst, e.ReplayID)
	dst = append(dst, `,"idempotency_key":`...)
	dst = appendString(dst, e.IdempotencyKey())
	dst = append(dst, `,"headers":`...)
	dst = appendHeaders(dst, sinks.Forward{Proxy: true}.Headers(e.Headers))
	dst = append(dst, `,"verification":`...)
	dst = appendNullable(dst, e.Verification)
	dst = append(dst, `,"instance":`...)
	dst = appendNullable(dst, meta.Instance)
	if e.Claim != "" {
		dst = append(dst, `,"claim":`...)
		dst = appendString(dst, e.Claim)
	} else {
		dst = append(dst, `,"body_base64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, e.Body)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// Append appends m as Message v1 to dst: the encoder for a Message a consumer decoded (and the fuzz test's
// round trip). The body is m's inline body or its claim.
func (m *Message) Append(dst []byte) []byte {
	dst = append(dst, `{"v":1,"id":`...)
	dst = appendString(dst, m.ID)
	dst = append(dst, `,"source_id":`...)
	dst = appendString(dst, m.SourceID)
	dst = append(dst, `,"tenant_id":`...)
	dst = appendNullable(dst, m.TenantID)
	dst = append(dst, `,"received_at":`...)
	dst = strconv.AppendInt(dst, m.ReceivedAt, 10)
	dst = append(dst, `,"content_type":`...)
	dst = appendNullable(dst, m.ContentType)
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, m.Size, 10)
	dst = append(dst, `,"sha256":`...)
	dst = appendString(dst, m.SHA256)
	dst = append(dst, `,"dedupe_key":`...)
	dst = appendNullable(dst, m.DedupeKey)
	dst = append(dst, `,"replay_id":`...)
	dst = appendNullable(dst, m.ReplayID)
	dst = append(dst, `,"idempotency_key":`...)
	dst = appendString(dst, m.IdempotencyKey)
	dst = append(dst, `,"headers":`...)
	dst = appendHeaders(dst, m.Headers)
	dst = append(dst, `,"verification":`...)
	dst = appendNullable(dst, m.Verification)
	dst = append(dst, `,"instance":`...)
	dst = appendNullable(dst, m.Instance)
	if m.Claim != "" {
		dst = append(dst, `,"claim":`...)
		dst = appendString(dst, m.Claim)
	} else {
		dst = append(dst, `,"body_base64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, m.body)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// appendHeaders writes hs as one JSON object: each name once, at its first position, with the values of
// its repeats joined by ", " (a JSON object cannot repeat a key and stay portable).
func appendHeaders(dst []byte, hs []sinks.Header) []byte {
	dst = append(dst, '{')
	first := true
	for i, h := range hs {
		if seenBefore(hs[:i], h.Name) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, h.Name)
		dst = append(dst, ':', '"')
		dst = appendStringBody(dst, h.Value)
		for _, r := range hs[i+1:] {
			if r.Name == h.Name {
				dst = append(dst, ", "...)
				dst = appendStringBody(dst, r.Value)
			}
		}
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

func seenBefore(hs []sinks.Header, name string) bool {
	for _, h := range hs {
		if h.Name == name {
			return true
		}
	}
	return false
}

func appendNullable(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendStringBody(dst, s)
	return append(dst, '"')
}

// appendStringBody escapes s as the inside of a JSON string: quote, backslash and control characters
// escaped, U+2028/U+2029 escaped, each byte of an invalid UTF-8 sequence written as U+FFFD (as
// encoding/json does), everything else verbatim.
func appendStringBody(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}
