package claimcheck

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// BenchmarkCheckInHook: one hook's body into a one-claim pack on LocalFS (write, fsync, rename, fsync), by
// body size; "again" is a repeated check-in of the same hook, which finds the pack and writes nothing.
func BenchmarkCheckInHook(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, again := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/again=%v", size, again), func(b *testing.B) {
				store, err := blob.NewLocalFS(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				c := NewChecker(store, Options{})
				body := make([]byte, size)
				_, _ = rand.Read(body)
				at := time.Now()
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for i := 0; b.Loop(); i++ {
					hook := [16]byte{byte(i), byte(i >> 8), byte(i >> 16)}
					if again {
						hook = [16]byte{}
					}
					if _, err := c.CheckInHook(context.Background(), "acme", hook, at, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFetch: reading one claim back (three ranged reads) from a pack of claims=%d on LocalFS.
func BenchmarkFetch(b *testing.B) {
	for _, claims := range []int{1, 1024} {
		b.Run(fmt.Sprintf("claims=%d/size=4096", claims), func(b *testing.B) {
			store, err := blob.NewLocalFS(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			bodies := make([][]byte, claims)
			for i := range bodies {
				bodies[i] = make([]byte, 4096)
				_, _ = rand.Read(bodies[i])
			}
			got, err := NewChecker(store, Options{}).CheckIn(context.Background(), "acme", bodies)
			if err != nil {
				b.Fatal(err)
			}
			r := NewReader(store)
			b.ReportAllocs()
			b.SetBytes(4096)
			for i := 0; b.Loop(); i++ {
				if _, _, err := r.Fetch(context.Background(), "acme", got[i%claims].ID.String()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
