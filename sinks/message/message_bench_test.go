package message

import (
	"fmt"
	"testing"
)

// BenchmarkEncode measures one message into a reused buffer, by body size.
func BenchmarkEncode(b *testing.B) {
	for _, size := range []int{512, 64 << 10} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			e := envelope(string(make([]byte, size)))
			var buf []byte
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				buf = Encode(buf[:0], e, Meta{Instance: "n1"})
			}
		})
	}
}

// BenchmarkDecode measures a consumer decoding one inline message.
func BenchmarkDecode(b *testing.B) {
	for _, size := range []int{512, 64 << 10} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			msg := Encode(nil, envelope(string(make([]byte, size))), Meta{Instance: "n1"})
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
