package edge

import "sync/atomic"

// partition counts the records and body bytes a batcher partition holds, buffered and
// in flight. Admission is these counters, checked before a record is enqueued; a
// mailbox bound is never the admission control.
type partition struct {
	records atomic.Int64
	bytes   atomic.Int64
	_       [48]byte // keep partitions on separate cache lines
}

// admit reserves room for one record of size bytes, or reports the partition full.
func (p *partition) admit(size, maxRecords, maxBytes int64) bool {
	if p.records.Add(1) > maxRecords {
		p.records.Add(-1)
		return false
	}
	if p.bytes.Add(size) > maxBytes {
		p.bytes.Add(-size)
		p.records.Add(-1)
		return false
	}
	return true
}

// release returns what admit reserved, once the record was answered.
func (p *partition) release(size int64) {
	p.bytes.Add(-size)
	p.records.Add(-1)
}
