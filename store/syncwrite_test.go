package store

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/linxGnu/grocksdb"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// The sync writer's thread writes through the C handles it is given: what it wrote is read back through
// grocksdb, and a write RocksDB refuses comes back as that write's error, with the writer still usable after.
func TestSyncWriterWritesThroughTheHandles(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	w, _, err := newSyncWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()

	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for i := range 3 {
		wb.Clear()
		wb.PutCF(db.cfs[cfDefault], []byte("syncwrite-test"), []byte{byte('a' + i)})
		if err := w.write(db.rdb, db.wo, wb); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := readBack(db)
		if err != nil {
			t.Fatal(err)
		}
		if want := []byte{byte('a' + i)}; !bytes.Equal(got, want) {
			t.Fatalf("after write %d read %q, want %q", i, got, want)
		}
	}

	// RocksDB refuses a synced write without its WAL.
	bad := grocksdb.NewDefaultWriteOptions()
	defer bad.Destroy()
	bad.SetSync(true)
	bad.DisableWAL(true)
	wb.Clear()
	wb.PutCF(db.cfs[cfDefault], []byte("syncwrite-test"), []byte("refused"))
	if err := w.write(db.rdb, bad, wb); err == nil || !strings.Contains(strings.ToLower(err.Error()), "wal") {
		t.Fatalf("a synced write without the WAL: err %v, want RocksDB's refusal", err)
	}
	wb.Clear()
	wb.PutCF(db.cfs[cfDefault], []byte("syncwrite-test"), []byte("after"))
	if err := w.write(db.rdb, db.wo, wb); err != nil {
		t.Fatalf("the write after a refused one: %v", err)
	}
	got, err := readBack(db)
	if err != nil || string(got) != "after" {
		t.Fatalf("read %q, %v after the refused write; want \"after\"", got, err)
	}
}

// The writer's thread ends at close, also with no write ever made, and a store's reopen gets a new one.
func TestSyncWriterCloses(t *testing.T) {
	w, _, err := newSyncWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	w.close()

	dir := t.TempDir()
	for range 3 {
		db, err := Open(Options{Dir: dir, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CommitHooks(makeRecords(t, 2, "acme")); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The store's commit thread runs at the nice value asked for (store.commit_thread_nice), or, where the process
// may not take it (no CAP_SYS_NICE), says so and keeps the process's; 0 leaves it the process's. Read from
// /proc, the kernel's view of the thread itself.
func TestSyncWriterThreadNice(t *testing.T) {
	own, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The raw getpriority syscall returns 20 - nice.
	processNice := 20 - own

	for _, asked := range []int{0, -10, 5} {
		var logged bytes.Buffer
		db, err := Open(Options{Dir: t.TempDir(), Log: zerolog.New(&logged), CommitThreadNice: asked})
		if err != nil {
			t.Fatal(err)
		}
		got, err := threadNiceOf(db.sw.tid())
		if err != nil {
			t.Fatal(err)
		}
		log := logged.String()
		refused := strings.Contains(log, niceRefused)
		want := asked
		switch {
		case asked == 0:
			want = processNice
			if refused {
				t.Errorf("nice 0: the open logged %q, want no attempt", log)
			}
		case refused:
			// Only a value below the process's may be refused, and only for want of the privilege.
			if !strings.Contains(log, "permission denied") && !strings.Contains(log, "operation not permitted") ||
				asked >= processNice {
				t.Errorf("nice %d refused: %q", asked, log)
			}
			want = processNice
		}
		if got != want {
			t.Errorf("commit thread nice %d with %d asked (process %d, log %q), want %d", got, asked, processNice,
				log, want)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Without the privilege to raise its priority (CAP_SYS_NICE, dropped here from the calling thread, whose
// capabilities the commit thread inherits), the store still opens and commits: the thread runs at the process's
// priority and the open logs why.
func TestSyncWriterNiceRefused(t *testing.T) {
	dir, recs := t.TempDir(), makeRecords(t, 2, "acme")
	done := make(chan struct{})
	var (
		got, want int
		logged    bytes.Buffer
		failure   error
	)
	go func() {
		defer close(done)
		// The thread keeps the dropped capability until it ends: never unlocked, it ends with this goroutine.
		runtime.LockOSThread()
		if err := dropThreadCap(unix.CAP_SYS_NICE); err != nil {
			failure = err
			return
		}
		own, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
		if err != nil {
			failure = err
			return
		}
		want = 20 - own
		db, err := Open(Options{Dir: dir, Log: zerolog.New(&logged), CommitThreadNice: want - 10})
		if err != nil {
			failure = err
			return
		}
		defer func() {
			if err := db.Close(); err != nil && failure == nil {
				failure = err
			}
		}()
		got, failure = threadNiceOf(db.sw.tid())
		if failure == nil {
			_, failure = db.CommitHooks(recs)
		}
	}()
	<-done
	if failure != nil {
		t.Fatal(failure)
	}
	if got != want {
		t.Errorf("commit thread nice %d without the privilege, want the process's %d", got, want)
	}
	if !strings.Contains(logged.String(), niceRefused) ||
		!strings.Contains(logged.String(), "permission denied") {
		t.Errorf("the open logged %q, want the refusal and its reason", logged.String())
	}
}

// dropThreadCap removes capability c from the calling thread's effective set (capabilities are per thread).
func dropThreadCap(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[c/32].Effective &^= 1 << (c % 32)
	return unix.Capset(&hdr, &data[0])
}

// threadNiceOf reads the nice value of thread tid of this process (field 19 of its stat line).
func threadNiceOf(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		return 0, err
	}
	// The command (field 2) is in parentheses and may hold spaces: count from the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 17 {
		return 0, fmt.Errorf("stat of thread %d: %q", tid, b)
	}
	n, err := strconv.Atoi(f[16])
	if err != nil {
		return 0, fmt.Errorf("stat of thread %d: %q: %w", tid, b, err)
	}
	return n, nil
}

func readBack(db *DB) ([]byte, error) {
	v, err := db.rdb.GetCF(db.ro, db.cfs[cfDefault], []byte("syncwrite-test"))
	if err != nil {
		return nil, err
	}
	defer v.Free()
	return bytes.Clone(v.Data()), nil
}
