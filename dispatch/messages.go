package dispatch

import "github.com/ankusa-go/ankusa/store"

// wake asks the scheduler to scan: a commit made rows due, or a slot freed.
type wake struct{}

// freshClaims carries the rows a commit claimed for dispatch (store.FreshFunc); owner is the incarnation that
// installed the receiver.
type freshClaims struct {
	owner  *scheduler
	claims []store.Claimed
}

// timerFired is the scheduler's sleep ending; gen tells a stale timer from the current one.
type timerFired struct{ gen uint64 }

// housekeeping is the scheduler's periodic tick: idle lanes, gauges.
type housekeeping struct{}

// runAttempt asks a lane to run one attempt of a claimed row.
type runAttempt struct {
	key   sinkKey
	c     store.Claimed
	route route
}

// laneCrashed tells the scheduler a lane crashed on a runAttempt: that attempt never
// started, so its slot and its claim are the scheduler's to give back.
type laneCrashed struct {
	key sinkKey
	c   store.Claimed
}

// outcome is how one attempt settled its row.
type outcome struct {
	result   string // telemetry.Result*
	class    outcomeClass
	attempts uint32
	next     int64 // retry: the row's new due time (unix ms)
	reason   string
}

type outcomeClass uint8

const (
	classOK        outcomeClass = iota // the sink confirmed: row completed
	classPermanent                     // dead-lettered at once; the destination answered
	classTransient                     // retried later (or dead-lettered when the policy gave up)
	classLost                          // the store write failed: the row stays claimed until the next start
)

// attemptDone reports one attempt back to the scheduler.
type attemptDone struct {
	key     sinkKey
	c       store.Claimed
	outcome outcome
}
