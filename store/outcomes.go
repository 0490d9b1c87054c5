package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linxGnu/grocksdb"
)

// Outcomes are group-committed. Complete, Reschedule and Bury queue their operation and wait; the caller that
// finds no group in progress leads: it takes cmu, drains every queued operation into one non-synced batch
// (the counters of each touched tenant computed over the whole group and written once), writes it, applies it
// and answers every caller. While a leader waits for cmu (behind a commit's fsync) the next operations queue
// behind it, so a fsync window costs the outcomes one write instead of one each. When the group is answered,
// leadership passes to the first operation queued meanwhile, so no caller settles others' work after its own.
//
// Groups are paced: a group of one outcome costs about twice per outcome what a group of eight does (a write,
// a counter put, an iterator, and skip-list searches from the top), and an outcome's write takes far less
// than the time between two attempts' answers, so without a wait nearly every group is one outcome. A
// Complete that leads waits until the interval (Options.OutcomeInterval) since the last group was taken has
// passed while attempts that have not queued their outcome yet are running (BeginAttempt, EndAttempt), so
// the attempts answering meanwhile join its group. The wait ends early once every running attempt has
// queued, the queue holds maxOutcomeGroup operations, or a Reschedule or a Bury queues (the scheduler's
// parks must not wait behind it); one caller settling rows one after another (an ordered lane) never waits.
// An outcome is not synced either way, so the wait costs its caller latency, never durability.

type outcomeKind uint8

const (
	outcomeComplete outcomeKind = iota + 1
	outcomeReschedule
	outcomeBury
)

// outcomeOp is one queued outcome and, once its group is written, its answer.
type outcomeOp struct {
	kind     outcomeKind
	c        *Claimed
	attempts uint32
	at       int64
	text     string // Reschedule's last error, Bury's reason
	err      error
	// turn receives false when a leader has settled the operation (err is its answer), true when its caller
	// is to lead the next group. Capacity 1: a leader never waits for a caller to wake.
	turn chan bool
}

// recordedOp is a delivered record an outcome group writes: its key, and its value at recBuf[off:end].
type recordedOp struct {
	key      DeliveryKey
	off, end int
}

// DefaultOutcomeInterval is the least time between two paced outcome groups (Options.OutcomeInterval).
const DefaultOutcomeInterval = time.Millisecond

// maxOutcomeGroup is the queue length at which a paced leader stops waiting.
const maxOutcomeGroup = 256

// outcomeQueue holds the outcomes waiting for a group. mu guards queue, spare and leading and is a leaf: it
// is taken alone or under cmu, and nothing is taken under it.
type outcomeQueue struct {
	mu      sync.Mutex
	queue   []*outcomeOp
	spare   []*outcomeOp // the drained group's slice, reused as the next queue
	leading bool         // a caller is leading a group (or about to): the queue is its to drain
	ops     sync.Pool    // *outcomeOp, each with its turn channel

	// Pacing: interval (< 0: none) is set at open; last is when the last group was taken (under mu);
	// attempting counts the attempts running (BeginAttempt, EndAttempt); hurry ends a leader's wait
	// (capacity 1); timer is the waiting leader's (one leader at a time).
	interval   time.Duration
	last       time.Time
	groups     uint64 // groups taken since open (under mu), for tests
	attempting atomic.Int64
	hurry      chan struct{}
	timer      *time.Timer

	// Under cmu: the inflight keys settled and the delivery rows deleted by the group being built, which its
	// later operations must see although the batch is not written yet.
	settled map[InflightKey]struct{}
	deleted map[DeliveryKey]struct{}
	// rows walks the group's iterator over the deliveries CF (otherDeliveryLocked); its iterator is nil until
	// the group needs it. A group's outcomes mostly come in claim order, so their rows mostly follow each other.
	rows cursor
	// arch walks the group's iterator over the archive obligations (archivedLocked), freed by archDone.
	arch     cursor
	archDone func()
	// recorded are the delivered records of the group (their values in recBuf), put when the group's batch is
	// complete unless an outcome of the group deleted their hook (gone); found are the stored records of the
	// hook otherDeliveryLocked last walked (every one of them when it found no other row), which the outcome
	// that deletes the hook deletes.
	recorded []recordedOp
	recBuf   []byte
	gone     map[uint64]struct{}
	found    []DeliveryKey
	// unmarked are the seqs whose claim markers the group deletes, dropped from db.markers once it is written.
	unmarked []uint64
}

func (q *outcomeQueue) get(kind outcomeKind, c *Claimed) *outcomeOp {
	op, _ := q.ops.Get().(*outcomeOp)
	if op == nil {
		op = &outcomeOp{turn: make(chan bool, 1)}
	}
	op.kind, op.c = kind, c
	return op
}

func (q *outcomeQueue) put(op *outcomeOp) {
	turn := op.turn
	*op = outcomeOp{turn: turn}
	q.ops.Put(op)
}

// settleOutcome queues op and returns its answer once the group holding it is written (or refused).
func (db *DB) settleOutcome(op *outcomeOp) error {
	q := &db.oq
	q.mu.Lock()
	q.queue = append(q.queue, op)
	lead := !q.leading
	q.leading = true
	hurry := !lead && (op.kind != outcomeComplete || len(q.queue) >= maxOutcomeGroup ||
		int64(len(q.queue)) >= q.attempting.Load())
	q.mu.Unlock()
	if hurry && q.hurry != nil {
		select {
		case q.hurry <- struct{}{}:
		default:
		}
	}
	if lead || <-op.turn {
		db.leadOutcomes(op)
	}
	err := op.err
	q.put(op)
	return err
}

// leadOutcomes settles every queued operation (self's among them) in one batch, answers the others and hands
// leadership to the first operation queued since, if any.
func (db *DB) leadOutcomes(self *outcomeOp) {
	q := &db.oq
	if self.kind == outcomeComplete {
		db.paceOutcomes()
	}
	db.cmu.Lock()
	q.mu.Lock()
	group := q.queue
	q.queue = q.spare[:0]
	q.last = time.Now()
	q.groups++
	q.mu.Unlock()
	db.settleGroupLocked(group)
	db.cmu.Unlock()
	for i, op := range group {
		if op != self {
			op.turn <- false // op belongs to its caller from here on
		}
		group[i] = nil
	}
	q.mu.Lock()
	q.spare = group[:0]
	var next *outcomeOp
	if len(q.queue) > 0 {
		next = q.queue[0]
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	if next != nil {
		next.turn <- true
	}
}

// BeginAttempt tells the store a delivery attempt whose outcome it will settle has started; EndAttempt, after
// that outcome was settled (or given up), that it has ended. The count paces the outcome groups; calls that
// do not pair up cost at most a wait of the interval per group.
func (db *DB) BeginAttempt() { db.oq.attempting.Add(1) }

// EndAttempt: see BeginAttempt.
func (db *DB) EndAttempt() { db.oq.attempting.Add(-1) }

// paceOutcomes waits, while running attempts have not queued their outcomes, until the interval since the last
// group was taken has passed or a hurry comes.
func (db *DB) paceOutcomes() {
	q := &db.oq
	if q.interval <= 0 {
		return
	}
	q.mu.Lock()
	wait := q.interval - time.Since(q.last)
	queued := len(q.queue)
	q.mu.Unlock()
	if wait <= 0 || queued >= maxOutcomeGroup || int64(queued) >= q.attempting.Load() {
		return
	}
	if q.timer == nil {
		q.timer = time.NewTimer(wait)
	} else {
		q.timer.Reset(wait)
	}
	select {
	case <-q.timer.C:
	case <-q.hurry:
		q.timer.Stop()
	}
}

// settleGroupLocked builds, writes and applies the batch of group (under cmu), setting every operation's err:
// its own refusal (ErrNotClaimed, a failed read), else the write's error, else nil. The batch is not synced:
// an outcome lost in a crash leaves its row claimed, and RecoverInflight delivers it again.
func (db *DB) settleGroupLocked(group []*outcomeOp) {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		for _, op := range group {
			op.err = ErrClosed
		}
		return
	}
	q := &db.oq
	if q.settled == nil {
		q.settled = make(map[InflightKey]struct{})
		q.deleted = make(map[DeliveryKey]struct{})
		q.gone = make(map[uint64]struct{})
	}
	clear(q.settled)
	clear(q.deleted)
	clear(q.gone)
	q.recorded, q.recBuf, q.unmarked = q.recorded[:0], q.recBuf[:0], q.unmarked[:0]
	defer func() {
		if q.rows.it != nil {
			q.rows.it.Close()
			q.rows.it, q.rows.set = nil, false
		}
		if q.archDone != nil {
			q.archDone()
			q.arch.it, q.arch.set, q.archDone = nil, false, nil
		}
	}()
	db.ed.reset()
	wb := db.owb
	wb.Clear()
	// In key order, each CF's keys of the group enter its skip list next to the previous one (a search from
	// the top costs several times more), and the group's walk over the delivery rows steps instead of seeking.
	// Operations on one row keep their order, so the first of two settles it.
	slices.SortStableFunc(group, func(a, b *outcomeOp) int {
		return cmp.Or(cmp.Compare(a.c.Seq, b.c.Seq), cmp.Compare(a.c.Sink, b.c.Sink))
	})
	n, wake := 0, false
	for _, op := range group {
		if op.err = db.addOutcomeLocked(wb, op); op.err == nil {
			n++
			wake = wake || op.kind == outcomeReschedule
		}
	}
	if n == 0 {
		return
	}
	dels := db.cfs[cfDeliveries]
	for _, r := range q.recorded {
		if _, gone := q.gone[r.key.Seq]; !gone {
			db.okey = r.key.AppendDelivered(db.okey[:0])
			wb.PutCF(dels, db.okey, q.recBuf[r.off:r.end])
		}
	}
	db.putCountersLocked(wb)
	if err := db.rdb.Write(db.woAsync, wb); err != nil {
		werr := &WriteError{Class: classify(err), Err: err}
		for _, op := range group {
			if op.err == nil {
				op.err = werr
			}
		}
		return
	}
	db.applyEditsLocked(nil)
	for fk := range q.settled {
		delete(db.inflight, fk)
	}
	for _, seq := range q.unmarked {
		delete(db.markers, seq)
	}
	if wake {
		db.wake()
	}
}

// addOutcomeLocked adds op to wb and its tenant's edit (under cmu), or changes nothing and returns why not. It
// checks that op's row is still claimed (db.inflight, without a read) and not settled earlier in the group,
// and reads everything it needs before it writes, so a refused operation leaves no trace in the batch.
func (db *DB) addOutcomeLocked(wb *grocksdb.WriteBatch, op *outcomeOp) error {
	q := &db.oq
	c := op.c
	fk := InflightKey{Ord: c.Ord, Seq: c.Seq, Sink: c.Sink}
	if _, done := q.settled[fk]; done {
		return fmt.Errorf("delivery %d/%d: %w", c.Seq, c.Sink, ErrNotClaimed)
	}
	if _, claimed := db.inflight[fk]; !claimed {
		return fmt.Errorf("delivery %d/%d: %w", c.Seq, c.Sink, ErrNotClaimed)
	}
	deleteHook := false
	if op.kind == outcomeComplete {
		// Rows deleted earlier in the group count as gone, so of two sinks of one hook completing in one
		// group (or in two) exactly the last one deletes the hook. A row its claim saw alone has nothing to
		// walk: no row or record can have joined it since.
		other := false
		q.found = q.found[:0]
		if !c.sole {
			var err error
			if other, err = db.otherDeliveryLocked(c.Seq, c.Sink); err != nil {
				return err
			}
		}
		if !other {
			archived, err := db.archivedLocked(c.Seq)
			if err != nil {
				return err
			}
			deleteHook = !archived
		}
	}

	index := db.cfs[cfIndex]
	db.okey = fk.Append(db.okey[:0])
	wb.DeleteCF(index, db.okey)
	q.settled[fk] = struct{}{}
	e := db.editLocked(c.Ord)
	e.counts.inflight--
	switch op.kind {
	case outcomeComplete:
		dels := db.cfs[cfDeliveries]
		dk := DeliveryKey{Seq: c.Seq, Sink: c.Sink}
		db.okey = dk.Append(db.okey[:0])
		wb.DeleteCF(dels, db.okey)
		q.deleted[dk] = struct{}{}
		if deleteHook {
			wb.DeleteCF(db.cfs[cfHooks], AppendHookKey(db.okey[:0], c.Seq))
			if _, marked := db.markers[c.Seq]; marked {
				wb.DeleteCF(index, AppendClaimKey(db.okey[:0], c.Seq)) // the marker goes with its hook
				q.unmarked = append(q.unmarked, c.Seq)
			}
			// And so do the records of its sinks delivered before (nobody can find them without it): those
			// stored, and those of this group, which are not written.
			for _, k := range q.found {
				wb.DeleteCF(dels, k.AppendDelivered(db.okey[:0]))
			}
			q.gone[c.Seq] = struct{}{}
			break
		}
		// The hook stays (an archive obligation or another sink holds it): its page shows how this sink got
		// its hook. One more put in the batch the row's deletion is in, no read; put when the group is built.
		off := len(q.recBuf)
		q.recBuf = appendDeliveredOf(q.recBuf, c)
		q.recorded = append(q.recorded, recordedOp{key: dk, off: off, end: len(q.recBuf)})
	case outcomeReschedule:
		row := c.Row
		row.State, row.Attempts, row.DueAt, row.LastError = StateScheduled, op.attempts, op.at, op.text
		if c.Last.Number != 0 {
			row.History = withAttempt(row.History, c.Last)
		}
		db.putRow(wb, c.Seq, c.Sink, &row)
		db.okey = DueKey{Ord: c.Ord, At: op.at, Seq: c.Seq, Sink: c.Sink}.Append(db.okey[:0])
		db.oval = AppendIndexValue(db.oval[:0], c.Size)
		wb.PutCF(index, db.okey, db.oval)
		e.dueWritten(db.okey)
		e.counts.scheduled++
		e.counts.pendingBytes += int64(c.Size)
	case outcomeBury:
		row := c.Row
		row.State, row.Attempts, row.DeadReason, row.DeadAt = StateDead, op.attempts, op.text, op.at
		if c.Last.Number != 0 {
			row.History = withAttempt(row.History, c.Last)
		}
		db.putRow(wb, c.Seq, c.Sink, &row)
		db.okey = DeadKey{Ord: c.Ord, At: op.at, Seq: c.Seq, Sink: c.Sink}.Append(db.okey[:0])
		db.oval = AppendIndexValue(db.oval[:0], c.Size)
		wb.PutCF(index, db.okey, db.oval)
		e.counts.dead++
	}
	return nil
}

// archivedLocked tells whether hook seq has an archive obligation (under cmu). It walks one iterator per group,
// bounded to the obligations, over the group's seqs in ascending order: where there are none (no storage
// role), the group's first lookup finds the range empty and the others cost no read at all, where a point
// read each cost about as much as the rest of the outcome's reads.
func (db *DB) archivedLocked(seq uint64) (bool, error) {
	q := &db.oq
	if q.arch.it == nil {
		it, done := db.boundedIter(cfIndex, []byte{IndexArchive}, []byte{IndexArchive + 1})
		q.arch = cursor{it: it, key: q.arch.key, from: q.arch.from, prev: q.arch.prev}
		q.archDone = done
	}
	c := &q.arch
	c.key = AppendArchiveKey(c.key[:0], seq)
	if c.find(c.key) {
		return true, nil
	}
	if err := c.it.Err(); err != nil {
		return false, fmt.Errorf("cannot read the archive obligation of hook %d: %w", seq, err)
	}
	return false, nil
}

// appendDeliveredOf appends the delivered record of c: its row's history with the final attempt c.Last (when
// dispatch set one) appended, built on the stack rather than through withAttempt's new slice.
func appendDeliveredOf(dst []byte, c *Claimed) []byte {
	r := &c.Row
	var buf [MaxHistory]Attempt
	h := r.History
	attempts := r.Attempts
	if c.Last.Number != 0 {
		h = append(buf[:0], h[max(0, len(h)-(MaxHistory-1)):]...)
		last := c.Last
		last.Error = cutError(last.Error)
		h = append(h, last)
		attempts = max(attempts+1, last.Number)
	}
	dst = append(dst, deliveredVersion)
	dst = appendStr(dst, r.SinkType)
	dst = binary.BigEndian.AppendUint32(dst, attempts)
	dst = appendStr(dst, r.ReplayID)
	return appendHistory(dst, h)
}
