package sinks

// HeaderValue returns s as it may be sent in a header or broker attribute. Values such as a JSON dedupe key
// or a tenant named by the URL are chosen by whoever sent the hook and may hold bytes no header can carry
// (Go's transport refuses a request with a control character in a header, and the attempt could never
// succeed). A value of printable ASCII (0x20..0x7E) that neither starts nor ends with a space is returned
// unchanged, without allocating. Any other value is sent percent-encoded as a whole: every byte outside
// 0x21..0x7E, and '%' itself, becomes %XX (uppercase hex over the UTF-8 bytes), so "k\n\x00" is sent as
// "k%0A%00". A destination that needs the exact bytes reads them from the body (or the Message JSON, which
// carries them unencoded).
func HeaderValue(s string) string {
	if headerSafe(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if escapeByte(s[i]) {
			n++
		}
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; escapeByte(c) {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func headerSafe(s string) bool {
	if s != "" && (s[0] == ' ' || s[len(s)-1] == ' ') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func escapeByte(c byte) bool { return c <= 0x20 || c > 0x7e || c == '%' }
