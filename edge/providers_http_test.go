package edge_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/verify"
	"github.com/ankusa-go/ankusa/verify/verifytest"
)

type providerVector = verifytest.Vector

func providerVectors(t *testing.T) []providerVector {
	t.Helper()
	vs, err := verifytest.Load("../verify/testdata/providers")
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func providerSource(v providerVector, secret string) config.Source {
	spec := verify.Spec{Type: v.Type, PublicURL: v.PublicURL}
	if v.PublicKey != "" {
		spec.PublicKey = verify.Secrets{v.PublicKey}
	} else {
		spec.Secret = verify.Secrets{secret}
	}
	return config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}, Verify: spec}
}

func postQuery(t *testing.T, inst *instance.Instance, path, query string, body []byte, headers ...string) reply {
	t.Helper()
	if query != "" {
		path += "?" + query
	}
	return postBody(t, inst, path, body, headers...)
}

// Every provider preset, through real HTTP to a node: the provider's published example is stored (201)
// when it carries no timestamp, and refused stale (401 timestamp_out_of_window) when it does, in which
// case the same scheme signed now is stored; a tampered body and a wrong secret are refused with their
// reason, and nothing refused is stored.
func TestProviderPresetsOverHTTP(t *testing.T) {
	vecs := providerVectors(t)
	sgKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	inst := start(t, func(c *config.Config) {
		c.HTTP.MaxBodyBytes = 8192
		for _, v := range vecs {
			c.Sources[v.Name] = providerSource(v, v.Secret)
			c.Sources[v.Name+"-wrong"] = providerSource(v, v.Secret+"-rotated-away")
			if strings.HasPrefix(v.Secret, "whsec_") {
				c.Sources[v.Name+"-wrong"] = providerSource(v, "whsec_"+base64.StdEncoding.EncodeToString([]byte("other")))
			}
			if v.Type == "sendgrid" {
				// The example's key verifies the example; the node's own test key verifies what is signed
				// now, and the example's key is the wrong one for it.
				der, _ := x509.MarshalPKIXPublicKey(&sgKey.PublicKey)
				c.Sources[v.Name] = config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}},
					Verify: verify.Spec{Type: "sendgrid", PublicKey: verify.Secrets{base64.StdEncoding.EncodeToString(der)}}}
				c.Sources[v.Name+"-wrong"] = providerSource(v, "")
			}
		}
	}, nil)
	stored := 0
	for _, v := range vecs {
		t.Run(v.Name, func(t *testing.T) {
			path := "/webhooks/" + v.Name
			r := postQuery(t, inst, path, v.Query, []byte(v.Body), v.Headers...)
			if v.Stamped() {
				r.expect(t, 401, "verification_failed")
				if r.body["reason"] != "timestamp_out_of_window" {
					t.Fatalf("published example signed long ago: reason %v", r.body["reason"])
				}
				fresh, hdrs := signNow(t, v, sgKey)
				postQuery(t, inst, path, v.Query, fresh, hdrs...).expect(t, 201, "")
				stored++
				tampered := bytes.Replace(fresh, []byte("e"), []byte("E"), 1)
				if v.Type == "mailgun" {
					// Mailgun signs timestamp + token alone: the token is what a forger would change.
					tampered = bytes.Replace(fresh, []byte(`"token":"a`), []byte(`"token":"b`), 1)
				}
				tr := postQuery(t, inst, path, v.Query, tampered, hdrs...)
				tr.expect(t, 401, "verification_failed")
				if tr.body["reason"] != "no_match" {
					t.Fatalf("tampered body: reason %v", tr.body["reason"])
				}
				w := postQuery(t, inst, path+"-wrong", v.Query, fresh, hdrs...)
				w.expect(t, 401, "verification_failed")
				if w.body["reason"] != "no_match" {
					t.Fatalf("wrong secret: reason %v", w.body["reason"])
				}
				return
			}
			r.expect(t, 201, "")
			stored++
			if v.Type != "gitlab" {
				tampered := []byte(strings.Replace(v.Body, "e", "E", 1))
				tr := postQuery(t, inst, path, v.Query, tampered, v.Headers...)
				tr.expect(t, 401, "verification_failed")
				if tr.body["reason"] != "no_match" {
					t.Fatalf("tampered body: reason %v", tr.body["reason"])
				}
			}
			w := postQuery(t, inst, path+"-wrong", v.Query, []byte(v.Body), v.Headers...)
			w.expect(t, 401, "verification_failed")
			if w.body["reason"] != "no_match" {
				t.Fatalf("wrong secret: reason %v", w.body["reason"])
			}
		})
	}
	hs := hooks(t, inst)
	if len(hs) != stored {
		t.Fatalf("%d hooks stored, want the %d accepted", len(hs), stored)
	}
	for _, h := range hs {
		for _, hd := range h.Headers {
			if hd.Name == "x-gitlab-token" {
				t.Fatal("the GitLab token was stored")
			}
		}
	}
}

func hmacHex256(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// signNow signs a timestamped provider's example body again at the current time, computed here from the
// provider's documented algorithm (independently of package verify).
func signNow(t *testing.T, v providerVector, sgKey *ecdsa.PrivateKey) ([]byte, []string) {
	t.Helper()
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	body := v.Body
	switch v.Type {
	case "zoom":
		return []byte(body), []string{"x-zm-request-timestamp", ts, "x-zm-signature", "v0=" + hmacHex256(v.Secret, "v0:"+ts+":"+body)}
	case "paddle":
		return []byte(body), []string{"Paddle-Signature", "ts=" + ts + ";h1=" + hmacHex256(v.Secret, ts+":"+body)}
	case "linear":
		body = strings.Replace(body, `"webhookTimestamp":1750000000000`, `"webhookTimestamp":`+strconv.FormatInt(now.UnixMilli(), 10), 1)
		return []byte(body), []string{"Linear-Signature", hmacHex256(v.Secret, body)}
	case "mailgun":
		tok := "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
		body = `{"signature":{"timestamp":"` + ts + `","token":"` + tok + `","signature":"` + hmacHex256(v.Secret, ts+tok) + `"},"event-data":{"event":"delivered","id":"fresh"}}`
		return []byte(body), nil
	case "svix":
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(v.Secret, "whsec_"))
		m := hmac.New(sha256.New, key)
		m.Write([]byte("msg_fresh." + ts + "." + body))
		return []byte(body), []string{"svix-id", "msg_fresh", "svix-timestamp", ts, "svix-signature", "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}
	case "sendgrid":
		d := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, sgKey, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return []byte(body), []string{"X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig), "X-Twilio-Email-Event-Webhook-Timestamp", ts}
	}
	t.Fatalf("no signer for stamped example %s", v.Name)
	return nil, nil
}
