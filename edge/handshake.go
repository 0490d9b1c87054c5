package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/verify"
)

// Provider subscription handshakes (docs/providers.md): answered at the edge, never stored, counted in
// ankusa_handshakes_total{source_id,kind,result}, and only after whatever check the provider's handshake
// allows: Slack's and Zoom's are signed like any of their hooks, Meta's carries the verify token; X's CRC
// answer is itself the proof (an HMAC with the consumer secret); Dropbox's and Microsoft Graph's carry
// nothing to check, so they only echo, within bounds.

// maxEcho bounds a value the edge echoes back (a challenge, a validation token): the providers' are tens
// of bytes (Graph's about 200).
const maxEcho = 1024

const (
	handshakeAnswered = "answered"
	handshakeRefused  = "refused"
)

var refuseHandshake = &RefusedError{Status: fasthttp.StatusBadRequest, Reason: "handshake_refused"}

// handshake is a source's handshake responder, built once.
type handshake struct {
	kind string
	// key is the source's signing secret (its newest): zoom's encryptedToken and X's response_token are
	// HMACs with it.
	key []byte
	// token is the SHA-256 of Meta's verify token: compared digest to digest in constant time, so neither
	// content nor length leaks.
	token [sha256.Size]byte
}

// newHandshake builds the responder of a source, nil for none.
func newHandshake(src config.Source) *handshake {
	kind := src.HandshakeKind()
	if kind == "none" || kind == "" {
		return nil
	}
	h := &handshake{kind: kind}
	if len(src.Verify.Secret) > 0 {
		h.key = []byte(src.Verify.Secret[0])
	}
	if len(src.HandshakeToken) > 0 {
		h.token = sha256.Sum256([]byte(src.HandshakeToken[0]))
	}
	return h
}

// echoable reports whether v may be sent back: 1 to maxEcho bytes of printable ASCII, none of them
// < > " ' & or \, so an echo can neither be markup nor break out of a JSON string.
func echoable(v []byte) bool {
	if len(v) == 0 || len(v) > maxEcho {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return false
		}
		switch c {
		case '<', '>', '"', '\'', '&', '\\':
			return false
		}
	}
	return true
}

// answerPlain writes 200 with v as text/plain, never sniffed as anything else.
func answerPlain(ctx *fasthttp.RequestCtx, v []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBody(v)
}

func answerJSON(ctx *fasthttp.RequestCtx, b []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBody(b)
}

func (h *handshake) mac(msg []byte) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write(msg)
	return m.Sum(nil)
}

// handshakeGET answers a GET to a source's route: Meta's, X's and Dropbox's handshakes are GETs. It
// reports false for any other GET, which is answered 404 as before.
func (e *Edge) handshakeGET(ctx *fasthttp.RequestCtx) bool {
	rq := request{ctx: ctx, start: time.Now()}
	if e.resolveSource(&rq) != nil || rq.src.Trust.handshake == nil {
		return false
	}
	h := rq.src.Trust.handshake
	args := ctx.QueryArgs()
	var (
		answer func()
		value  []byte
		ok     = true
	)
	switch h.kind {
	case "meta":
		if !args.Has("hub.mode") {
			return false
		}
		value = args.Peek("hub.challenge")
		got := sha256.Sum256(args.Peek("hub.verify_token"))
		ok = string(args.Peek("hub.mode")) == "subscribe" && subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
		answer = func() { answerPlain(ctx, value) }
	case "twitter":
		if !args.Has("crc_token") {
			return false
		}
		value = args.Peek("crc_token")
		answer = func() {
			b := append([]byte(`{"response_token":"sha256=`), base64.StdEncoding.EncodeToString(h.mac(value))...)
			answerJSON(ctx, append(b, `"}`...))
		}
	case "dropbox":
		if !args.Has("challenge") {
			return false
		}
		value = args.Peek("challenge")
		answer = func() { answerPlain(ctx, value) }
	default:
		return false
	}
	if r := e.preRead(ctx, rq.src, rq.tenant, rq.start); r != nil {
		e.refuseEarly(ctx, r)
		return true
	}
	if !ok || !echoable(value) {
		e.tel.Handshake(rq.src.ID, h.kind, handshakeRefused)
		status := fasthttp.StatusBadRequest
		if !ok {
			status = fasthttp.StatusForbidden
		}
		writeRefusal(ctx, &RefusedError{Status: status, Reason: refuseHandshake.Reason})
		return true
	}
	answer()
	e.tel.Handshake(rq.src.ID, h.kind, handshakeAnswered)
	return true
}

// handshakePOST answers, after the body is read, a POST that is its source's handshake: Slack's
// url_verification and Zoom's endpoint.url_validation once the request's signature verified, Microsoft
// Graph's validationToken. It reports false for any other request, which goes on to be stored.
func (e *Edge) handshakePOST(rq *request) (bool, error) {
	h := rq.src.Trust.handshake
	if h == nil {
		return false, nil
	}
	ctx := rq.ctx
	switch h.kind {
	case "msgraph":
		token := ctx.QueryArgs().Peek("validationToken")
		if !ctx.QueryArgs().Has("validationToken") || len(rq.body) != 0 {
			return false, nil
		}
		// Graph appends validationToken to the notification URL: a token the source checks in that
		// URL (type token, location query) is there too, and is checked first.
		if rq.src.Trust.verifies {
			if err := e.handshakeVerify(rq, h); err != nil {
				return true, err
			}
		}
		if !echoable(token) {
			e.tel.Handshake(rq.src.ID, h.kind, handshakeRefused)
			return true, refuseHandshake
		}
		answerPlain(ctx, token)
	case "slack":
		if typ, _ := jsonField(rq.body, "type"); string(typ) != `"url_verification"` {
			return false, nil
		}
		if err := e.handshakeVerify(rq, h); err != nil {
			return true, err
		}
		challenge, ok := jsonStringValue(jsonFieldOr(rq.body, "challenge"))
		if !ok || !echoable(challenge) {
			e.tel.Handshake(rq.src.ID, h.kind, handshakeRefused)
			return true, refuseHandshake
		}
		answerPlain(ctx, challenge)
	case "zoom":
		if ev, _ := jsonField(rq.body, "event"); string(ev) != `"endpoint.url_validation"` {
			return false, nil
		}
		if err := e.handshakeVerify(rq, h); err != nil {
			return true, err
		}
		payload, _ := jsonField(rq.body, "payload")
		plain, ok := jsonStringValue(jsonFieldOr(payload, "plainToken"))
		if !ok || !echoable(plain) {
			e.tel.Handshake(rq.src.ID, h.kind, handshakeRefused)
			return true, refuseHandshake
		}
		b := append([]byte(`{"plainToken":"`), plain...)
		b = append(b, `","encryptedToken":"`...)
		b = append(b, hex.EncodeToString(h.mac(plain))...)
		answerJSON(ctx, append(b, `"}`...))
	default:
		return false, nil
	}
	e.tel.Handshake(rq.src.ID, h.kind, handshakeAnswered)
	return true, nil
}

// handshakeVerify runs the source's verifier on a signed handshake; a failure is refused as any failed
// verification is (401 with its reason), whatever on_verify_failure says: a handshake is never stored.
func (e *Edge) handshakeVerify(rq *request, h *handshake) error {
	vreq := verify.Request{Body: rq.body, Header: rq.sc.header, Query: rq.sc.query, RawQuery: rq.ctx.URI().QueryString(), Now: rq.start}
	res := rq.src.Trust.Verify(rq.tenant, &vreq)
	if res.Status == verify.StatusOK {
		return nil
	}
	e.tel.VerifyFailed(rq.src.ID, res.Provider, res.Scheme)
	e.tel.Handshake(rq.src.ID, h.kind, handshakeRefused)
	return refuseVerification(res.Reason)
}

// jsonField and jsonStringValue read the handshake bodies without allocating; they are verify's scanner.
var (
	jsonField       = verify.JSONField
	jsonStringValue = verify.JSONStringValue
)

func jsonFieldOr(b []byte, key string) []byte {
	v, _ := jsonField(b, key)
	return v
}
