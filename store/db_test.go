package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
	"github.com/rs/zerolog"
)

// Inventory E.3: "Seq semantics: assigned only by Queue.Writer; dense within a group, strictly increasing, never
// reused (a failed commit may burn seqs; gaps allowed)".
func TestSeqsDenseIncreasingAcrossGroupsAndRestarts(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	next := db.NextSeq()
	for _, n := range []int{1, 5, 64} {
		first, err := db.CommitHooks(makeRecords(t, n, "acme"))
		if err != nil {
			t.Fatal(err)
		}
		if first != next {
			t.Fatalf("group of %d starts at %d, want %d", n, first, next)
		}
		next = first + uint64(n)
		if db.NextSeq() != next {
			t.Fatalf("NextSeq %d after group, want %d", db.NextSeq(), next)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	if db.NextSeq() != next {
		t.Fatalf("after reopen NextSeq %d, want %d", db.NextSeq(), next)
	}
	first, err := db.CommitHooks(makeRecords(t, 3, "acme"))
	if err != nil || first != next {
		t.Fatalf("first group after reopen starts at %d (%v), want %d", first, err, next)
	}
	seqs := hookTenantSeqs(t, db)
	if len(seqs) != 1+5+64+3 {
		t.Fatalf("%d hooks stored, want %d", len(seqs), 1+5+64+3)
	}
	for s := uint64(1); s < first+3; s++ {
		if _, ok := seqs[s]; !ok {
			t.Fatalf("seq %d missing: seqs are not dense", s)
		}
	}
}

// Inventory E.3: "a failed commit may burn seqs"; E.1: a commit is one synced batch, so a failed one writes
// nothing.
func TestFailedCommitBurnsSeqsAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	g := newGate()
	db := openTest(t, dir, &Faults{BeforeCommit: g.beforeCommit})
	ok1, err := db.CommitHooks(makeRecords(t, 2, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	g.failNext(syscall.ENOSPC)
	before := db.NextSeq()
	_, err = db.CommitHooks([]*Record{makeRecord(t, "newtenant", 10, SinkBinding{Index: 0, Type: "http"})})
	var we *WriteError
	if !errors.Is(err, ErrWriteFailed) || !errors.As(err, &we) || we.Class != ClassNoSpace {
		t.Fatalf("want a no_space WriteError, got %v", err)
	}
	if db.NextSeq() != before+1 {
		t.Fatalf("NextSeq %d after a failed group of 1, want %d (burned)", db.NextSeq(), before+1)
	}
	if _, ok := db.TenantOrdinal("newtenant"); ok {
		t.Fatal("a tenant of a failed commit got an ordinal")
	}
	if c := db.Counts(); c.Pending != 2 || len(db.ActiveTenants(nil)) != 1 {
		t.Fatalf("counters moved for a failed commit: %+v", c)
	}
	ok2, err := db.CommitHooks(makeRecords(t, 1, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if ok2 != before+1 {
		t.Fatalf("group after the failure starts at %d, want %d (burned seq never reused)", ok2, before+1)
	}
	seqs := hookTenantSeqs(t, db)
	if got, want := slices.Sorted(maps.Keys(seqs)), []uint64{ok1, ok1 + 1, ok2}; !slices.Equal(got, want) {
		t.Fatalf("stored seqs %v, want %v", got, want)
	}
	if n, _ := db.CountIndex(IndexDue); n != 3 {
		t.Fatalf("%d due keys, want 3 (the failed commit wrote none)", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	if db.NextSeq() != ok2+1 {
		t.Fatalf("after reopen NextSeq %d, want %d: m:next_seq went back", db.NextSeq(), ok2+1)
	}
	requireExactCounters(t, db)
}

// Inventory E.3 / K.3: "One atomic commit per group: hook + one delivery row/due key per sink + archive
// obligation (only if storage role) + seq marker + ... in a single synced write." Every row of the group is
// first due at the group's commit time, and carries its source, binding and arrival time.
func TestCommitWritesEveryObligationOfAGroupAtomically(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	a := makeRecord(t, "acme", 100, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 2, Type: "kafka", Ordered: true})
	a.Archive = true
	a.ReceivedAt -= 5000 // arrival is not the due time
	b := makeRecord(t, "globex", 7, SinkBinding{Index: 1, Type: "nats"})
	b.Source = "other"
	c := makeRecord(t, "acme", 5) // no sink, no archive: a seq but no row
	before := time.Now().UnixMilli()
	first, err := db.CommitHooks([]*Record{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()

	h, err := db.GetHook(first)
	if err != nil || h.ID != a.ID || h.Tenant != "acme" || len(h.Body) != 100 {
		t.Fatalf("GetHook(%d) = %+v, %v", first, h, err)
	}
	if _, err := db.GetHook(first + 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a record with no obligations was stored: %v", err)
	}
	ids, err := db.HookIDs()
	if err != nil || len(ids) != 2 || ids[a.ID] != first || ids[b.ID] != first+1 {
		t.Fatalf("HookIDs = %v, %v", ids, err)
	}

	type row struct {
		seq uint64
		r   DeliveryRow
	}
	var rows []row
	if err := db.ForEachDelivery(func(seq uint64, r DeliveryRow) error {
		rows = append(rows, row{seq, r})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no delivery rows")
	}
	at := rows[0].r.DueAt
	if at < before || at > after {
		t.Fatalf("first due time %d outside the commit call [%d, %d]", at, before, after)
	}
	want := []row{
		{first, DeliveryRow{SinkIndex: 0, SinkType: "http", State: StatePending, DueAt: at, Size: 100, Source: "src",
			ReceivedAt: a.ReceivedAt}},
		{first, DeliveryRow{SinkIndex: 2, SinkType: "kafka", State: StatePending, DueAt: at, Size: 100, Source: "src",
			Ordered: true, ReceivedAt: a.ReceivedAt}},
		{first + 1, DeliveryRow{SinkIndex: 1, SinkType: "nats", State: StatePending, DueAt: at, Size: 7, Source: "other",
			ReceivedAt: b.ReceivedAt}},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("delivery rows\n got %+v\nwant %+v", rows, want)
	}
	if n, err := db.CountIndex(IndexDue); err != nil || n != 3 {
		t.Fatalf("due keys: %d, %v; want 3", n, err)
	}
	if n, err := db.CountIndex(IndexArchive); err != nil || n != 1 {
		t.Fatalf("archive obligations: %d, %v; want 1", n, err)
	}
	ordA, okA := db.TenantOrdinal("acme")
	ordB, okB := db.TenantOrdinal("globex")
	if !okA || !okB || ordA == ordB {
		t.Fatalf("ordinals acme=%d(%v) globex=%d(%v)", ordA, okA, ordB, okB)
	}
	// The due keys carry the tenant ordinals: one contiguous range per tenant.
	var due []DueKey
	if err := db.read(func() error {
		return db.scan(cfIndex, []byte{IndexDue}, func(k, v []byte) error {
			d, err := ParseDueKey(k)
			due = append(due, d)
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	wantDue := []DueKey{
		{Ord: ordA, At: at, Seq: first, Sink: 0},
		{Ord: ordA, At: at, Seq: first, Sink: 2},
		{Ord: ordB, At: at, Seq: first + 1, Sink: 1},
	}
	if !slices.Equal(due, wantDue) {
		t.Fatalf("due keys\n got %+v\nwant %+v", due, wantDue)
	}

	// Ordinals survive a restart and stay dense.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	if o, ok := db.TenantOrdinal("globex"); !ok || o != ordB {
		t.Fatalf("globex ordinal after reopen: %d, %v; want %d", o, ok, ordB)
	}
	if _, err := db.CommitHooks([]*Record{makeRecord(t, "initech", 1, SinkBinding{Type: "http"})}); err != nil {
		t.Fatal(err)
	}
	if o, _ := db.TenantOrdinal("initech"); o != max(ordA, ordB)+1 {
		t.Fatalf("third tenant got ordinal %d, want %d", o, max(ordA, ordB)+1)
	}
}

// A closed store answers ErrClosed, never an empty result; Close is idempotent.
func TestClosedStoreRefusesEveryCall(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := db.CommitHooks(makeRecords(t, 1, "a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("CommitHooks after Close: %v", err)
	}
	if _, err := db.GetHook(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetHook after Close: %v", err)
	}
	if _, err := db.HookIDs(); !errors.Is(err, ErrClosed) {
		t.Fatalf("HookIDs after Close: %v", err)
	}
	if _, err := db.CountIndex(IndexDue); !errors.Is(err, ErrClosed) {
		t.Fatalf("CountIndex after Close: %v", err)
	}
}

// Inventory E.1: "exclusive lock ⇒ all store roles in one OS process": a second open is refused.
func TestSecondOpenOfAnOpenStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, nil)
	_, err := Open(Options{Dir: dir, Log: zerolog.Nop()})
	if !errors.Is(err, ErrOpenFailed) {
		t.Fatalf("second Open of a held store: %v", err)
	}
}

// newestWAL returns the path of the highest-numbered *.log file in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	best, bestN := "", -1
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(name)
		if err == nil && n > bestN {
			best, bestN = e.Name(), n
		}
	}
	if best == "" {
		t.Fatalf("no WAL in %s", dir)
	}
	return filepath.Join(dir, best)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// commitGroups commits n groups of 4 and returns every id acknowledged.
func commitGroups(t *testing.T, db *DB, n int) map[[16]byte]bool {
	t.Helper()
	acked := make(map[[16]byte]bool)
	for range n {
		recs := makeRecords(t, 4, "acme")
		if _, err := db.CommitHooks(recs); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			acked[r.ID] = true
		}
	}
	return acked
}

func requireAllPresent(t *testing.T, db *DB, acked map[[16]byte]bool) {
	t.Helper()
	ids, err := db.HookIDs()
	if err != nil {
		t.Fatalf("HookIDs: %v", err)
	}
	for id := range acked {
		if _, ok := ids[id]; !ok {
			t.Fatalf("acknowledged hook %x missing after reopen", id)
		}
	}
}

const walBlock = 32 << 10 // RocksDB log format block size

// Seed, store row: "A torn tail (an unacked write) is dropped on open; damage before it refuses to start".
// A torn tail is what a crash mid-append leaves: the last record's header promising more payload than the file
// holds. Both forms are tested: garbage appended after the last synced record, and the last record cut short.
func TestTornWALTailIsDroppedAndEveryCommittedHookSurvives(t *testing.T) {
	t.Run("partial record appended", func(t *testing.T) {
		dir := t.TempDir()
		db := openTest(t, dir, nil)
		acked := commitGroups(t, db, 5)
		next := db.NextSeq()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wal := newestWAL(t, dir)
		f, err := os.OpenFile(wal, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		var torn []byte
		// A header must not straddle a block: the writer would have padded the block's last bytes with zeros.
		if rem := walBlock - int(fileSize(t, wal)%walBlock); rem < 7+64 {
			torn = make([]byte, rem)
		}
		// header: crc32c (garbage), payload length 4000 (little-endian), type 1 = full record; then 64 of the
		// promised 4000 payload bytes.
		torn = append(torn, 0xde, 0xad, 0xbe, 0xef)
		torn = binary.LittleEndian.AppendUint16(torn, 4000)
		torn = append(torn, 1)
		torn = append(torn, bytes.Repeat([]byte{0x42}, 64)...)
		if _, err := f.Write(torn); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}

		db = openTest(t, dir, nil)
		requireAllPresent(t, db, acked)
		if db.NextSeq() != next {
			t.Fatalf("NextSeq %d after torn tail, want %d", db.NextSeq(), next)
		}
	})
	t.Run("last record cut short", func(t *testing.T) {
		dir := t.TempDir()
		db := openTest(t, dir, nil)
		acked := commitGroups(t, db, 5)
		next := db.NextSeq()
		wal := newestWAL(t, dir)
		synced := fileSize(t, wal)
		unacked := makeRecords(t, 4, "acme")
		if _, err := db.CommitHooks(unacked); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if newestWAL(t, dir) != wal {
			t.Fatal("the last group went to another WAL")
		}
		// Cut the last group's record in half, as a crash before its fsync completed would (it was never acked).
		if err := os.Truncate(wal, synced+(fileSize(t, wal)-synced)/2); err != nil {
			t.Fatal(err)
		}
		db = openTest(t, dir, nil)
		requireAllPresent(t, db, acked)
		ids, err := db.HookIDs()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ids[unacked[0].ID]; ok {
			t.Fatal("the torn group was replayed")
		}
		if db.NextSeq() != next {
			t.Fatalf("NextSeq %d, want %d (m:next_seq is in the dropped batch)", db.NextSeq(), next)
		}
	})
}

// flipByte overwrites one byte of path at off.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// unreadableDirEnv hands the unprivileged child of TestUnreadableStoreIsNotOpenedAsEmpty its directory.
const unreadableDirEnv = "ANKUSA_TEST_UNREADABLE_STORE_DIR"

// runUnprivileged runs the "directory unreadable" subtest again in a child process with the uid and gid of
// nobody, on dir (made nobody's), and fails unless the child ran it and it passed. The test binary is copied where nobody may
// run it, and dir's parents are made traversable, so the child fails on dir's mode alone.
func runUnprivileged(t *testing.T, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "store.test")
	exe, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	// The store is nobody's, so the child is refused for its mode alone, not for files it may not write.
	if err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	// Only directories inside this test's own temporary root: the system's temporary
	// directory above it is traversable already, and changing its mode would break every
	// other user of the machine (a 0755 /tmp stops apt, for one).
	root := filepath.Dir(filepath.Dir(bin))
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
		if d != root && !strings.HasPrefix(d, root+string(filepath.Separator)) {
			continue
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestUnreadableStoreIsNotOpenedAsEmpty$/^directory_unreadable$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), unreadableDirEnv+"="+dir)
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unprivileged child: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestUnreadableStoreIsNotOpenedAsEmpty/directory_unreadable")) {
		t.Fatalf("unprivileged child did not run the subtest:\n%s", out)
	}
}

func requireOpenRefused(t *testing.T, dir string) {
	t.Helper()
	db, err := Open(Options{Dir: dir, Log: zerolog.Nop()})
	if err == nil {
		_ = db.Close()
		t.Fatal("Open succeeded on a damaged store")
	}
	var oe *OpenError
	if !errors.Is(err, ErrOpenFailed) || !errors.As(err, &oe) || oe.Path != dir {
		t.Fatalf("want an OpenError for %s, got %v", dir, err)
	}
}

// Seed, store row: "damage before it refuses to start ({:store_open_failed, …}) rather than silently shortening
// a read". The damage modes are ones RocksDB detects at open, every time: every WAL and MANIFEST record carries a
// crc32c that recovery verifies, and with tolerate_corrupted_tail_records a bad record that is not the torn end of
// the log fails recovery (point-in-time recovery would instead stop there and open shorter). Damage inside an SST
// data block is not read at open; TestDamagedTableIsAnErrorNotAShortScan covers it.
func TestDamageBeforeTheTailRefusesToOpen(t *testing.T) {
	t.Run("WAL middle", func(t *testing.T) {
		dir := t.TempDir()
		db := openTest(t, dir, nil)
		commitGroups(t, db, 10)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wal := newestWAL(t, dir)
		// Inside the first group's record: a payload byte well before the last record.
		flipByte(t, wal, fileSize(t, wal)/4)
		requireOpenRefused(t, dir)
	})
	t.Run("MANIFEST", func(t *testing.T) {
		dir := t.TempDir()
		db := openTest(t, dir, nil)
		commitGroups(t, db, 2)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		cur, err := os.ReadFile(filepath.Join(dir, "CURRENT"))
		if err != nil {
			t.Fatal(err)
		}
		manifest := filepath.Join(dir, strings.TrimSpace(string(cur)))
		flipByte(t, manifest, fileSize(t, manifest)/2)
		requireOpenRefused(t, dir)
	})
}

// Inventory E.1: "Scans only trust results that reach a sentinel key"; here: a scan that fails is an error,
// never a short answer. A damaged data block in an SST is only seen when read, so the open may succeed, but
// the scan over it must fail.
func TestDamagedTableIsAnErrorNotAShortScan(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	for range 20 {
		recs := make([]*Record, 20)
		for i := range recs {
			recs[i] = makeRecord(t, "acme", 0, SinkBinding{Type: "http"})
			// Incompressible bodies, so the table is large and its middle is data blocks.
			h, err := DecodeHook(recs[i].Value)
			if err != nil {
				t.Fatal(err)
			}
			h.Body = make([]byte, 2048)
			_, _ = rand.Read(h.Body)
			recs[i].Value = AppendHook(nil, &h)
		}
		if _, err := db.CommitHooks(recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening replays the WAL into L0 tables; the largest one holds the hooks.
	db = openTest(t, dir, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	var biggest string
	for _, p := range ssts {
		if biggest == "" || fileSize(t, p) > fileSize(t, biggest) {
			biggest = p
		}
	}
	if biggest == "" || fileSize(t, biggest) < 256<<10 {
		t.Fatalf("no hooks table to damage (%q)", biggest)
	}
	flipByte(t, biggest, fileSize(t, biggest)/3)

	db2, err := Open(Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		if !errors.Is(err, ErrOpenFailed) {
			t.Fatalf("open error is not an OpenError: %v", err)
		}
		return
	}
	defer db2.Close()
	n := 0
	err = db2.ForEachHook(func(uint64, *Hook) error { n++; return nil })
	if err == nil {
		t.Fatalf("scan over a damaged table returned %d hooks and no error", n)
	}
	if _, err := db2.HookIDs(); err == nil {
		t.Fatal("HookIDs over a damaged table returned no error")
	}
}

// Inventory K.4: "unreadable ≠ empty".
func TestUnreadableStoreIsNotOpenedAsEmpty(t *testing.T) {
	populated := func(t *testing.T) string {
		dir := t.TempDir()
		db := openTest(t, dir, nil)
		commitGroups(t, db, 2)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("CURRENT points nowhere", func(t *testing.T) {
		dir := populated(t)
		if err := os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("MANIFEST-999999\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		requireOpenRefused(t, dir)
	})
	t.Run("CURRENT missing beside database files", func(t *testing.T) {
		dir := populated(t)
		if err := os.Remove(filepath.Join(dir, "CURRENT")); err != nil {
			t.Fatal(err)
		}
		requireOpenRefused(t, dir)
	})
	t.Run("directory unreadable", func(t *testing.T) {
		if dir := os.Getenv(unreadableDirEnv); dir != "" {
			// The unprivileged child started below: the directory is unreadable to it.
			requireOpenRefused(t, dir)
			return
		}
		dir := populated(t)
		if err := os.Chmod(dir, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o750) })
		if os.Geteuid() != 0 {
			requireOpenRefused(t, dir)
			return
		}
		// Root reads a directory whatever its mode (CI runs as root): run this subtest again as nobody.
		runUnprivileged(t, dir)
	})
	t.Run("format marker missing beside data", func(t *testing.T) {
		dir := populated(t)
		rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
			return rdb.DeleteCF(wo, cfs[cfDefault], []byte(metaFormatVersion))
		})
		requireOpenRefused(t, dir)
	})
	t.Run("hook at or past m:next_seq", func(t *testing.T) {
		dir := populated(t)
		rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
			return rdb.PutCF(wo, cfs[cfHooks], AppendHookKey(nil, 1_000_000), []byte{hookVersion})
		})
		requireOpenRefused(t, dir)
	})
}

// rawEdit opens the store with grocksdb directly to damage its contents the way a bug or bit rot could.
func rawEdit(t *testing.T, dir string, edit func(*grocksdb.DB, *grocksdb.WriteOptions, []*grocksdb.ColumnFamilyHandle) error) {
	t.Helper()
	o := grocksdb.NewDefaultOptions()
	defer o.Destroy()
	cfOpts := make([]*grocksdb.Options, cfCount)
	for i := range cfOpts {
		cfOpts[i] = o
	}
	rdb, cfs, err := grocksdb.OpenDbColumnFamilies(o, dir, cfNames[:], cfOpts)
	if err != nil {
		t.Fatal(err)
	}
	wo := grocksdb.NewDefaultWriteOptions()
	wo.SetSync(true)
	err = edit(rdb, wo, cfs)
	wo.Destroy()
	for _, h := range cfs {
		h.Destroy()
	}
	rdb.Close()
	if err != nil {
		t.Fatal(err)
	}
}

// Store write failures are classified (no_space, io_error, read_only, corruption, busy, other) from the errno or
// RocksDB's status text.
func TestClassifyWriteErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want WriteClass
	}{
		{syscall.ENOSPC, ClassNoSpace},
		{errors.New("IO error: No space left on device: While appending to file: 000012.log"), ClassNoSpace},
		{errors.New("IO error: While fsync: a file: Input/output error"), ClassIOError},
		{syscall.EROFS, ClassReadOnly},
		{errors.New("Not implemented: Not supported operation in read only mode."), ClassReadOnly},
		{errors.New("Corruption: block checksum mismatch"), ClassCorruption},
		{errors.New("Resource busy: "), ClassBusy},
		{errors.New("Invalid argument: column family not found"), ClassOther},
		{&WriteError{Class: ClassBusy, Err: errors.New("x")}, ClassBusy},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
