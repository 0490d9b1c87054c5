package storage

import (
	"bytes"
	"context"
	"io"
	"time"
)

// paceSlice is how much work the compactor does between two pauses inside one compaction. A compaction of a
// 16 MiB segment works for a few hundred ms (reading the hooks, writing the objects, clearing the obligations);
// done in one stretch it takes one of the node's cores and much of its disk for that long, and every ingest
// commit in the stretch waits behind it (measured at 5,000 hooks/s on two cores: ack p99 37 ms with the
// storage role against 8 ms without). Paused every few ms it leaves ingest room all along.
const paceSlice = 2 * time.Millisecond

// Pacer spreads one compaction's work so that it takes at most percent of the wall time while ingest commits:
// Step, called between small pieces of work, pauses for worked×(100−percent)/percent once the work since the
// last pause reaches paceSlice. It never pauses while active says no (ingest idle, or the archive lagging
// beyond its bounds), nor after ctx is done. A nil *Pacer does nothing.
type Pacer struct {
	ctx     context.Context
	percent int
	active  func() bool
	mark    time.Time     // start of the work not yet paid for by a pause
	slept   time.Duration // paused in all
}

// NewPacer returns a pacer for one compaction; nil when percent is outside 1..99 (not paced).
func NewPacer(ctx context.Context, percent int, active func() bool) *Pacer {
	if percent <= 0 || percent >= 100 {
		return nil
	}
	return &Pacer{ctx: ctx, percent: percent, active: active, mark: time.Now()}
}

// Step pauses when the work since the last pause has reached paceSlice and the pacer is active.
func (p *Pacer) Step() {
	if p == nil {
		return
	}
	worked := time.Since(p.mark)
	if worked < paceSlice {
		return
	}
	if p.active() {
		d := worked * time.Duration(100-p.percent) / time.Duration(p.percent)
		t := time.NewTimer(d)
		select {
		case <-t.C:
			p.slept += d
		case <-p.ctx.Done():
			t.Stop()
		}
	}
	p.mark = time.Now()
}

// Unpaid is the work since the last pause (the whole compaction for a nil pacer, from start).
func (p *Pacer) Unpaid(start time.Time) time.Duration {
	if p == nil {
		return time.Since(start)
	}
	return time.Since(p.mark)
}

// Slept is how long the pacer paused in all.
func (p *Pacer) Slept() time.Duration {
	if p == nil {
		return 0
	}
	return p.slept
}

// pacedReader hands an object's bytes to a blob store with a pace step before each read: the store writes
// them as it reads (LocalFS in 32 KiB reads, starting each MiB's writeback as it goes), so a paced segment
// reaches the disk spread out rather than in one burst that ingest's synced commits queue behind. It seeks
// (a store that must read twice, S3 for its Content-MD5, rewinds it rather than buffering a copy) and
// deliberately has no WriteTo, which would write the whole object in one call.
type pacedReader struct {
	r    *bytes.Reader
	pace *Pacer
}

func (p *pacedReader) Read(b []byte) (int, error) {
	p.pace.Step()
	return p.r.Read(b)
}

func (p *pacedReader) Seek(off int64, whence int) (int64, error) { return p.r.Seek(off, whence) }

// objectReader is b for a blob store's Put, paced when pace is not nil.
func objectReader(b []byte, pace *Pacer) io.Reader {
	if pace == nil {
		return bytes.NewReader(b)
	}
	return &pacedReader{r: bytes.NewReader(b), pace: pace}
}
