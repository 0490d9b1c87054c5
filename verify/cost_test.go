package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cost a forged request may impose (issue: verifier CPU amplification): a malformed header or a stale
// timestamp is refused before anything is hashed, an HMAC hashes the signed content once per key whatever
// the number of signatures offered, and Ed25519 makes at most MaxSignatureChecks checks.

func swToken(prefix string, sig []byte) string {
	return prefix + base64.StdEncoding.EncodeToString(sig)
}

// A signature header that holds a signature of the scheme that does not decode, or more than
// MaxCandidates of them, is malformed as a whole, even next to a valid one: nothing is hashed.
func TestMalformedSignatureHeaderRefusedBeforeHashing(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := strings.Repeat("b", 4096)
	key := []byte("standard-webhooks-key")
	spec := Spec{Type: "standard_webhooks", Secret: Secrets{"whsec_" + base64.StdEncoding.EncodeToString(key)}}
	good := "v1," + hmacB64(key, "msg_1."+ts+"."+body)
	v := mustNew(t, spec)
	f := func(name, sigHeader string, want error) {
		t.Helper()
		res := v.Verify(request(body, headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": sigHeader}, now))
		if !errors.Is(res.Reason, want) || (want != nil && res.HashedBytes != 0) {
			t.Errorf("%s: reason %v, hashed %d bytes; want %v and nothing hashed", name, res.Reason, res.HashedBytes, want)
		}
	}
	f("valid", good, nil)
	f("valid next to undecodable", good+" v1,@@@@", ErrMalformedSignature)
	f("valid next to wrong length", good+" v1,"+base64.StdEncoding.EncodeToString([]byte("short")), ErrMalformedSignature)
	f("other versions are ignored", good+" v2,whatever v1a,x", nil)
	many := strings.TrimSpace(strings.Repeat(good+" ", MaxCandidates+1))
	f("more than MaxCandidates", many, ErrMalformedSignature)
	f("exactly MaxCandidates", strings.TrimSpace(strings.Repeat(good+" ", MaxCandidates)), nil)

	res := v.Verify(request(body, headers{"webhook-id": "msg_1", "webhook-timestamp": "1000000000", "webhook-signature": good}, now))
	if res.Reason != ErrTimestampOutOfWindow || res.HashedBytes != 0 {
		t.Errorf("stale timestamp: reason %v, hashed %d; want refused before hashing", res.Reason, res.HashedBytes)
	}
}

// An HMAC is keyed, so each key hashes the signed content once; the offered signatures are compared with
// those sums, so eight forged signatures cost what one does.
func TestHMACHashesOncePerKeyWhateverTheCandidates(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := strings.Repeat("b", 10_000)
	var secrets Secrets
	for i := range MaxSecrets {
		secrets = append(secrets, "whsec_"+base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("k%d", i))))
	}
	v := mustNew(t, Spec{Type: "standard_webhooks", Secret: secrets})
	forged := strings.TrimSpace(strings.Repeat(swToken("v1,", make([]byte, 32))+" ", MaxCandidates))
	res := v.Verify(request(body, headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": forged}, now))
	signed := len("msg_1." + ts + "." + body)
	if res.Reason != ErrNoMatch || res.HashedBytes != int64(MaxSecrets*signed) {
		t.Fatalf("reason %v, hashed %d; want no_match after %d bytes (one pass per key)", res.Reason, res.HashedBytes, MaxSecrets*signed)
	}
}

// Pure Ed25519 hashes the message once per (signature, key) pair; a request gets MaxSignatureChecks of
// them, signatures in the order offered, each against every key. A sender's signature beyond the cap is
// not tried: the limit is documented in docs/security.md.
func TestEd25519ChecksCappedPerRequest(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := strings.Repeat("b", 10_000)
	msg := "msg_1." + ts + "." + body
	var privs []ed25519.PrivateKey
	var pubs Secrets
	for i := range MaxSecrets {
		p := edKey(fmt.Sprintf("cap-%d", i))
		privs = append(privs, p)
		pubs = append(pubs, base64.StdEncoding.EncodeToString(p.Public().(ed25519.PublicKey)))
	}
	forged := swToken("v1a,", ed25519.Sign(edKey("forger"), []byte(msg)))
	valid := swToken("v1a,", ed25519.Sign(privs[MaxSecrets-1], []byte(msg)))
	hdr := func(sig string) headers {
		return headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": sig}
	}

	eight := mustNew(t, Spec{Type: "ed25519", PublicKey: pubs})
	res := eight.Verify(request(body, hdr(strings.TrimSpace(strings.Repeat(forged+" ", MaxCandidates))), now))
	if want := int64(MaxSignatureChecks * (len(msg) + 64)); res.Reason != ErrNoMatch || res.HashedBytes != want {
		t.Fatalf("8 forged x 8 keys: reason %v, hashed %d; want no_match after %d bytes (%d checks)",
			res.Reason, res.HashedBytes, want, MaxSignatureChecks)
	}
	// The first signature spends the 8 checks against the 8 keys; the valid second one is never tried.
	if res := eight.Verify(request(body, hdr(forged+" "+valid), now)); res.Reason != ErrNoMatch {
		t.Fatalf("a signature past the check cap was tried: %v", res.Reason)
	}
	// With two keys, four signatures fit the cap: the sender's fourth signature still verifies.
	two := mustNew(t, Spec{Type: "ed25519", PublicKey: pubs[MaxSecrets-2:]})
	if res := two.Verify(request(body, hdr(strings.Join([]string{forged, forged, forged, valid}, " ")), now)); res.Status != StatusOK {
		t.Fatalf("4 signatures x 2 keys: %v", res.Reason)
	}
}
