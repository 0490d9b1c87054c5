package store

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/test/poll"
)

// countingCommitter wraps a Committer to count its calls (the one method a fault needs).
type countingCommitter struct {
	Committer
	calls atomic.Int32
	sizes chan int
}

func (c *countingCommitter) CommitHooks(recs []*Record) (uint64, error) {
	c.calls.Add(1)
	if c.sizes != nil {
		c.sizes <- len(recs)
	}
	return c.Committer.CommitHooks(recs)
}

type writerRig struct {
	t      *testing.T
	db     *DB
	gate   *gate
	cc     *countingCommitter
	system *actor.ActorSystem
	writer *actor.PID
	done   chan *BatchDone
	batchr *actor.PID // stands in for the partition batchers: collects BatchDone
	// received counts the batches the writer has handled (queued): the commit task takes the next group as soon
	// as its commit returns, so a test that wants batches merged waits for them to be queued first.
	received atomic.Int64
}

// receivedCounter is a mailbox middleware counting the batches the writer handled.
type receivedCounter struct{ n *atomic.Int64 }

func (receivedCounter) MailboxStarted()   {}
func (receivedCounter) MessagePosted(any) {}
func (receivedCounter) MailboxEmpty()     {}
func (c receivedCounter) MessageReceived(m any) {
	if _, ok := actor.UnwrapEnvelopeMessage(m).(*Batch); ok {
		c.n.Add(1)
	}
}

// crash makes the writer panic (test middleware), so its supervisor restarts it.
type crash struct{}

func newWriterRig(t *testing.T, opts WriterOptions) *writerRig {
	t.Helper()
	return newWriterRigWith(t, opts, Options{})
}

// newWriterRigWith is newWriterRig over a store opened with storeOpts (its Dir and Faults are the rig's).
func newWriterRigWith(t *testing.T, opts WriterOptions, storeOpts Options) *writerRig {
	t.Helper()
	r := &writerRig{t: t, gate: newGate(), done: make(chan *BatchDone, 1024)}
	storeOpts.Dir, storeOpts.Faults = t.TempDir(), &Faults{BeforeCommit: r.gate.beforeCommit}
	r.db = openWith(t, storeOpts)
	r.cc = &countingCommitter{Committer: r.db}
	r.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		// A task's completion can reach a writer that already stopped (a dead letter); the throttle's timer
		// goroutine then lives one interval, kept short so goleak sees it end.
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	panicker := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*crash); ok {
				panic("injected writer crash")
			}
			next(c, env)
		}
	}
	opts.MailboxMiddleware = append(opts.MailboxMiddleware, receivedCounter{&r.received})
	props := NewWriterProps(r.cc, opts).Configure(actor.WithReceiverMiddleware(panicker))
	r.writer = r.system.Root.Spawn(props)
	r.batchr = r.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*BatchDone); ok {
			r.done <- m
		}
	}))
	t.Cleanup(func() {
		_ = r.system.Root.StopFuture(r.writer).Wait()
		_ = r.system.Root.StopFuture(r.batchr).Wait()
		r.system.Shutdown()
	})
	return r
}

func (r *writerRig) pendings(n int, tenant string) []*Pending {
	ps := make([]*Pending, n)
	for i := range ps {
		ps[i] = NewPending()
		ps[i].Record = *makeRecord(r.t, tenant, 32, SinkBinding{Type: "http"})
	}
	return ps
}

func (r *writerRig) send(partition int, ps []*Pending) {
	r.system.Root.Send(r.writer, &Batch{Partition: partition, Records: ps, ReplyTo: r.batchr})
}

// result waits for p's one Result and checks that no second one follows.
func (r *writerRig) result(p *Pending) Result {
	r.t.Helper()
	select {
	case res := <-p.Done:
		select {
		case extra := <-p.Done:
			r.t.Fatalf("a second Result %+v after %+v", extra, res)
		default:
		}
		return res
	case <-time.After(10 * time.Second):
		r.t.Fatal("no Result within 10s")
		return Result{}
	}
}

func (r *writerRig) batchDone() *BatchDone {
	r.t.Helper()
	select {
	case m := <-r.done:
		return m
	case <-time.After(10 * time.Second):
		r.t.Fatal("no BatchDone within 10s")
		return nil
	}
}

// waitQueued waits until the writer has handled n batches in all (the held group's included).
func (r *writerRig) waitQueued(n int64) {
	r.t.Helper()
	poll.True(r.t, 10*time.Second, fmt.Sprintf("%d batches queued in the writer", n), func() bool { return r.received.Load() >= n })
}

// holdFirstGroup sends one record and holds its group's synced write; it returns that record.
func (r *writerRig) holdFirstGroup() *Pending {
	r.t.Helper()
	r.gate.holdNext()
	p := r.pendings(1, "acme")
	r.send(0, p)
	r.gate.waitEntered(r.t)
	return p[0]
}

// Seed, batcher row: "The writer merges every batch queued from every partition into one group ... one synced
// store write ... with seqs dense across the group, while the next group accumulates behind it."
func TestWriterMergesQueuedBatchesFromAllPartitionsIntoOneGroup(t *testing.T) {
	var infos []CommitInfo
	var mu sync.Mutex
	r := newWriterRig(t, WriterOptions{OnCommit: func(ci CommitInfo) {
		mu.Lock()
		infos = append(infos, ci)
		mu.Unlock()
	}})
	held := r.holdFirstGroup()

	const partitions, perPartition, perBatch = 4, 3, 5
	var all []*Pending
	var wg sync.WaitGroup
	var allMu sync.Mutex
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perPartition {
				ps := r.pendings(perBatch, "acme")
				allMu.Lock()
				all = append(all, ps...)
				allMu.Unlock()
				r.send(p, ps)
			}
		}()
	}
	wg.Wait()
	r.waitQueued(1 + partitions*perPartition) // every batch is queued before the held group returns
	r.gate.open()

	hres := r.result(held)
	if hres.Err != nil {
		t.Fatalf("held record: %v", hres.Err)
	}
	seen := make(map[uint64]bool)
	for _, p := range all {
		res := r.result(p)
		if res.Err != nil {
			t.Fatalf("record: %v", res.Err)
		}
		if seen[res.Seq] {
			t.Fatalf("seq %d given twice", res.Seq)
		}
		seen[res.Seq] = true
	}
	batches := 1 + partitions*perPartition
	for range batches {
		r.batchDone()
	}
	if calls := int(r.cc.calls.Load()); calls != 2 {
		t.Fatalf("%d batches took %d commits, want 2 (the held one, then every queued batch merged)", batches, calls)
	}
	// Dense across the merged group.
	first := hres.Seq + 1
	for i := range len(all) {
		if !seen[first+uint64(i)] {
			t.Fatalf("seq %d missing from the merged group", first+uint64(i))
		}
	}
	// OnCommit runs before the group's callers are answered: both reports are in once the results are.
	mu.Lock()
	defer mu.Unlock()
	if len(infos) != 2 || infos[1].Records != len(all) || infos[1].Err != nil || infos[1].Bytes <= 0 {
		t.Fatalf("OnCommit reports %+v", infos)
	}
}

// Seed, batcher row: groups are bounded by "batcher.group_commit_max_bytes, 4 MiB, and
// batcher.group_commit_max_records"; whatever does not fit waits for the group after.
func TestWriterBoundsGroupsByRecordsAndBytes(t *testing.T) {
	r := newWriterRig(t, WriterOptions{GroupMaxRecords: 4})
	r.cc.sizes = make(chan int, 64)
	held := r.holdFirstGroup()
	var all []*Pending
	for range 5 {
		ps := r.pendings(2, "acme")
		all = append(all, ps...)
		r.send(1, ps)
	}
	r.waitQueued(6)
	r.gate.open()
	r.result(held)
	for _, p := range all {
		if res := r.result(p); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	// 1 held, then 10 records in whole batches of 2, at most 4 per group: 4, 4, 2.
	for _, want := range []int{1, 4, 4, 2} {
		if got := <-r.cc.sizes; got != want {
			t.Fatalf("group of %d records, want %d", got, want)
		}
	}

	// By bytes: every value has the same size, and the bound admits three of them.
	size := int64(len(r.pendings(1, "acme")[0].Value))
	rb := newWriterRig(t, WriterOptions{GroupMaxBytes: 3*size + size/2})
	rb.cc.sizes = make(chan int, 64)
	held = rb.holdFirstGroup()
	all = all[:0]
	for range 7 {
		ps := rb.pendings(1, "acme")
		all = append(all, ps...)
		rb.send(1, ps)
	}
	// As above: the seven batches must be queued behind the held group before it ends, or the writer takes the
	// first of them alone.
	rb.waitQueued(8)
	rb.gate.open()
	rb.result(held)
	for _, p := range all {
		if res := rb.result(p); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	for _, want := range []int{1, 3, 3, 1} {
		if got := <-rb.cc.sizes; got != want {
			t.Fatalf("group of %d records under the byte bound, want %d", got, want)
		}
	}
}

// Seed, batcher row: "Every record carries a deadline ... the writer refuses a batch that missed its deadline";
// inventory K.2: "deadline-missed batches refused without burning a seq".
func TestExpiredRecordIsNeverCommittedAndBurnsNoSeq(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	held := r.holdFirstGroup()
	ps := r.pendings(3, "acme")
	r.send(2, ps)
	expired := r.pendings(2, "acme")
	r.send(3, expired)
	if !ps[1].Expire() || !expired[0].Expire() || !expired[1].Expire() {
		t.Fatal("Expire of a queued record returned false")
	}
	r.waitQueued(3)
	r.gate.open()
	h := r.result(held)
	a, c := r.result(ps[0]), r.result(ps[2])
	if a.Err != nil || c.Err != nil {
		t.Fatalf("live records: %v, %v", a.Err, c.Err)
	}
	if a.Seq != h.Seq+1 || c.Seq != h.Seq+2 {
		t.Fatalf("seqs %d, %d after %d: the expired record burned a seq", a.Seq, c.Seq, h.Seq)
	}
	for range 3 {
		r.batchDone() // the all-expired batch is answered too
	}
	for _, p := range []*Pending{ps[1], expired[0], expired[1]} {
		select {
		case res := <-p.Done:
			t.Fatalf("an expired record got a Result %+v", res)
		default:
		}
	}
	ids, err := r.db.HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Pending{ps[1], expired[0], expired[1]} {
		if _, ok := ids[p.ID]; ok {
			t.Fatal("an expired record was committed")
		}
	}
	if calls := r.cc.calls.Load(); calls != 2 {
		t.Fatalf("%d commits, want 2 (none for the all-expired batch)", calls)
	}
}

// Seed, batcher row: "A batch the writer has started is never abandoned, so a stall never answers 503 for a hook
// it then commits".
func TestStartedRecordIsNotAbandonedWhenItsDeadlinePassesMidSync(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	held := r.holdFirstGroup()
	if held.Expire() {
		t.Fatal("Expire succeeded on a record whose group is syncing")
	}
	r.gate.open()
	res := r.result(held)
	if res.Err != nil {
		t.Fatalf("started record: %v", res.Err)
	}
	h, err := r.db.GetHook(res.Seq)
	if err != nil || h.ID != held.ID {
		t.Fatalf("GetHook(%d) = %x, %v; want the started record", res.Seq, h.ID, err)
	}
}

// Inventory K.1: never 2xx before durable acceptance; a failed synced write answers every record of its group
// with the error (a 503 at the edge), and the writer goes on with the next group.
func TestFailedGroupAnswersEveryRecordWithTheError(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	r.gate.failNext(syscall.EIO)
	ps := r.pendings(3, "acme")
	r.send(0, ps)
	for _, p := range ps {
		if res := r.result(p); !errors.Is(res.Err, ErrWriteFailed) {
			t.Fatalf("record of a failed group: %+v", res)
		}
	}
	r.batchDone()
	ok := r.pendings(1, "acme")
	r.send(0, ok)
	if res := r.result(ok[0]); res.Err != nil {
		t.Fatalf("record after a failed group: %v", res.Err)
	}
}

// Design §3 / STYLE: "a restarted actor must need nothing from its predecessor"; the batcher row: the commit
// task answers its callers, so a writer crash mid-commit still answers every caller, and records queued but not
// started are answered ErrWriterStopped, never dropped.
func TestWriterRestartMidCommitStillAnswersEveryCaller(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	held := r.holdFirstGroup()
	queued := r.pendings(2, "acme")
	r.send(1, queued)
	r.system.Root.Send(r.writer, &crash{})
	for _, p := range queued {
		if res := r.result(p); !errors.Is(res.Err, ErrWriterStopped) {
			t.Fatalf("queued record at restart: %+v", res)
		}
	}
	r.batchDone()
	if held.Expire() {
		t.Fatal("the in-flight record became expirable after the restart")
	}
	// The restarted writer takes new batches at once; its commit waits behind the held one in the store.
	after := r.pendings(1, "acme")
	r.send(0, after)
	r.gate.open()
	h := r.result(held)
	if h.Err != nil {
		t.Fatalf("in-flight record after restart: %v", h.Err)
	}
	a := r.result(after[0])
	if a.Err != nil || a.Seq <= h.Seq {
		t.Fatalf("record after restart: %+v (held got %d)", a, h.Seq)
	}
	r.batchDone()
	r.batchDone()
	// The predecessor's completion did not confuse the new writer: it still commits.
	more := r.pendings(1, "acme")
	r.send(0, more)
	if res := r.result(more[0]); res.Err != nil || res.Seq != a.Seq+1 {
		t.Fatalf("next record: %+v, want seq %d", res, a.Seq+1)
	}
}

// Seed, batcher row: a batch queued when the writer goes away is answered (503), never silently dropped; design
// §3: a stop does not kill a commit mid-fsync. The Stop (a system message) may overtake the queued batch in the
// mailbox; either way the batch is answered ErrWriterStopped.
func TestWriterStopAnswersQueuedAndWaitsForTheSync(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	held := r.holdFirstGroup()
	queued := r.pendings(1, "acme")
	r.send(1, queued)
	stopped := make(chan error, 1)
	go func() { stopped <- r.system.Root.StopFuture(r.writer).Wait() }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a synced write was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.gate.open()
	if res := r.result(held); res.Err != nil {
		t.Fatalf("in-flight record at stop: %v", res.Err)
	}
	if res := r.result(queued[0]); !errors.Is(res.Err, ErrWriterStopped) {
		t.Fatalf("queued record at stop: %+v", res)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("StopFuture: %v", err)
	}
	r.batchDone()
	r.batchDone()
	if _, err := r.db.GetHook(1); err != nil {
		t.Fatalf("the held record is not in the store: %v", err)
	}
}

// Seed, batcher row: a record is either refused at its deadline or started by the writer, never both: the two
// sides race on one CAS.
func TestPendingExpireAndStartAreExclusive(t *testing.T) {
	for range 1000 {
		p := NewPending()
		var wg sync.WaitGroup
		var expired, started atomic.Bool
		wg.Add(2)
		go func() { defer wg.Done(); expired.Store(p.Expire()) }()
		go func() { defer wg.Done(); started.Store(p.start()) }()
		wg.Wait()
		if expired.Load() == started.Load() {
			t.Fatalf("expired=%v started=%v: exactly one must win", expired.Load(), started.Load())
		}
		p.Reset()
		if p.State() != Waiting {
			t.Fatal("Reset did not return to Waiting")
		}
	}
}

// dedupePendings returns n pendings of tenant acme all carrying dedupe key key.
func (r *writerRig) dedupePendings(n int, key string) []*Pending {
	ps := r.pendings(n, "acme")
	for _, p := range ps {
		p.DedupeKey, p.DedupeTTL = key, dedupeTTL
	}
	return ps
}

// Inventory K.10 / seed batcher row: "Because a caller's dedupe read can predate another partition's commit, the
// writer re-validates it before it assigns seqs: the first occurrence of a key wins, and later ones answer
// duplicate with its hook id." Two partitions' batches with one key merged into one group.
func TestWriterAnswersTheSecondOccurrenceInOneGroupDuplicate(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	held := r.holdFirstGroup()
	a := r.dedupePendings(1, "evt")
	plain := r.pendings(1, "acme")
	b := r.dedupePendings(1, "evt")
	r.send(1, append(a, plain...))
	r.send(2, b)
	r.waitQueued(3)
	r.gate.open()
	h := r.result(held)
	ra, rp, rb := r.result(a[0]), r.result(plain[0]), r.result(b[0])
	if ra.Err != nil || ra.Duplicate || ra.Seq != h.Seq+1 {
		t.Fatalf("first occurrence: %+v, want committed at seq %d", ra, h.Seq+1)
	}
	if rp.Err != nil || rp.Duplicate || rp.Seq != h.Seq+2 {
		t.Fatalf("record without a key: %+v, want committed at seq %d", rp, h.Seq+2)
	}
	if rb.Err != nil || !rb.Duplicate || rb.OriginalID != a[0].ID || rb.Seq != 0 {
		t.Fatalf("second occurrence: %+v, want duplicate of %x with no seq", rb, a[0].ID[:4])
	}
	for range 3 {
		r.batchDone()
	}
	if calls := r.cc.calls.Load(); calls != 2 {
		t.Fatalf("%d commits, want 2 (the held group, then both partitions' batches in one)", calls)
	}
}

// The same sentence across groups: the second record's caller looked the key up while the first record's
// group was syncing (so found nothing), and the writer still answers it duplicate.
func TestWriterRecheckCatchesADuplicateWhoseLookupPredatedTheCommit(t *testing.T) {
	r := newWriterRig(t, WriterOptions{})
	r.gate.holdNext()
	a := r.dedupePendings(1, "evt")
	r.send(1, a)
	r.gate.waitEntered(t)
	if _, ok, err := r.db.LookupDedupe("acme", "src", "evt", time.Now()); err != nil || ok {
		t.Fatalf("LookupDedupe during the first commit's sync = %v, %v; want a miss", ok, err)
	}
	b := r.dedupePendings(1, "evt")
	r.send(2, b)
	r.gate.open()
	ra, rb := r.result(a[0]), r.result(b[0])
	if ra.Err != nil || ra.Duplicate {
		t.Fatalf("first occurrence: %+v", ra)
	}
	if rb.Err != nil || !rb.Duplicate || rb.OriginalID != a[0].ID {
		t.Fatalf("second occurrence: %+v, want duplicate of the first", rb)
	}
	r.batchDone()
	r.batchDone()
	ids, err := r.db.HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ids[b[0].ID]; ok || len(ids) != 1 {
		t.Fatalf("stored hooks %v: the duplicate was stored", ids)
	}
}

// Seed, Ingest row: a hook whose key would pass the quota "is refused 503 dedupe_quota": the writer answers
// ErrDedupeQuota for it alone while the rest of its group commits with dense seqs.
func TestWriterAnswersDedupeQuotaPerRecord(t *testing.T) {
	r := newWriterRigWith(t, WriterOptions{}, Options{DedupeMaxEntries: 1})
	ps := r.dedupePendings(1, "k1")
	ps = append(ps, r.dedupePendings(1, "k2")...)
	ps = append(ps, r.pendings(1, "acme")...)
	ps = append(ps, r.dedupePendings(1, "k1")...)
	r.send(0, ps)
	res := make([]Result, len(ps))
	for i, p := range ps {
		res[i] = r.result(p)
	}
	r.batchDone()
	if res[0].Err != nil || res[0].Duplicate {
		t.Fatalf("first key: %+v", res[0])
	}
	if !errors.Is(res[1].Err, ErrDedupeQuota) || res[1].Seq != 0 {
		t.Fatalf("key past the quota: %+v, want ErrDedupeQuota", res[1])
	}
	if res[2].Err != nil || res[2].Seq != res[0].Seq+1 {
		t.Fatalf("record without a key: %+v, want seq %d", res[2], res[0].Seq+1)
	}
	if !res[3].Duplicate || res[3].OriginalID != ps[0].ID {
		t.Fatalf("duplicate of the first key: %+v", res[3])
	}
}

// noOutcomeCommitter reports success without setting any outcome: a broken Committer.
type noOutcomeCommitter struct{}

func (noOutcomeCommitter) CommitHooks([]*Record) (uint64, error) { return 1, nil }

// Inventory K.1, never 2xx before durable acceptance: the writer answers from each record's outcome, so a
// record its committer said nothing about is an error, never a commit.
func TestWriterNeverAnswersCommittedWithoutAnOutcome(t *testing.T) {
	system := quietSystem()
	defer system.Shutdown()
	pid := system.Root.Spawn(NewWriterProps(noOutcomeCommitter{}, WriterOptions{}))
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()
	p := NewPending()
	p.Record = *makeRecord(t, "acme", 8, SinkBinding{Type: "http"})
	system.Root.Send(pid, &Batch{Records: []*Pending{p}})
	select {
	case res := <-p.Done:
		if !errors.Is(res.Err, errOutcomeUnset) {
			t.Fatalf("Result %+v, want errOutcomeUnset", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no Result")
	}
}
