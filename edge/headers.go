package edge

import (
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/store"
)

// checkHeaders refuses a header whose name holds a byte outside visible ASCII
// (0x21..0x7E) or whose value holds a byte outside 0x20..0x7E other than TAB: no sink can
// carry it. It runs before the body is read.
func checkHeaders(h *fasthttp.RequestHeader) *RefusedError {
	for k, v := range h.All() {
		nameOK := true
		for _, c := range k {
			if c < 0x21 || c > 0x7e {
				nameOK = false
				break
			}
		}
		if !nameOK {
			return refuseInvalidHeader(nil, false)
		}
		for _, c := range v {
			if (c < 0x20 && c != '\t') || c > 0x7e {
				return refuseInvalidHeader(k, true)
			}
		}
	}
	return nil
}

// skipStored are headers a stored hook never keeps: hop-by-hop and framing headers that
// describe this connection, and the content type (stored in its own field). Credentials
// are left to the source's store_headers policy, which drops them by default.
func skipStored(lower []byte) bool {
	switch string(lower) {
	case "host", "content-length", "content-type", "connection", "keep-alive", "transfer-encoding",
		"te", "trailer", "upgrade", "expect", "proxy-connection":
		return true
	}
	return false
}

// span locates one header's lowercased name and its value inside the arena.
type span struct{ nameStart, nameEnd, valueEnd int }

// collectHeaders appends the request's headers to store into sc.hdrs, names lowercased.
// The strings are views into sc.arena, which must not change until the hook is encoded:
// the per-request cost is copying bytes, not allocating a string per header.
func collectHeaders(h *fasthttp.RequestHeader, sc *scratch) []store.Header {
	arena, spans := sc.arena[:0], sc.spans[:0]
	for k, v := range h.All() {
		start := len(arena)
		for _, c := range k {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			arena = append(arena, c)
		}
		if skipStored(arena[start:]) {
			arena = arena[:start]
			continue
		}
		nameEnd := len(arena)
		arena = append(arena, v...)
		spans = append(spans, span{start, nameEnd, len(arena)})
	}
	// The arena no longer grows, so views into it stay valid.
	hdrs := sc.hdrs[:0]
	for _, sp := range spans {
		hdrs = append(hdrs, store.Header{Name: view(arena[sp.nameStart:sp.nameEnd]), Value: view(arena[sp.nameEnd:sp.valueEnd])})
	}
	sc.arena, sc.spans, sc.hdrs = arena, spans, hdrs
	return hdrs
}

// view is a string sharing b's bytes; b must outlive every use of the string.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
