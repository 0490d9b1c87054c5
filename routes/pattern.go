package routes

import "strings"

// Pattern grammar (inventory A.6): a path starting with "/", its segments separated by one "/" each, none
// empty (no "//", no trailing slash; "/" alone is the root). A segment is
//
//	literal   unreserved and sub-delim bytes, ":" and "@" (not first), "%HH" escapes (decoded)
//	:name     one non-empty request segment; name is [A-Za-z_][A-Za-z0-9_]{0,63}, unique in the pattern
//	*         the last segment only: one or more request segments
//
// "%2F" (an encoded slash) is refused, and so is a segment that is or decodes to "." or "..": the edge matches
// the decoded, normalized request path, in which neither can appear, so such a pattern could only mislead.
// A literal is matched byte for byte against the decoded request segment.

const (
	maxPatternLen   = 1024
	maxSegments     = 32
	maxParamNameLen = 64
)

type segKind uint8

const (
	segLiteral segKind = iota
	segParam
	segTail
)

type segment struct {
	kind segKind
	lit  string // a literal's decoded bytes, or a parameter's name
}

// Pattern is a parsed route path.
type Pattern struct {
	raw  string
	segs []segment
}

// String is the pattern as written.
func (p Pattern) String() string { return p.raw }

// shape is the pattern with its parameter names dropped: two patterns of one shape match the same paths.
func (p Pattern) shape() string {
	var b strings.Builder
	for _, s := range p.segs {
		switch s.kind {
		case segLiteral:
			b.WriteString("/L")
			b.WriteString(s.lit)
		case segParam:
			b.WriteString("/P")
		case segTail:
			b.WriteString("/T")
		}
		b.WriteByte(0)
	}
	return b.String()
}

// ParsePattern parses a route path; the error is a *FieldError naming "path".
func ParsePattern(s string) (Pattern, error) {
	switch {
	case s == "":
		return Pattern{}, fieldErr("path", "must be non-empty")
	case len(s) > maxPatternLen:
		return Pattern{}, fieldErr("path", "must be at most %d bytes", maxPatternLen)
	case s[0] != '/':
		return Pattern{}, fieldErr("path", `must start with "/"`)
	case s == "/":
		return Pattern{raw: s}, nil
	}
	p := Pattern{raw: s}
	rest := s[1:]
	for {
		seg, after, more := strings.Cut(rest, "/")
		if len(p.segs) == maxSegments {
			return Pattern{}, fieldErr("path", "must have at most %d segments", maxSegments)
		}
		if len(p.segs) > 0 && p.segs[len(p.segs)-1].kind == segTail {
			return Pattern{}, fieldErr("path", `may have "*" only as its last segment`)
		}
		sg, err := parseSegment(seg)
		if err != nil {
			return Pattern{}, err
		}
		if sg.kind == segParam {
			for _, prev := range p.segs {
				if prev.kind == segParam && prev.lit == sg.lit {
					return Pattern{}, fieldErr("path", "must not name a parameter twice")
				}
			}
		}
		p.segs = append(p.segs, sg)
		if !more {
			return p, nil
		}
		rest = after
	}
}

func parseSegment(seg string) (segment, error) {
	switch {
	case seg == "":
		return segment{}, fieldErr("path", `must not have an empty segment ("//" or a trailing "/")`)
	case seg == "*":
		return segment{kind: segTail}, nil
	case seg[0] == ':':
		name := seg[1:]
		if !validParamName(name) {
			return segment{}, fieldErr("path", "must name each parameter [A-Za-z_][A-Za-z0-9_]{0,63}")
		}
		return segment{kind: segParam, lit: name}, nil
	}
	var dec []byte
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) || unhex(seg[i+1]) < 0 || unhex(seg[i+2]) < 0 {
				return segment{}, fieldErr("path", "must write %% only as a %%HH escape")
			}
			v := byte(unhex(seg[i+1])<<4 | unhex(seg[i+2]))
			if v == '/' {
				return segment{}, fieldErr("path", "must not hold an encoded slash (%%2F)")
			}
			if v < 0x20 || v == 0x7f {
				return segment{}, fieldErr("path", "must not encode a control byte")
			}
			dec = append(dec, v)
			i += 2
		case literalByte(c):
			dec = append(dec, c)
		default:
			return segment{}, fieldErr("path", "must hold only unreserved, sub-delim, ':' and '@' bytes or %%HH escapes")
		}
	}
	if d := string(dec); d == "." || d == ".." {
		return segment{}, fieldErr("path", `must not have a "." or ".." segment`)
	}
	return segment{kind: segLiteral, lit: string(dec)}, nil
}

// literalByte: RFC 3986 pchar minus '%' (escapes are handled apart) and '*' (the tail marker).
func literalByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()+,;=:@", c) >= 0
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func validParamName(s string) bool {
	if s == "" || len(s) > maxParamNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !alpha && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Match reports whether the decoded request path matches p (the table's trie does the same for many
// patterns at once; this one is for a single route and the tests).
func (p Pattern) Match(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	if len(p.segs) == 0 {
		return path == "/"
	}
	rest := path
	for i, s := range p.segs {
		if len(rest) < 2 || rest[0] != '/' {
			return false
		}
		if s.kind == segTail {
			return i == len(p.segs)-1 && rest[1] != '/'
		}
		end := strings.IndexByte(rest[1:], '/')
		seg := rest[1:]
		if end >= 0 {
			seg = rest[1 : end+1]
		}
		if seg == "" || s.kind == segLiteral && seg != s.lit {
			return false
		}
		rest = rest[1+len(seg):]
	}
	return rest == ""
}
