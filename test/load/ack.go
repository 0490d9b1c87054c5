package load

import (
	"bytes"
	"encoding/json"
)

// parseAck extracts the hook id and the duplicate flag from a 201 body such as
// {"status":"accepted","id":"0190…","duplicate":true}. It scans for the two keys
// instead of decoding: the scan allocates nothing and is much cheaper than
// encoding/json (BenchmarkParseAck), which matters when the driver shares two cores
// with the server it measures. Bodies the scan cannot read (an escape in the id or
// in a key) fall back to encoding/json so a valid ack is never miscounted. ok is
// false when the body carries no non-empty string id.
func parseAck(body []byte) (id []byte, dup, ok bool) {
	id, ok = scanString(body, keyID)
	if ok && bytes.IndexByte(id, '\\') < 0 && len(id) > 0 {
		dup = scanTrue(body, keyDuplicate)
		return id, dup, true
	}
	// Keys are matched exactly, as the scan does: encoding/json alone would also
	// take "ID" or "Id" for the id.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false, false
	}
	var s string
	if err := json.Unmarshal(m["id"], &s); err != nil || s == "" {
		return nil, false, false
	}
	var d bool // not dup itself: taking its address would move it to the heap on every call
	_ = json.Unmarshal(m["duplicate"], &d)
	return []byte(s), d, true
}

var (
	keyID        = []byte(`"id"`)
	keyDuplicate = []byte(`"duplicate"`)
)

// valueAfter returns what follows `key` and a colon (spaces allowed), or nil.
func valueAfter(body, key []byte) []byte {
	for off := 0; ; {
		i := bytes.Index(body[off:], key)
		if i < 0 {
			return nil
		}
		rest := skipSpace(body[off+i+len(key):])
		if len(rest) > 0 && rest[0] == ':' {
			return skipSpace(rest[1:])
		}
		// The key text appeared as a value, not a key: keep looking.
		off += i + len(key)
	}
}

func scanString(body, key []byte) ([]byte, bool) {
	v := valueAfter(body, key)
	if len(v) == 0 || v[0] != '"' {
		return nil, false
	}
	end := bytes.IndexByte(v[1:], '"')
	if end < 0 {
		return nil, false
	}
	return v[1 : 1+end], true
}

func scanTrue(body, key []byte) bool {
	return bytes.HasPrefix(valueAfter(body, key), []byte("true"))
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
