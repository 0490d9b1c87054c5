package message

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// The walker below reads members of an object in a document json.Valid already accepted, without copying:
// each value is a sub-slice of the input. It does not re-check syntax, so it must only ever see valid JSON.

var errScan = errors.New("message: malformed object") // unreachable for a document json.Valid accepted

// members calls fn for each member of the object starting at b[0] ('{'), in document order.
func members(b []byte, fn func(key string, value []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errScan
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		end := stringEnd(b, i)
		if end < 0 {
			return errScan
		}
		key, err := unquote(b[i:end])
		if err != nil {
			return err
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errScan
		}
		i = skipSpace(b, i+1)
		vend := valueEnd(b, i)
		if vend < 0 {
			return errScan
		}
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return errScan
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return nil
		default:
			return errScan
		}
	}
	return errScan
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] ('"'), or -1.
func stringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index just past the value starting at b[i], or -1.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j
	}
}

// unquote returns the text of a JSON string literal: directly when it has no escape and is valid UTF-8,
// through encoding/json otherwise (which also replaces invalid UTF-8 as the encoder does).
func unquote(lit []byte) (string, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", errNotStr
	}
	inner := lit[1 : len(lit)-1]
	plain := utf8.Valid(inner)
	for _, c := range inner {
		if c == '\\' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", errNotStr
	}
	return s, nil
}
