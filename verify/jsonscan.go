package verify

import "bytes"

// maxJSONDepth bounds the nesting a skipped JSON value may have; deeper is treated as malformed.
const maxJSONDepth = 64

// jsonField returns the raw bytes of the value of key among the members of the top-level object of b,
// without allocating. A key written with escapes does not match; a value that is not well-delimited JSON
// (an unterminated string, unbalanced brackets, nesting past maxJSONDepth) ends the search unmatched.
// It is a scanner, not a validator: it reads only as far as the member it looks for.
func jsonField(b []byte, key string) ([]byte, bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false // '}' (not found) or malformed
		}
		kEnd, ok := stringEnd(b, i)
		if !ok {
			return nil, false
		}
		k := b[i+1 : kEnd-1]
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipWS(b, i+1)
		vEnd, ok := valueEnd(b, i)
		if !ok {
			return nil, false
		}
		if string(k) == key {
			return b[i:vEnd], true
		}
		i = skipWS(b, vEnd)
		if i >= len(b) || b[i] != ',' {
			return nil, false
		}
		i++
	}
}

// jsonStringValue returns the contents of a JSON string value that holds no escape, or the digits of a
// non-negative integer written bare; anything else is not ok.
func jsonStringValue(v []byte) ([]byte, bool) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		in := v[1 : len(v)-1]
		if bytes.IndexByte(in, '\\') >= 0 {
			return nil, false
		}
		return in, true
	}
	if _, ok := parseUnix(v); ok {
		return v, true
	}
	return nil, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] == '"'.
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
				if depth > maxJSONDepth {
					return 0, false
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return 0, false
	}
	return j, true
}

// JSONField is jsonField for the edge's handshakes: the raw value of a top-level member, without
// allocating.
func JSONField(b []byte, key string) ([]byte, bool) { return jsonField(b, key) }

// JSONStringValue is jsonStringValue: the contents of an escape-free JSON string (or bare integer).
func JSONStringValue(v []byte) ([]byte, bool) { return jsonStringValue(v) }
