package sinks

import (
	"encoding/hex"
	"strings"
)

// Header is one stored provider header; names are lowercased by the edge.
type Header struct{ Name, Value string }

// Envelope is the hook as a sink sees it. It is read-only: a sink never modifies it, and never retains Body (or
// a sub-slice of it) after Deliver returns, because the caller reuses the buffer.
type Envelope struct {
	ID          [16]byte
	IDText      string // canonical UUID text
	Source      string
	Tenant      string
	ReceivedAt  int64 // unix ms
	ContentType string
	Headers     []Header // stored provider headers, names lowercased
	Body        []byte
	DedupeKey   string
	ReplayID    string
	// Flagged: accepted although verification failed (on_verify_failure accept_flag).
	Flagged bool
	// Verification is the stored status (inventory C.1): VerificationOK, VerificationFailed (always with
	// Flagged), VerificationSkipped, or "" for a hook stored before the status was recorded. The HTTP sink
	// sends it as X-Ankusa-Verification, the log sink logs it, and Message v1 carries it as "verification".
	Verification string
	Attempt      int // 1 for the first attempt
	// Claim, when set, is the claim ref (urn:ankusa:claim:v1:<tenant>:<claim_id>, inventory D.5) under which
	// the body was checked in: a queue sink then carries the ref instead of the body. Body still holds the
	// hook body, whose size and SHA-256 the message states.
	Claim string
}

// Verification statuses as sinks carry them (inventory D.3: ok|failed|skipped).
const (
	VerificationOK      = "ok"
	VerificationFailed  = "failed"
	VerificationSkipped = "skipped"
)

// DefaultTenant stands for an empty tenant in the idempotency key (inventory D.4: "tenant default when nil").
const DefaultTenant = "default"

// IdempotencyKey is the key a destination deduplicates on (inventory D.4): "tenant:source:dedupe_key" when the
// hook has a dedupe key, else the hook id; with "#replay:<replay_id>" appended for a replay that must be
// reprocessed. Retries of one hook carry the same key.
func (e *Envelope) IdempotencyKey() string {
	base := e.Text()
	if e.DedupeKey != "" {
		tenant := e.Tenant
		if tenant == "" {
			tenant = DefaultTenant
		}
		base = tenant + ":" + e.Source + ":" + e.DedupeKey
	}
	if e.ReplayID != "" {
		return base + "#replay:" + e.ReplayID
	}
	return base
}

// Text returns IDText, or the canonical text of ID when IDText was left empty.
func (e *Envelope) Text() string {
	if e.IDText != "" {
		return e.IDText
	}
	var b [36]byte
	hex.Encode(b[0:8], e.ID[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], e.ID[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], e.ID[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], e.ID[8:10])
	b[23] = '-'
	hex.Encode(b[24:], e.ID[10:])
	return string(b[:])
}

// Forward is a source's forward policy (inventory D.4 `forward_headers`, plus `forward_proxy_headers`).
type Forward struct {
	// Allow, when non-nil, is the only names (case-insensitive) forwarded; an empty non-nil list forwards
	// nothing. nil is the default filter.
	Allow []string
	// Proxy lets the default filter pass the proxy headers (IsProxyHeader): forwarded, x-forwarded-*,
	// x-real-ip and the like. Off by default: the caller writes them, so they would tell a sink an origin
	// nobody checked.
	Proxy bool
}

// ForwardedHeaders applies the default forward policy with allow as its allow list; see Forward.Headers.
func ForwardedHeaders(h []Header, allow []string) []Header { return Forward{Allow: allow}.Headers(h) }

// Headers returns the provider headers a sink passes on (inventory D.4, `forward_headers`).
//
// Under the default filter (Allow == nil) every stored header is forwarded except credentials
// (CredentialHeaders, the one list the edge's store_headers policy uses too), the proxy headers unless Proxy
// is set, the framing and hop-by-hop headers the sink itself owns (host, content-length, content-type,
// connection, keep-alive, transfer-encoding, te, trailer, upgrade, expect, proxy-connection) and every
// x-ankusa-* header. With
// an allow list only the listed names are forwarded. Listing a credential or a proxy header forwards it (the
// operator asked for it), but the framing headers and x-ankusa-* are never forwarded: the sink sets them, and
// a provider must not be able to spoof them. Repeated headers keep their order. The result never aliases h's
// backing array.
func (f Forward) Headers(h []Header) []Header {
	if len(h) == 0 {
		return nil
	}
	out := make([]Header, 0, len(h))
	for _, hd := range h {
		name := hd.Name
		if hasUpper(name) {
			name = strings.ToLower(name)
		}
		if owned(name) {
			continue
		}
		if f.Allow == nil {
			if IsCredentialHeader(name) || (!f.Proxy && IsProxyHeader(name)) {
				continue
			}
		} else if !listed(name, f.Allow) {
			continue
		}
		out = append(out, Header{Name: name, Value: hd.Value})
	}
	return out
}

// owned reports the headers a sink always sets itself: framing, hop-by-hop and the x-ankusa-* namespace.
func owned(name string) bool {
	switch name {
	case "host", "content-length", "content-type", "connection", "keep-alive", "transfer-encoding", "te",
		"trailer", "upgrade", "expect", "proxy-connection":
		return true
	}
	return strings.HasPrefix(name, "x-ankusa-")
}

func listed(name string, allow []string) bool {
	for _, a := range allow {
		if strings.EqualFold(a, name) {
			return true
		}
	}
	return false
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
