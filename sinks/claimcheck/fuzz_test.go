package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// FuzzReadPack: whatever bytes sit under a pack's key (a truncated upload, a foreign object, a forged index),
// the reader answers a claim, ErrNotFound or ErrCorruptPack, never panics, and never returns bytes that are
// not in the object.
func FuzzReadPack(f *testing.F) {
	id := newPackID(time.UnixMilli(1_760_000_000_000), [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	good, err := encodePack("t", id, [][]byte{[]byte("alpha"), {}, []byte("gamma")}, sums([][]byte{[]byte("alpha"), {}, []byte("gamma")}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, uint16(0))
	f.Add(good, uint16(2))
	f.Add(good[:headLen], uint16(0))
	f.Add(good[:len(good)/2], uint16(2))
	f.Add([]byte("PK\x03\x04"), uint16(0))
	store, err := blob.NewLocalFS(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	r := NewReader(store)
	key := PackKey("t", id)
	f.Fuzz(func(t *testing.T, pack []byte, pos uint16) {
		if err := store.Put(context.Background(), key, bytes.NewReader(pack), int64(len(pack))); err != nil {
			t.Fatal(err)
		}
		info, body, err := r.Fetch(context.Background(), "t", id.WithPosition(int(pos)).String())
		if err != nil {
			if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorruptPack) {
				t.Fatalf("Fetch = %v, want a claim, ErrNotFound or ErrCorruptPack", err)
			}
			return
		}
		if int64(len(body)) != info.Size || !bytes.Contains(pack, body) {
			t.Fatalf("Fetch returned %d bytes (info %d) not taken from the object", len(body), info.Size)
		}
	})
}
