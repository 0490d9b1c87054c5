package blob_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/test/disk"
)

// BenchmarkPutBesideSyncedAppends measures what a LocalFS Put does to the synced writes beside it on the same
// disk: the store's WAL, whose fdatasync every ingest ack waits for. A loop appends 4 KiB and fdatasyncs it
// every 500 µs (the WAL) while 16 MiB objects (a segment at storage.roll_bytes' default) are put every 700 ms,
// about what the compactor writes while a node ingests 20,000 hooks/s of 1 KiB. Each phase reports the
// appends' latency quantiles:
//
//   - idle: no Put, the disk's own floor;
//   - put: LocalFS.Put, which writes each chunk out before the next (copyWithWriteback);
//   - start-only: the same objects written the way RocksDB's bytes_per_sync writes its tables, each MiB's
//     writeback started (SYNC_FILE_RANGE_WRITE) but not waited for, then one fsync.
//
// put and start-only alternate twice, so a drift of the shared disk shows as a difference between the rounds.
// Run it with `make bench` or:
//
//	go test -run '^$' -bench PutBesideSyncedAppends -benchtime 1x ./storage/blob/
func BenchmarkPutBesideSyncedAppends(b *testing.B) {
	const (
		object = 16 << 20
		every  = 700 * time.Millisecond
		phase  = 5 * time.Second
	)
	dir := b.TempDir()
	s, err := blob.NewLocalFS(filepath.Join(dir, "root"))
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), object/16)
	n := 0
	put := func() error {
		n++
		return s.Put(context.Background(), fmt.Sprintf("seg/%d", n), bytes.NewReader(data), object)
	}
	startOnly := func() error {
		n++
		return writeStartingWriteback(filepath.Join(dir, fmt.Sprintf("plain-%d", n)), data)
	}
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break // one pass is the figure; -benchtime Nx does not repeat it
		}
		appendsBeside(b, dir, "idle", phase, every, nil)
		for round := 1; round <= 2; round++ {
			appendsBeside(b, dir, fmt.Sprintf("put (round %d)", round), phase, every, put)
			appendsBeside(b, dir, fmt.Sprintf("start-only (round %d)", round), phase, every, startOnly)
		}
	}
}

// appendsBeside runs the append loop for d while write (nil: none) runs every interval, and prints the appends'
// latency quantiles and the writes' mean duration.
func appendsBeside(b *testing.B, dir, label string, d, interval time.Duration, write func() error) {
	b.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes int
	var took time.Duration
	var werr error
	if write != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				start := time.Now()
				if werr = write(); werr != nil {
					return
				}
				writes, took = writes+1, took+time.Since(start)
			}
		}()
	}
	lat, err := disk.SyncedAppends(dir, d, 500*time.Microsecond)
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if werr != nil {
		b.Fatal(werr)
	}
	line := fmt.Sprintf("%-20s %s", label, lat)
	if writes > 0 {
		line += fmt.Sprintf("; %d objects of 16 MiB, %v each", writes, (took / time.Duration(writes)).Round(time.Millisecond))
	}
	fmt.Println("BenchmarkPutBesideSyncedAppends:", line)
}

// writeStartingWriteback writes data to name 1 MiB at a time, starting each MiB's writeback without waiting for
// it, then fsyncs: the comparison for LocalFS.Put's bounded writeback.
func writeStartingWriteback(name string, data []byte) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	for off := 0; off < len(data); off += 1 << 20 {
		end := min(len(data), off+1<<20)
		if _, err := f.Write(data[off:end]); err != nil {
			return err
		}
		_ = unix.SyncFileRange(int(f.Fd()), int64(off), int64(end-off), unix.SYNC_FILE_RANGE_WRITE)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Remove(name)
}
