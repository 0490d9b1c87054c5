package httpsink

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures one attempt against a loopback destination, signed, with provider headers.
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16}, Sizes: []int{512, 10 << 10, 64 << 10}, New: func(b *testing.B) sinks.Sink {
		s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{
			"url": srv.URL, "secret": "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQ=",
		}}, sinks.Deps{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}})
}
