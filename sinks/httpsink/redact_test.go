package httpsink

import (
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// Issue 8 item 10: a delivery error names the target without the token in its path (the rule of
// config.RedactURL), and without any path under secret_path.
func TestDeliveryErrorHidesPathSecrets(t *testing.T) {
	base := strings.TrimSuffix(closedURL(t), "/hooks")
	for _, c := range []struct {
		opts   map[string]any
		secret string
	}{
		{map[string]any{"url": base + "/services/T0001/B0001/xoxbS3cr3tT0k3nAbCdEf0123"}, "xoxbS3cr3tT0k3nAbCdEf0123"},
		{map[string]any{"url": base + "/hooks/catch/123/abc1234/", "secret_path": true}, "abc1234"},
	} {
		err := deliver(t, newSink(t, c.opts), sinktest.Envelope([]byte("x")))
		if err == nil {
			t.Fatal("delivery to a closed port succeeded")
		}
		if msg := err.Error(); strings.Contains(msg, c.secret) || !strings.Contains(msg, "[REDACTED]") {
			t.Fatalf("error = %s", msg)
		}
		if cl, _ := sinks.Classify(err); cl != sinks.Transient {
			t.Fatalf("connection refused classified %s", cl)
		}
	}
}
