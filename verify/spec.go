package verify

import (
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits and defaults of a Spec.
const (
	// MaxSecrets bounds a rotation list (secret: [new, old], public_key: [...]): every entry is tried on
	// every request, so the list is short by design.
	MaxSecrets = 8
	// MaxSignatureChecks bounds the Ed25519 (signature, public key) checks of one request: each offered
	// signature, in order, against every key, until this many were made. One signature against a full
	// rotation list fits; 8 forged signatures against 8 keys no longer cost 64 checks over the body.
	MaxSignatureChecks = 8
	// DefaultToleranceSeconds is the replay window of timestamped schemes when tolerance_seconds is unset.
	DefaultToleranceSeconds = 300
	// MaxWeakToleranceSeconds caps the replay window of SHA-1 schemes: a weak hash gets a short window.
	MaxWeakToleranceSeconds = 3600
	// MaxToleranceSeconds bounds tolerance_seconds of every scheme: a replay window of more than a day is
	// no window (a replayed request is then caught only by a dedupe key, whose default ttl is 72 h).
	MaxToleranceSeconds = 86_400
	// maxSignedHeaders bounds the {header:NAME} placeholders of one template, so their values fit a
	// fixed array on the request path.
	maxSignedHeaders = 8
)

// Spec is the YAML shape of `sources.<id>.verify`. The zero Spec (no verify block) is type none.
type Spec struct {
	// Type is none, a preset (Presets), hmac, ed25519, token or client_cert.
	Type string `yaml:"type"`
	// Secret is one secret or a rotation list (newest first, at most 8, each non-empty).
	Secret Secrets `yaml:"secret" config:"secret"`
	// ToleranceSeconds is the replay window of timestamped schemes: default 300, at most 3600 for SHA-1.
	ToleranceSeconds int `yaml:"tolerance_seconds"`

	// The fields of an inline scheme (type: hmac); see inventory C.2.
	SignatureHeader string `yaml:"signature_header"` // required
	Parse           string `yaml:"parse"`            // whole (default) | csv_pairs | space_versions
	SigPrefix       string `yaml:"sig_prefix"`       // whole: the value starts with it ("sha256=")
	SigKey          string `yaml:"sig_key"`          // csv_pairs: the key of the signature pairs ("v1")
	Version         string `yaml:"version"`          // space_versions: tokens read "<version>,<sig>"
	Signed          string `yaml:"signed"`           // template over {body} {ts} {header:NAME}; default {body}
	Hash            string `yaml:"hash"`             // sha256 (default) | sha512 | sha1
	Encoding        string `yaml:"encoding"`         // hex (default) | base64
	SecretDecode    string `yaml:"secret_decode"`    // raw (default) | whsec_base64
	TimestampHeader string `yaml:"timestamp_header"` // the header that holds the timestamp
	TimestampField  string `yaml:"timestamp_field"`  // csv_pairs: the key of the timestamp pair ("t")

	// PublicKey is the ed25519 public key or rotation list: base64 of 32 bytes, optionally "whpk_" prefixed;
	// for sendgrid, the base64 (or PEM) of the P-256 verification key SendGrid shows.
	PublicKey Secrets `yaml:"public_key"`

	// PublicURL is the URL the provider posts to, as configured at the provider, without a query string
	// (twilio appends the request's own): twilio and square sign it, and behind a proxy the node cannot
	// know it.
	PublicURL string `yaml:"public_url"`

	// pairSep separates csv_pairs (',' when zero); paddle's header is "ts=..;h1=..".
	pairSep byte
	// urlPrefix: the signed content starts with PublicURL (square).
	urlPrefix bool

	// Token location: bearer (default) | basic | header | query.
	Location string `yaml:"location"`
	Name     string `yaml:"name"`     // header or query parameter name (header, query)
	Username string `yaml:"username"` // basic; Secret holds the password

	// Pins of a client_cert source: "sha256:<hex>" of the DER certificate or "spki-sha256:<hex>" of its
	// SubjectPublicKeyInfo.
	Pins []string `yaml:"pins"`
}

// Secrets is a secret or a rotation list. YAML accepts a scalar or a list of scalars. It prints as
// [REDACTED] under every fmt verb, so a Spec can be logged without leaking a key.
type Secrets []string

// UnmarshalYAML accepts `secret: s` and `secret: [new, old]`. A scalar is taken as written, so a secret
// that happens to look like a number keeps its digits; a null entry becomes "" and is refused by Validate
// with its index, as the design asks for an empty rotation entry (`${OLD:-}`).
func (s *Secrets) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			*s = nil
			return nil
		}
		*s = Secrets{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(Secrets, len(n.Content))
		for i, c := range n.Content {
			if c.Kind == yaml.AliasNode && c.Alias != nil {
				c = c.Alias
			}
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("verify: line %d: entry %d must be a string", c.Line, i)
			}
			if c.ShortTag() != "!!null" {
				out[i] = c.Value
			}
		}
		*s = out
		return nil
	}
	return fmt.Errorf("verify: line %d: must be a string or a list of strings", n.Line)
}

// redactedSecrets is what every printing or marshalling of Secrets yields.
const redactedSecrets = "[REDACTED]"

// Format prints [REDACTED] whatever the verb: a secret never reaches a log line through fmt.
func (s Secrets) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, redactedSecrets)
}

// String and GoString cover what does not go through fmt's verbs (a Stringer called directly).
func (s Secrets) String() string { return redactedSecrets }

// GoString is what %#v would print, were Format not there.
func (s Secrets) GoString() string { return redactedSecrets }

// MarshalJSON keeps secrets out of JSON: encoding/json, and zerolog's Interface, which marshals with it.
func (s Secrets) MarshalJSON() ([]byte, error) { return []byte(`"` + redactedSecrets + `"`), nil }

// MarshalText keeps secrets out of text encoders (encoding/xml, a JSON map key, slog's text handler).
func (s Secrets) MarshalText() ([]byte, error) { return []byte(redactedSecrets), nil }

// MarshalYAML keeps secrets out of a re-marshalled Spec: only UnmarshalYAML reads the real values.
func (s Secrets) MarshalYAML() (any, error) { return redactedSecrets, nil }

// Validate reports every problem of the spec, with field paths relative to the verify block. It decodes
// secrets and keys as New would, so a boot that validated cannot fail in New.
func (s *Spec) Validate() []Problem {
	_, ps := build(*s)
	return ps
}

// New builds the verifier a spec describes. Secrets and keys are decoded here, once; an invalid spec is
// a *SpecError (errors.Is ErrBadSecret when a key cannot be decoded, ErrBadScheme otherwise).
func New(s Spec) (Verifier, error) {
	v, ps := build(s)
	if len(ps) > 0 {
		return nil, &SpecError{Problems: ps}
	}
	return v, nil
}

// ForKeys returns the spec with its keys replaced by keys: the public keys of an ed25519 spec, the secret
// of any other. A shared source's per-tenant secrets are built with it.
func (s Spec) ForKeys(keys Secrets) Spec {
	if s.Type == "ed25519" || s.Type == "sendgrid" {
		s.PublicKey = keys
	} else {
		s.Secret = keys
	}
	return s
}

// CredentialHeaders lists the lowercased headers a token verifier reads its credential from: the edge
// drops them from what it stores, whatever the store_headers policy. Other types read no credential header.
func (s Spec) CredentialHeaders() []string {
	if s.Type == "gitlab" {
		return []string{"x-gitlab-token"}
	}
	if s.Type != "token" {
		return nil
	}
	switch s.Location {
	case "", "bearer", "basic":
		return []string{"authorization"}
	case "header":
		if s.Name != "" {
			return []string{strings.ToLower(s.Name)}
		}
	}
	return nil
}

// Presets lists the provider presets, in documentation order.
var Presets = []string{"stripe", "github", "shopify", "slack", "standard_webhooks", "svix", "zoom", "paddle",
	"linear", "intercom", "typeform", "pagerduty", "square", "meta", "dropbox", "twitter", "twilio", "mailgun",
	"sendgrid", "gitlab"}

// preset returns the inline scheme of an HMAC-engine preset (inventory C.2 and docs/providers.md), so one
// engine runs all. twilio, mailgun, sendgrid and gitlab are built by their own verifiers (bespoke).
func preset(typ string) (Spec, bool) {
	switch typ {
	case "stripe":
		return Spec{SignatureHeader: "Stripe-Signature", Parse: "csv_pairs", SigKey: "v1",
			TimestampField: "t", Signed: "{ts}.{body}", Hash: "sha256", Encoding: "hex", SecretDecode: "raw"}, true
	case "github", "meta":
		// Meta (Facebook, Instagram, WhatsApp) signs with the app secret exactly as GitHub does.
		return Spec{SignatureHeader: "X-Hub-Signature-256", Parse: "whole", SigPrefix: "sha256=",
			Signed: "{body}", Hash: "sha256", Encoding: "hex", SecretDecode: "raw"}, true
	case "shopify":
		return Spec{SignatureHeader: "X-Shopify-Hmac-SHA256", Parse: "whole",
			Signed: "{body}", Hash: "sha256", Encoding: "base64", SecretDecode: "raw"}, true
	case "slack":
		return Spec{SignatureHeader: "X-Slack-Signature", Parse: "whole", SigPrefix: "v0=",
			TimestampHeader: "X-Slack-Request-Timestamp", Signed: "v0:{ts}:{body}", Hash: "sha256",
			Encoding: "hex", SecretDecode: "raw"}, true
	case "standard_webhooks":
		return Spec{SignatureHeader: "webhook-signature", Parse: "space_versions", Version: "v1",
			TimestampHeader: "webhook-timestamp", Signed: "{header:webhook-id}.{ts}.{body}", Hash: "sha256",
			Encoding: "base64", SecretDecode: "whsec_base64"}, true
	case "svix":
		// Standard Webhooks under Svix's header names (svix-id, svix-timestamp, svix-signature).
		return Spec{SignatureHeader: "svix-signature", Parse: "space_versions", Version: "v1",
			TimestampHeader: "svix-timestamp", Signed: "{header:svix-id}.{ts}.{body}", Hash: "sha256",
			Encoding: "base64", SecretDecode: "whsec_base64"}, true
	case "zoom":
		return Spec{SignatureHeader: "x-zm-signature", Parse: "whole", SigPrefix: "v0=",
			TimestampHeader: "x-zm-request-timestamp", Signed: "v0:{ts}:{body}", Hash: "sha256",
			Encoding: "hex", SecretDecode: "raw"}, true
	case "paddle":
		return Spec{SignatureHeader: "Paddle-Signature", Parse: "csv_pairs", SigKey: "h1", pairSep: ';',
			TimestampField: "ts", Signed: "{ts}:{body}", Hash: "sha256", Encoding: "hex", SecretDecode: "raw"}, true
	case "linear":
		// The timestamp (webhookTimestamp, ms) is inside the signed body: linearVerifier checks it.
		return Spec{SignatureHeader: "Linear-Signature", Parse: "whole", Signed: "{body}", Hash: "sha256",
			Encoding: "hex", SecretDecode: "raw"}, true
	case "intercom":
		return Spec{SignatureHeader: "X-Hub-Signature", Parse: "whole", SigPrefix: "sha1=", Signed: "{body}",
			Hash: "sha1", Encoding: "hex", SecretDecode: "raw"}, true
	case "typeform":
		return Spec{SignatureHeader: "Typeform-Signature", Parse: "whole", SigPrefix: "sha256=",
			Signed: "{body}", Hash: "sha256", Encoding: "base64", SecretDecode: "raw"}, true
	case "pagerduty":
		return Spec{SignatureHeader: "X-PagerDuty-Signature", Parse: "csv_pairs", SigKey: "v1",
			Signed: "{body}", Hash: "sha256", Encoding: "hex", SecretDecode: "raw"}, true
	case "square":
		return Spec{SignatureHeader: "x-square-hmacsha256-signature", Parse: "whole", Signed: "{body}",
			urlPrefix: true, Hash: "sha256", Encoding: "base64", SecretDecode: "raw"}, true
	case "dropbox":
		return Spec{SignatureHeader: "X-Dropbox-Signature", Parse: "whole", Signed: "{body}", Hash: "sha256",
			Encoding: "hex", SecretDecode: "raw"}, true
	case "twitter":
		return Spec{SignatureHeader: "X-Twitter-Webhooks-Signature", Parse: "whole", SigPrefix: "sha256=",
			Signed: "{body}", Hash: "sha256", Encoding: "base64", SecretDecode: "raw"}, true
	}
	return Spec{}, false
}

// bespoke names the presets with a verifier of their own.
func bespoke(typ string) bool {
	switch typ {
	case "twilio", "mailgun", "sendgrid", "gitlab":
		return true
	}
	return false
}

// problems collects Problems; the helpers keep build readable.
type problems []Problem

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...), kind: ErrBadScheme})
}

func (ps *problems) addSecret(field, msg string) {
	*ps = append(*ps, Problem{Field: field, Msg: msg, kind: ErrBadSecret})
}

// setFields names the non-zero fields of s (by YAML key), in declaration order.
func setFields(s *Spec) []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(len(s.Secret) > 0, "secret")
	add(s.ToleranceSeconds != 0, "tolerance_seconds")
	add(s.SignatureHeader != "", "signature_header")
	add(s.Parse != "", "parse")
	add(s.SigPrefix != "", "sig_prefix")
	add(s.SigKey != "", "sig_key")
	add(s.Version != "", "version")
	add(s.Signed != "", "signed")
	add(s.Hash != "", "hash")
	add(s.Encoding != "", "encoding")
	add(s.SecretDecode != "", "secret_decode")
	add(s.TimestampHeader != "", "timestamp_header")
	add(s.TimestampField != "", "timestamp_field")
	add(len(s.PublicKey) > 0, "public_key")
	add(s.Location != "", "location")
	add(s.Name != "", "name")
	add(s.Username != "", "username")
	add(len(s.Pins) > 0, "pins")
	add(s.PublicURL != "", "public_url")
	return out
}

var inlineFields = []string{"secret", "tolerance_seconds", "signature_header", "parse", "sig_prefix",
	"sig_key", "version", "signed", "hash", "encoding", "secret_decode", "timestamp_header", "timestamp_field"}

// allowedFields lists the keys each type reads; any other key set is a problem, not silently ignored.
func allowedFields(typ string) []string {
	switch typ {
	case "", "none":
		return nil
	case "hmac":
		return inlineFields
	case "ed25519":
		return []string{"public_key", "tolerance_seconds"}
	case "token":
		return []string{"secret", "location", "name", "username"}
	case "client_cert":
		return []string{"pins"}
	case "square":
		return []string{"secret", "public_url"}
	case "twilio":
		return []string{"secret", "public_url"}
	case "sendgrid":
		return []string{"public_key", "tolerance_seconds"}
	case "gitlab":
		return []string{"secret"}
	}
	return []string{"secret", "tolerance_seconds"} // the presets
}

// build validates s and, when it holds no problem, returns its verifier.
func build(s Spec) (Verifier, []Problem) {
	var ps problems
	known := s.Type == "" || s.Type == "none" || s.Type == "hmac" || s.Type == "ed25519" ||
		s.Type == "token" || s.Type == "client_cert"
	if _, ok := preset(s.Type); ok || bespoke(s.Type) {
		known = true
	}
	if !known {
		ps.add("type", "unknown verifier type %q (none|hmac|ed25519|token|client_cert|%s)", s.Type, strings.Join(Presets, "|"))
		return nil, ps
	}
	allowed := allowedFields(s.Type)
	for _, f := range setFields(&s) {
		ok := false
		for _, a := range allowed {
			ok = ok || a == f
		}
		if !ok {
			typ := s.Type
			if typ == "" {
				typ = "none"
			}
			ps.add(f, "not used by type %s", typ)
		}
	}
	if s.ToleranceSeconds < 0 || s.ToleranceSeconds > MaxToleranceSeconds {
		ps.add("tolerance_seconds", "must be 0 (the default, %d) to %d, got %d", DefaultToleranceSeconds, MaxToleranceSeconds, s.ToleranceSeconds)
	}

	var v Verifier
	switch s.Type {
	case "", "none":
		v = noneVerifier{}
	case "hmac":
		v = buildHMAC(&ps, "hmac", s)
	case "ed25519":
		v = buildEd25519(&ps, s)
	case "token":
		v = buildToken(&ps, s)
	case "client_cert":
		v = buildClientCert(&ps, s)
	case "twilio":
		v = buildTwilio(&ps, s)
	case "mailgun":
		v = buildMailgun(&ps, s)
	case "sendgrid":
		v = buildSendGrid(&ps, s)
	case "gitlab":
		v = buildToken(&ps, Spec{Location: "header", Name: "X-Gitlab-Token", Secret: s.Secret})
		if tv, ok := v.(*tokenVerifier); ok {
			tv.provider, tv.label = "gitlab", "gitlab"
		}
	default:
		p, _ := preset(s.Type)
		p.Secret, p.ToleranceSeconds, p.PublicURL = s.Secret, s.ToleranceSeconds, s.PublicURL
		if s.Type == "linear" && s.ToleranceSeconds == 0 {
			p.ToleranceSeconds = linearToleranceSeconds
		}
		if p.urlPrefix {
			checkPublicURL(&ps, s.PublicURL, false)
		}
		v = buildHMAC(&ps, s.Type, p)
		if s.Type == "linear" && v != nil {
			v = &linearVerifier{hmac: v.(*hmacVerifier), tolerance: tolerance(p.ToleranceSeconds, false)}
		}
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return v, nil
}

// checkPublicURL validates public_url: an absolute http(s) URL; twilio's carries no query string, since
// the request's own is appended.
func checkPublicURL(ps *problems, u string, noQuery bool) {
	switch {
	case u == "":
		ps.add("public_url", "required: the URL the provider posts to, as configured at the provider")
	case !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://"):
		ps.add("public_url", "must be an absolute http:// or https:// URL")
	case strings.ContainsAny(u, " \t\r\n#"):
		ps.add("public_url", "must not contain whitespace or a fragment")
	case noQuery && strings.Contains(u, "?"):
		ps.add("public_url", "must not carry a query string: the request's own is appended, as the provider signs it")
	}
}

// checkList reports an empty, over-long or holed rotation list. field names the key ("secret").
func checkList(ps *problems, field string, list Secrets) {
	switch {
	case len(list) == 0:
		ps.addSecret(field, "required")
	case len(list) > MaxSecrets:
		ps.addSecret(field, fmt.Sprintf("at most %d entries, got %d", MaxSecrets, len(list)))
	}
	for i, e := range list {
		if e == "" {
			ps.addSecret(entryField(field, i, len(list)), "must not be empty")
		}
	}
}

// entryField is "secret" for a single secret and "secret[i]" inside a list.
func entryField(field string, i, n int) string {
	if n == 1 {
		return field
	}
	return fmt.Sprintf("%s[%d]", field, i)
}

// tolerance applies the default and, for SHA-1, the one-hour cap.
func tolerance(seconds int, weak bool) int64 {
	t := int64(seconds)
	if t == 0 {
		t = DefaultToleranceSeconds
	}
	if weak && t > MaxWeakToleranceSeconds {
		t = MaxWeakToleranceSeconds
	}
	return t
}
