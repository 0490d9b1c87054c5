package edge_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/verify"
	"github.com/ankusa-go/ankusa/verify/verifytest"
)

type handshakeReply struct {
	status               int
	contentType, nosniff string
	body                 string
}

func doHandshake(t *testing.T, inst *instance.Instance, method, path, query, body string, headers ...string) handshakeReply {
	t.Helper()
	u := "http://" + inst.IngestAddr() + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return handshakeReply{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"), string(b)}
}

func (r handshakeReply) want(t *testing.T, status int, body string) {
	t.Helper()
	if r.status != status || (body != "" && r.body != body) {
		t.Fatalf("answer %d %q, want %d %q", r.status, r.body, status, body)
	}
	if status == 200 && r.nosniff != "nosniff" {
		t.Fatal("a handshake answer without X-Content-Type-Options: nosniff")
	}
}

// refused checks a refusal and the reason it names (the error, or a verification failure's reason).
func (r handshakeReply) refused(t *testing.T, status int, reason string) {
	t.Helper()
	if r.status != status || !strings.Contains(r.body, `"`+reason+`"`) {
		t.Fatalf("answer %d %q, want %d naming %s", r.status, r.body, status, reason)
	}
}

func handshakeCount(t *testing.T, inst *instance.Instance, source, kind, result string) float64 {
	t.Helper()
	fams, err := inst.Telemetry().Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "ankusa_handshakes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["source_id"] == source && l["kind"] == kind && l["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hmacSum(key, msg string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Every provider handshake through real HTTP to a node, from the example its provider documents
// (testdata/handshakes names each source): answered only after the check the provider allows (Slack's
// and Zoom's signature, Meta's verify token), refused when it fails, hostile echoes refused; a GET that is
// no handshake is still 404; and no handshake, answered or refused, stores a hook.
func TestHandshakesAnsweredAndNeverStored(t *testing.T) {
	vs, err := verifytest.Load("testdata/handshakes")
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]verifytest.Vector{}
	for _, x := range vs {
		v[x.Name] = x
	}
	src := func(spec verify.Spec, handshake string) config.Source {
		return config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}, Verify: spec, Handshake: handshake}
	}
	inst := start(t, func(c *config.Config) {
		c.Sources["slack"] = src(verify.Spec{Type: "slack", Secret: verify.Secrets{v["slack"].Secret}}, "")
		c.Sources["zoom"] = src(verify.Spec{Type: "zoom", Secret: verify.Secrets{v["zoom"].Secret}}, "")
		c.Sources["twitter"] = src(verify.Spec{Type: "twitter", Secret: verify.Secrets{v["twitter"].Secret}}, "")
		meta := src(verify.Spec{Type: "meta", Secret: verify.Secrets{"meta-app-secret"}}, "meta")
		meta.HandshakeToken = verify.Secrets{v["meta"].Secret}
		c.Sources["meta"] = meta
		c.Sources["dropbox"] = src(verify.Spec{Type: "dropbox", Secret: verify.Secrets{"dropbox-app-secret"}}, "dropbox")
		c.Sources["msgraph"] = src(verify.Spec{}, "msgraph")
		c.Sources["msgraph-token"] = src(verify.Spec{Type: "token", Location: "query", Name: "token", Secret: verify.Secrets{"graph-url-token"}}, "msgraph")
		c.Sources["plain"] = src(verify.Spec{Type: "github", Secret: verify.Secrets{"k"}}, "")
	}, nil)

	slackSign := func(body string, ts int64) []string {
		t := strconv.FormatInt(ts, 10)
		return []string{"X-Slack-Request-Timestamp", t, "X-Slack-Signature", "v0=" + hex.EncodeToString(hmacSum(v["slack"].Secret, "v0:"+t+":"+body))}
	}
	zoomSign := func(body string, ts int64) []string {
		t := strconv.FormatInt(ts, 10)
		return []string{"x-zm-request-timestamp", t, "x-zm-signature", "v0=" + hex.EncodeToString(hmacSum(v["zoom"].Secret, "v0:"+t+":"+body))}
	}
	now := time.Now().Unix()

	t.Run("slack url_verification", func(t *testing.T) {
		b := v["slack"].Body
		r := doHandshake(t, inst, "POST", "/webhooks/slack", "", b, slackSign(b, now)...)
		r.want(t, 200, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
		if !strings.HasPrefix(r.contentType, "text/plain") {
			t.Fatalf("content type %q", r.contentType)
		}
		doHandshake(t, inst, "POST", "/webhooks/slack", "", b).refused(t, 401, "missing_signature")
		doHandshake(t, inst, "POST", "/webhooks/slack", "", b, slackSign(b+" ", now)...).refused(t, 401, "no_match")
		doHandshake(t, inst, "POST", "/webhooks/slack", "", b, slackSign(b, now-3600)...).refused(t, 401, "timestamp_out_of_window")
		hostile := strings.Replace(b, "3eZbrw1a", "<script>", 1)
		doHandshake(t, inst, "POST", "/webhooks/slack", "", hostile, slackSign(hostile, now)...).refused(t, 400, "handshake_refused")
	})
	t.Run("zoom endpoint.url_validation", func(t *testing.T) {
		b := v["zoom"].Body
		want := `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + hex.EncodeToString(hmacSum(v["zoom"].Secret, "qgg8vlvZRS6UYooatFL8Aw")) + `"}`
		doHandshake(t, inst, "POST", "/webhooks/zoom", "", b, zoomSign(b, now)...).want(t, 200, want)
		doHandshake(t, inst, "POST", "/webhooks/zoom", "", b, zoomSign(b+"x", now)...).refused(t, 401, "no_match")
	})
	t.Run("x crc", func(t *testing.T) {
		crc := "NjE4NzY5MjM4Mjk1MjQ1NTY2OTQ0NDMx"
		want := `{"response_token":"sha256=` + base64.StdEncoding.EncodeToString(hmacSum(v["twitter"].Secret, crc)) + `"}`
		doHandshake(t, inst, "GET", "/webhooks/twitter", v["twitter"].Query, "").want(t, 200, want)
		doHandshake(t, inst, "GET", "/webhooks/twitter", "crc_token="+url.QueryEscape(strings.Repeat("a", 2000)), "").refused(t, 400, "handshake_refused")
	})
	t.Run("meta verification request", func(t *testing.T) {
		doHandshake(t, inst, "GET", "/webhooks/meta", v["meta"].Query, "").want(t, 200, "1158201444")
		doHandshake(t, inst, "GET", "/webhooks/meta", strings.Replace(v["meta"].Query, "meatyhamhock", "meatyhamhocK", 1), "").refused(t, 403, "handshake_refused")
		doHandshake(t, inst, "GET", "/webhooks/meta", strings.Replace(v["meta"].Query, "subscribe", "unsubscribe", 1), "").want(t, 403, "")
	})
	t.Run("dropbox challenge", func(t *testing.T) {
		r := doHandshake(t, inst, "GET", "/webhooks/dropbox", v["dropbox"].Query, "")
		r.want(t, 200, "PBsvP2i5n7SJjwUDZ8ybW1bB6ZdzFzCf")
		if !strings.HasPrefix(r.contentType, "text/plain") {
			t.Fatalf("content type %q", r.contentType)
		}
		doHandshake(t, inst, "GET", "/webhooks/dropbox", "challenge=%3Cimg+src%3Dx%3E", "").refused(t, 400, "handshake_refused")
	})
	t.Run("msgraph validationToken", func(t *testing.T) {
		want, _ := url.QueryUnescape(strings.TrimPrefix(v["msgraph"].Query, "validationToken="))
		doHandshake(t, inst, "POST", "/webhooks/msgraph", v["msgraph"].Query, "", "Content-Type", "text/plain").want(t, 200, want)
		doHandshake(t, inst, "POST", "/webhooks/msgraph", "validationToken=%22%3E%3Cscript%3E", "").want(t, 400, "")
		// A source that checks a URL token checks it on the validation request too.
		doHandshake(t, inst, "POST", "/webhooks/msgraph-token", "token=graph-url-token&"+v["msgraph"].Query, "").want(t, 200, want)
		doHandshake(t, inst, "POST", "/webhooks/msgraph-token", "token=forged&"+v["msgraph"].Query, "").refused(t, 401, "no_match")
		doHandshake(t, inst, "POST", "/webhooks/msgraph-token", v["msgraph"].Query, "").want(t, 401, "")
	})
	t.Run("other GETs stay 404", func(t *testing.T) {
		doHandshake(t, inst, "GET", "/webhooks/plain", "challenge=x", "").want(t, 404, "")
		doHandshake(t, inst, "GET", "/webhooks/meta", "", "").want(t, 404, "")
		doHandshake(t, inst, "GET", "/webhooks/slack", "", "").want(t, 404, "")
		doHandshake(t, inst, "GET", "/webhooks/dropbox", "crc_token=x", "").want(t, 404, "")
	})

	if n := len(hooks(t, inst)); n != 0 {
		t.Fatalf("%d hooks stored by handshakes", n)
	}
	for _, c := range []struct {
		kind              string
		answered, refused float64
	}{{"slack", 1, 4}, {"zoom", 1, 1}, {"twitter", 1, 1}, {"meta", 1, 2}, {"dropbox", 1, 1}, {"msgraph", 1, 1}} {
		a := handshakeCount(t, inst, c.kind, c.kind, "answered")
		r := handshakeCount(t, inst, c.kind, c.kind, "refused")
		if a != c.answered || r != c.refused {
			t.Errorf("ankusa_handshakes_total{%s}: answered %v refused %v, want %v and %v", c.kind, a, r, c.answered, c.refused)
		}
	}
	// A signed Slack event that is no handshake is stored as usual.
	ev := `{"type":"event_callback","event":{"type":"app_mention"}}`
	doHandshake(t, inst, "POST", "/webhooks/slack", "", ev, slackSign(ev, now)...).want(t, 201, "")
}
