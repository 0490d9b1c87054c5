package edge

import (
	"bytes"
	"testing"
)

// Whatever a provider (or anyone) sends to be echoed, what echoable lets through is bounded and holds no
// byte that could make markup or leave a JSON string.
func FuzzEchoable(f *testing.F) {
	f.Add([]byte("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"))
	f.Add([]byte("Validation: Testing client application reachability"))
	f.Add([]byte(`"><script>alert(1)</script>`))
	f.Add([]byte("\xff\x00\n"))
	f.Fuzz(func(t *testing.T, v []byte) {
		if !echoable(v) {
			return
		}
		if len(v) == 0 || len(v) > maxEcho || bytes.ContainsAny(v, "<>\"'&\\\r\n\x00") {
			t.Fatalf("echoable(%q)", v)
		}
		for _, c := range v {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("echoable(%q): byte %#x", v, c)
			}
		}
	})
}
