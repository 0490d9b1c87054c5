package sinks

import "testing"

// Issue 8 item 12: every header on the one credential list is kept from a sink by the default filter
// (edge/storeheaders_test.go proves the edge drops the same list before storing).
func TestEveryCredentialHeaderIsNeverForwardedByDefault(t *testing.T) {
	for _, name := range append([]string{"x-gitlab-token", "X-Gitlab-Token", "set-cookie"}, CredentialHeaders...) {
		in := []Header{{Name: name, Value: "secret"}, {Name: "x-event", Value: "push"}}
		got := ForwardedHeaders(in, nil)
		if len(got) != 1 || got[0].Name != "x-event" {
			t.Errorf("%s: default filter forwarded %v", name, got)
		}
	}
}

// Issue 8 item 12: X-Forwarded-*, Forwarded and X-Real-IP are written by the caller; by default they never
// reach a sink; forward_proxy_headers (Forward.Proxy) or an allow list naming them passes them.
func TestProxyHeadersNeedAnOptIn(t *testing.T) {
	in := []Header{{"x-forwarded-for", "10.0.0.1"}, {"X-Forwarded-Proto", "https"}, {"forwarded", "for=10.0.0.1"},
		{"x-real-ip", "10.0.0.1"}, {"via", "1.1 proxy"}, {"cf-connecting-ip", "10.0.0.1"}, {"x-event", "push"}}
	if got := ForwardedHeaders(in, nil); len(got) != 1 || got[0].Name != "x-event" {
		t.Fatalf("default filter forwarded %v", got)
	}
	if got := (Forward{Proxy: true}).Headers(in); len(got) != len(in) {
		t.Fatalf("forward_proxy_headers forwarded %v", got)
	}
	if got := (Forward{Allow: []string{"x-real-ip"}}).Headers(in); len(got) != 1 || got[0].Name != "x-real-ip" {
		t.Fatalf("allow list forwarded %v", got)
	}
}

// Issue 8 item 9: a caller-chosen value a header cannot carry is percent-encoded; a clean one is unchanged.
func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"evt_123":           "evt_123",
		"a b%c":             "a b%c", // printable: unchanged, '%' too
		"k\n\x00x":          "k%0A%00x",
		"50%\r\n":           "50%25%0D%0A",
		" lead":             "%20lead",
		"trail ":            "trail%20",
		"tab\there":         "tab%09here",
		"ключ":              "%D0%BA%D0%BB%D1%8E%D1%87",
		"x\r\nX-Evil: 1":    "x%0D%0AX-Evil:%201",
		"del\x7f":           "del%7F",
		"inner space\x01ok": "inner%20space%01ok",
	} {
		if got := HeaderValue(in); got != want {
			t.Errorf("HeaderValue(%q) = %q, want %q", in, got, want)
		}
		if !headerSafe(HeaderValue(in)) {
			t.Errorf("HeaderValue(%q) is not safe", in)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = HeaderValue("evt_123:acme:gh") }); n != 0 {
		t.Errorf("a clean value allocated %v times", n)
	}
}
