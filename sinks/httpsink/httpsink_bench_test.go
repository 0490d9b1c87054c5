package httpsink

import (
	"context"
	"fmt"
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
	for _, par := range []int{1, 16} {
		for _, size := range []int{512, 64 << 10} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{
					"url": srv.URL, "secret": "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQ=",
				}}, sinks.Deps{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				e := sinktest.Envelope(sinktest.Binary(size))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := s.Deliver(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
