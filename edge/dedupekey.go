package edge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ankusa-go/ankusa/config"
)

// maxDedupeKey is the longest key kept as sent; a longer one is stored as "sha256:<hex>" (inventory C.5),
// so a provider cannot make the dedupe index hold arbitrarily large keys.
const maxDedupeKey = 200

// DedupeExtractor reads a provider's event key from a request: one header, or one value of a JSON body.
// It is immutable and safe for concurrent use.
type DedupeExtractor struct {
	header string   // lowercased header name; "" in JSON mode
	path   [][]byte // object keys from the root; nil in header mode
	ttl    time.Duration
}

// dedupePreset maps a preset to where its provider puts the event key (inventory C.5).
func dedupePreset(name string) (header, jsonPath string, ok bool) {
	switch name {
	case "github":
		return "x-github-delivery", "", true
	case "standard_webhooks":
		return "webhook-id", "", true
	case "svix":
		return "svix-id", "", true
	case "shopify":
		return "x-shopify-webhook-id", "", true
	case "stripe":
		return "", "id", true
	// The providers of docs/providers.md: each one's own event or delivery id, stable across its retries.
	case "twilio":
		return "i-twilio-idempotency-token", "", true
	case "linear":
		return "linear-delivery", "", true
	case "gitlab":
		return "idempotency-key", "", true
	case "paddle", "typeform", "square":
		return "", "event_id", true
	case "intercom":
		return "", "id", true
	case "pagerduty":
		return "", "event.id", true
	case "mailgun":
		return "", "event-data.id", true
	}
	return "", "", false
}

// NewDedupeExtractor builds the extractor a dedupe block describes. It refuses (ErrBadTrust) what
// config's Validate refuses: not exactly one of preset, header and json, an unknown preset, an empty
// path segment, a TTL that is not positive.
func NewDedupeExtractor(spec config.DedupeSpec) (*DedupeExtractor, error) {
	set := 0
	for _, v := range []string{spec.Preset, spec.Header, spec.JSON} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: dedupe must name exactly one of preset, header or json", ErrBadTrust)
	}
	if spec.TTLSeconds <= 0 {
		return nil, fmt.Errorf("%w: dedupe ttl_seconds must be > 0, got %d", ErrBadTrust, spec.TTLSeconds)
	}
	header, jsonPath := spec.Header, spec.JSON
	if spec.Preset != "" {
		var ok bool
		if header, jsonPath, ok = dedupePreset(spec.Preset); !ok {
			return nil, fmt.Errorf("%w: unknown dedupe preset %q", ErrBadTrust, spec.Preset)
		}
	}
	d := &DedupeExtractor{header: strings.ToLower(header), ttl: time.Duration(spec.TTLSeconds) * time.Second}
	if jsonPath != "" {
		for _, seg := range strings.Split(jsonPath, ".") {
			if seg == "" {
				return nil, fmt.Errorf("%w: dedupe json path %q has an empty segment", ErrBadTrust, jsonPath)
			}
			d.path = append(d.path, []byte(seg))
		}
	}
	return d, nil
}

// TTL is how long a key suppresses repeats.
func (d *DedupeExtractor) TTL() time.Duration { return d.ttl }

// Key returns the provider's event key, or "" when there is none (missing or empty header, a body that
// is not valid UTF-8 JSON, no string or integer at the path). A key longer than 200 bytes becomes
// "sha256:<hex>". header(name) is a case-insensitive lookup; it is given a lowercased name.
func (d *DedupeExtractor) Key(header func(name string) []byte, body []byte) string {
	if d.path == nil {
		if header == nil {
			return ""
		}
		return dedupeKey(header(d.header))
	}
	// "Undecodable body → no key" (inventory C.5): the key of a body that is not JSON as a whole is not
	// trusted, even when the scan below would find it before the damage.
	if !utf8.Valid(body) || !json.Valid(body) {
		return ""
	}
	s := jsonScan{b: body}
	v, _ := s.lookup(d.path)
	return dedupeKey(v)
}

// dedupeKey is the key as stored: "" for none, the value, or its hash when too long.
func dedupeKey(v []byte) string {
	switch {
	case len(v) == 0:
		return ""
	case len(v) <= maxDedupeKey:
		return string(v)
	}
	sum := sha256.Sum256(v)
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// jsonScan walks a body already known to be valid JSON without decoding it: only the object keys on the
// path and the final value are looked at, and nothing is allocated unless one of them holds an escape.
// Validity is what keeps every index below in range.
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// lookup reads the value at the scanner (after whitespace) and returns the key at path inside it, and
// whether it found one. The whole value is consumed. Like decoding into a map, a key that appears twice
// in an object takes its last value.
func (s *jsonScan) lookup(path [][]byte) ([]byte, bool) {
	s.ws()
	if len(path) == 0 {
		return s.scalar()
	}
	if s.b[s.i] != '{' {
		s.skip()
		return nil, false
	}
	s.i++
	var found []byte
	ok := false
	for {
		s.ws()
		if s.b[s.i] == '}' {
			s.i++
			return found, ok
		}
		key, escaped := s.str()
		s.ws()
		s.i++ // ':'
		if keyEqual(key, escaped, path[0]) {
			found, ok = s.lookup(path[1:])
		} else {
			s.ws()
			s.skip()
		}
		s.ws()
		if s.b[s.i] == ',' {
			s.i++
		}
	}
}

// scalar consumes a value and returns it as a key: a string's contents or an integer's digits.
func (s *jsonScan) scalar() ([]byte, bool) {
	switch c := s.b[s.i]; {
	case c == '"':
		start := s.i
		raw, escaped := s.str()
		if !escaped {
			return raw, true
		}
		var v string
		if json.Unmarshal(s.b[start:s.i], &v) != nil {
			return nil, false
		}
		return []byte(v), true
	case c == '-' || c >= '0' && c <= '9':
		start := s.i
		s.skip()
		num := s.b[start:s.i]
		if bytes.ContainsAny(num, ".eE") {
			return nil, false // a float is not an event id
		}
		if string(num) == "-0" {
			return []byte("0"), true // decoded, -0 is the integer 0
		}
		return num, true
	}
	s.skip()
	return nil, false
}

// str consumes a string and returns its raw contents (between the quotes) and whether it holds an escape.
func (s *jsonScan) str() (raw []byte, escaped bool) {
	s.i++ // opening quote
	start := s.i
	for {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2
		case '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped
		default:
			s.i++
		}
	}
}

// skip consumes one value of any kind.
func (s *jsonScan) skip() {
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return
				}
			}
			s.i++
		}
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

// keyEqual compares an object key as written (raw, possibly escaped) with a path segment.
func keyEqual(raw []byte, escaped bool, seg []byte) bool {
	if !escaped {
		return bytes.Equal(raw, seg)
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var k string
	return json.Unmarshal(quoted, &k) == nil && k == string(seg)
}
