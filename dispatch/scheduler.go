package dispatch

import (
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// sinkKey identifies a lane: one sink of one source, for one tenant. Breakers and
// sink_concurrency are per key, so per tenant.
type sinkKey struct {
	ord    uint32
	source string
	sink   uint16
}

// lane is the scheduler's view of one sink key.
type lane struct {
	key     sinkKey
	pid     *actor.PID
	route   route
	queue   []store.Claimed // claimed, not running; ordered lanes keep it sorted by seq (push, pop)
	buf     []store.Claimed // queue's array from its start, reused once the queue is empty
	running int
	breaker breaker
	idle    time.Time        // when it last went idle
	block   *store.LaneBlock // ordered lanes: the head waiting for its retry
	wait    waitSet          // ordered lanes: rows parked and not claimed again yet (waitset.go)
	ready   bool             // listed in its tenant's ready ring
}

// push queues c. An empty queue starts again at the front of its array: popping from the front shrinks the
// slice's capacity, and without the reuse every page of a busy lane was appended into a new array.
func (l *lane) push(c store.Claimed) {
	if len(l.queue) == 0 {
		l.queue = l.buf[:0]
	}
	full := len(l.queue) == cap(l.queue)
	l.queue = append(l.queue, c)
	if full { // append moved the queue to a new array, which starts at its head
		clear(l.buf[:cap(l.buf)]) // the old array's copies of the queued rows must not keep their hooks alive
		l.buf = l.queue[:0]
	}
}

// pop takes the head off the queue, clearing its slot so the array does not keep its hook alive.
func (l *lane) pop() store.Claimed {
	c := l.queue[0]
	l.queue[0] = store.Claimed{}
	l.queue = l.queue[1:]
	return c
}

// tenant is the scheduler's view of one tenant with work.
type tenant struct {
	ord          uint32
	name         string
	win          config.TenantWindow
	claimed      int
	claimedBytes int64
	running      int
	ready        []*lane // lanes with queued rows, served round-robin
	next         int
	listed       bool      // in the scheduler's slot ring
	seen         time.Time // last claim or outcome
}

// scheduler claims due rows and hands running slots out; see the package doc.
type scheduler struct {
	d    *Dispatcher
	db   Store
	self *actor.PID // for the lanes' supervision (HandleFailure)

	tenants map[uint32]*tenant
	lanes   map[sinkKey]*lane
	slots   []*tenant // tenants with queued rows, served round-robin
	slotAt  int
	cursor  uint32 // the tenant the last claim page did not reach goes first next time

	running, claimed int
	claimedBytes     int64

	timerGen uint64
	timer    *time.Timer
	timerAt  time.Time
	scanDue  bool
	tasks    *task.Group // this incarnation's wake-ups and attempts (also d.tasks)
	active   []uint32
	plan     *claimPlan // the claim page, reused
	claiming bool       // a claim page is out
	rescan   bool       // a scan was asked for while it was out

	// Fresh claims (store/fresh.go): backlog is set while the last claim page left due rows behind, and then
	// nothing is granted, so the due rows keep their turn by deficit round-robin. freshRows and freshBytes count
	// what this incarnation received; atCap holds the tenants holding their claim cap, which no grant includes.
	backlog    bool
	freshRows  int
	freshBytes int64
	atCap      map[uint32]struct{}
	full       []uint32
	decide     func(outRows int, outBytes int64) store.FreshGrant
}

// NewSchedulerProps returns the scheduler's props.
func NewSchedulerProps(d *Dispatcher) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &scheduler{d: d} })
}

func (s *scheduler) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case wake:
		s.scanDue = false
		s.scan(ctx)
	case timerFired:
		if m.gen == s.timerGen {
			s.timerAt = time.Time{}
			s.scan(ctx)
		}
	case *claimPlan:
		s.pageClaimed(ctx, m)
	case *freshClaims:
		s.freshArrived(ctx, m)
	case *attemptDone:
		s.done(ctx, m)
	case *laneCrashed:
		s.laneCrashed(ctx, m)
	case housekeeping:
		s.housekeeping(ctx)
	case *actor.Stopping, *actor.Restarting:
		s.shutdown()
	}
}

// start rebuilds everything from the store: a restarted scheduler needs nothing from
// its predecessor. Rows claimed before a crash are due again.
func (s *scheduler) start(ctx actor.Context) {
	s.db = s.d.db()
	if s.db == nil {
		panic("dispatch: store is not open")
	}
	s.self = ctx.Self()
	s.tenants, s.lanes, s.atCap = map[uint32]*tenant{}, map[sinkKey]*lane{}, map[uint32]struct{}{}
	s.decide = s.grant
	// The receiver goes in before the recovery: rows a predecessor was handed and never ran are due again below,
	// and its messages still queued are ignored (freshArrived).
	s.installFresh(ctx)
	n, err := s.db.RecoverInflight()
	if err != nil {
		panic(err)
	}
	if n > 0 {
		s.d.log.Info().Int("rows", n).Msg("claimed rows from before the restart are due again")
	}
	blocks, err := s.db.LaneBlocks()
	if err != nil {
		panic(err)
	}
	for k, b := range blocks {
		r, ok := s.d.route(k.Source, k.Sink)
		if !ok {
			continue
		}
		l := s.lane(ctx, sinkKey{ord: k.Ord, source: k.Source, sink: k.Sink}, r)
		blk := b
		l.block = &blk
	}
	s.tasks = &task.Group{}
	s.d.tasks.Store(s.tasks)
	s.d.workers.Store(startWorkers(s.tasks, 2*s.d.set.Concurrency)) // twice: a worker settles its outcome after its slot is freed
	self, root, notify := ctx.Self(), ctx.ActorSystem().Root, s.db.Notify()
	s.tasks.Go(func(stop <-chan struct{}) {
		for {
			select {
			case <-notify:
				root.Send(self, wake{})
			case <-stop:
				return
			}
		}
	})
	s.tasks.Every(time.Second, func() { root.Send(self, housekeeping{}) })
	ctx.Send(self, wake{})
}

// shutdown stops the wake-ups and waits for running attempts, whose outcomes are
// written by their own tasks: a restarted scheduler then finds every row settled or
// still claimed, never half-written.
func (s *scheduler) shutdown() {
	if s.db != nil {
		s.db.SetFresh(nil, nil)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.tasks != nil {
		s.tasks.Stop()
		s.tasks = nil
	}
}

func (s *scheduler) tenant(ord uint32) *tenant {
	t, ok := s.tenants[ord]
	if !ok {
		name, _ := s.db.TenantName(ord)
		t = &tenant{ord: ord, name: name, win: s.d.set.Tenants[name]}
		s.tenants[ord] = t
	}
	return t
}

func (s *scheduler) lane(ctx actor.Context, k sinkKey, r route) *lane {
	l, ok := s.lanes[k]
	if !ok {
		// Lane names never repeat within the instance: a restarted scheduler must not
		// collide with its predecessor's lanes that are still stopping.
		pid, err := ctx.SpawnNamed(newLaneProps(s.d, k, ctx.Self()), "lane-"+strconv.FormatUint(s.d.laneSeq.Add(1), 10))
		if err != nil {
			panic(err)
		}
		l = &lane{key: k, pid: pid, route: r, idle: s.d.now(),
			breaker: breaker{failures: s.d.set.BreakerFailures, openFor: s.d.set.BreakerOpen, maxOpen: s.d.set.BreakerMaxOpen}}
		s.lanes[k] = l
	}
	return l
}

// claimCap is how many rows a tenant may hold claimed: its window, else enough to keep
// every slot busy; a tenant never hoards rows it cannot run soon.
func (s *scheduler) claimCap(t *tenant) int {
	if t.win.MaxInflight > 0 {
		return t.win.MaxInflight
	}
	return max(s.d.set.Batch, 2*s.d.set.Concurrency)
}

// scan claims due rows by deficit round-robin over the tenants with work due, hands out
// slots, and sleeps until the earliest row due later. Its cost is the tenants with work
// due: one seek each, whatever the backlog.
//
// The claim itself runs in a task, off the scheduler's goroutine: a page of rows takes
// about as long to claim as a running attempt takes to answer, and the attempts that
// answer meanwhile must get their next rows at once, not after the page (measured: with
// the claim inline a third of the scheduler's time went to claiming, and that much of
// the slots' time went idle waiting for it). One claim runs at a time; a scan asked for
// meanwhile runs when it returns.
func (s *scheduler) scan(ctx actor.Context) {
	if s.claiming {
		s.rescan = true
		return
	}
	nowMS := s.d.now().UnixMilli()
	s.active = s.db.ActiveTenants(s.active[:0])
	slices.Sort(s.active)
	// Rotate so the tenant the last page did not reach comes first.
	start, _ := slices.BinarySearch(s.active, s.cursor)
	order := append(s.active[start:len(s.active):len(s.active)], s.active[:start]...)

	page := min(s.d.set.Batch, s.d.set.MaxInflight-s.claimed)
	if page <= 0 || len(order) == 0 {
		s.backlog = page <= 0 && len(order) > 0
		s.pump(ctx)
		s.regrant()
		return
	}
	p := s.plan
	if p == nil {
		p = &claimPlan{owner: s}
		s.plan = p
	}
	p.nowMS, p.page, p.bytesRoom, p.reached, p.wakeAt = nowMS, page, s.d.set.MaxInflightBytes-s.claimedBytes, 0, 0
	p.reqs = p.reqs[:0]
	for _, ord := range order {
		t := s.tenant(ord)
		r := claimReq{ord: ord, name: t.name, capLeft: s.claimCap(t) - t.claimed, tenantRoom: -1}
		if t.win.MaxInflightBytes > 0 {
			r.tenantRoom = t.win.MaxInflightBytes - t.claimedBytes
		}
		p.reqs = append(p.reqs, r)
	}
	db, log, self, root := s.db, s.d.log, ctx.Self(), ctx.ActorSystem().Root
	s.claiming = true
	if !s.tasks.Go(func(<-chan struct{}) {
		p.run(db, log)
		root.Send(self, p)
	}) {
		s.claiming = false // stopping: nothing is claimed
	}
}

// claimPlan is one scan's claim: what the scheduler may take per tenant, run by a task
// (claimPlan.run), and what it took, handed back to the scheduler as a message. The
// scheduler reuses it, so its buffers outlive the page; only one is out at a time.
type claimPlan struct {
	owner     *scheduler // the incarnation that asked: a restarted scheduler ignores its predecessor's
	nowMS     int64
	page      int   // rows the page may take over every tenant
	bytesRoom int64 // body bytes the node may still claim
	reqs      []claimReq
	claims    []store.Claimed
	reached   int   // tenants the page reached
	wakeAt    int64 // the earliest due time after nowMS of a tenant that had less due than it was offered
}

// claimReq is one tenant's part of a claim page.
type claimReq struct {
	ord        uint32
	name       string
	capLeft    int   // rows it may still hold claimed
	tenantRoom int64 // body bytes it may still hold claimed; < 0: no window of its own
	spans      [][2]int
	hungry     bool // took all it was offered in the first pass
}

// run claims the page: by deficit round-robin, each tenant in turn its share, then what
// a tenant with less than its share left to those that took all of theirs.
func (p *claimPlan) run(db Store, log zerolog.Logger) {
	page := p.page
	share := max(1, page/len(p.reqs))
	for i := range p.reqs {
		if page == 0 {
			break
		}
		p.reached++
		r := &p.reqs[i]
		want := min(share, page, r.capLeft)
		if want <= 0 {
			continue
		}
		got := p.claim(db, log, r, want)
		page -= got
		if got == want {
			r.hungry = true
		} else if at, ok, err := db.NextDue(r.ord); err == nil && ok && at > p.nowMS && (p.wakeAt == 0 || at < p.wakeAt) {
			p.wakeAt = at
		}
	}
	for i := range p.reqs[:p.reached] {
		if page == 0 {
			break
		}
		if r := &p.reqs[i]; r.hungry {
			if want := min(page, r.capLeft); want > 0 {
				page -= p.claim(db, log, r, want)
			}
		}
	}
}

// claim takes up to want due rows of r's tenant into p.claims; it returns how many.
func (p *claimPlan) claim(db Store, log zerolog.Logger, r *claimReq, want int) int {
	room := p.bytesRoom
	if r.tenantRoom >= 0 {
		room = min(room, r.tenantRoom)
	}
	if room <= 0 {
		return 0
	}
	from := len(p.claims)
	var err error
	p.claims, err = db.ClaimDue(r.ord, p.nowMS, want, room, p.claims)
	if err != nil {
		log.Error().Err(err).Str("tenant", r.name).Msg("cannot claim due rows")
		return 0
	}
	n := len(p.claims) - from
	if n == 0 {
		return 0
	}
	var bytes int64
	for _, c := range p.claims[from:] {
		bytes += int64(c.Size)
	}
	p.bytesRoom -= bytes
	if r.tenantRoom >= 0 {
		r.tenantRoom -= bytes
	}
	r.capLeft -= n
	r.spans = append(r.spans, [2]int{from, len(p.claims)})
	return n
}

// pageClaimed takes a claim page back from its task: its rows go to their lanes' queues,
// the slots are handed out, and the scheduler sleeps until the earliest row due later.
func (s *scheduler) pageClaimed(ctx actor.Context, p *claimPlan) {
	if p.owner != s {
		return // a predecessor's page: this incarnation's start made its rows due again
	}
	s.claiming = false
	for i := range p.reqs[:p.reached] {
		r := &p.reqs[i]
		if len(r.spans) == 0 {
			continue
		}
		t := s.tenant(r.ord)
		t.seen = s.d.now()
		for _, sp := range r.spans {
			s.take(ctx, t, p.nowMS, p.claims[sp[0]:sp[1]])
		}
	}
	s.backlog = p.reached < len(p.reqs)
	for i := range p.reqs[:p.reached] {
		s.backlog = s.backlog || p.reqs[i].hungry
	}
	if p.reached < len(p.reqs) {
		s.cursor = p.reqs[p.reached].ord
	} else {
		s.cursor = p.reqs[0].ord + 1
	}
	clear(p.claims) // the lanes' queues hold the rows now, and with them their hooks
	p.claims = p.claims[:0]
	s.pump(ctx)
	s.regrant()
	s.sleepUntil(ctx, p.wakeAt)
	if s.rescan {
		s.rescan = false
		s.scan(ctx)
	}
}

// take moves claimed rows of t into their lanes' queues.
func (s *scheduler) take(ctx actor.Context, t *tenant, nowMS int64, claims []store.Claimed) {
	for i := range claims {
		c := &claims[i] // not a copy: Bury takes its address, which would move every row's copy to the heap
		s.claimed++
		s.claimedBytes += int64(c.Size)
		t.claimed++
		t.claimedBytes += int64(c.Size)
		if t.claimed == s.claimCap(t) {
			s.atCap[t.ord] = struct{}{}
		}
		r, ok := s.d.route(c.Row.Source, c.Sink)
		if !ok {
			// The source or its sink is gone from the config: dead-letter, never drop.
			reason := "{sink_gone, " + strconv.Itoa(int(c.Sink)) + ", " + c.Row.SinkType + "}"
			if !s.d.sourceKnown(c.Row.Source) {
				reason = store.SourceGoneReason(c.Row.Source) // deleted while the row waited or was in flight
			}
			if err := s.db.Bury(c, c.Row.Attempts, reason, nowMS); err != nil {
				s.d.log.Error().Err(err).Msg("cannot bury a row whose sink is gone")
			}
			s.release(t, c)
			continue
		}
		l := s.lane(ctx, sinkKey{ord: t.ord, source: c.Row.Source, sink: c.Sink}, r)
		if r.ordered {
			l.wait.back(c.Seq)
		}
		l.push(*c)
		if r.ordered && len(l.queue) > 1 && l.queue[len(l.queue)-2].Seq > c.Seq {
			slices.SortFunc(l.queue, func(a, b store.Claimed) int { return cmpSeq(a.Seq, b.Seq) })
		}
		s.markReady(t, l)
	}
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *scheduler) markReady(t *tenant, l *lane) {
	if !l.ready {
		l.ready = true
		t.ready = append(t.ready, l)
	}
	if !t.listed {
		t.listed = true
		s.slots = append(s.slots, t)
	}
}

// release gives back what a claimed row held.
func (s *scheduler) release(t *tenant, c *store.Claimed) {
	s.claimed--
	s.claimedBytes -= int64(c.Size)
	t.claimed--
	t.claimedBytes -= int64(c.Size)
	if t.claimed == s.claimCap(t)-1 {
		delete(s.atCap, t.ord)
	}
}

// tenantRunCap is how many slots t may hold now: its window's concurrency, and never
// so many that another tenant would find no free slot when its next hook arrives: one
// slot per other recently active tenant, and always at least one for a tenant not seen
// yet, up to half the slots. This is what keeps a light tenant's lag flat behind a
// heavy tenant whose sink is slow; a lone tenant gives up one slot for it.
func (s *scheduler) tenantRunCap(t *tenant) int {
	c := s.d.set.Concurrency
	if t.win.Concurrency > 0 {
		c = min(c, t.win.Concurrency)
	}
	if others := min(max(len(s.tenants)-1, 1), s.d.set.Concurrency/2); others > 0 {
		c = min(c, max(1, s.d.set.Concurrency-others))
	}
	return c
}

func (s *scheduler) laneRunCap(l *lane) int {
	if l.route.ordered {
		return 1
	}
	if s.d.set.SinkConcurrency > 0 {
		return s.d.set.SinkConcurrency
	}
	return s.d.set.Concurrency
}

// pump hands free slots round-robin across tenants, then across a tenant's lanes.
func (s *scheduler) pump(ctx actor.Context) {
	now := s.d.now()
	misses := 0
	for s.running < s.d.set.Concurrency && len(s.slots) > 0 && misses < len(s.slots) {
		if s.slotAt >= len(s.slots) {
			s.slotAt = 0
		}
		t := s.slots[s.slotAt]
		if t.running >= s.tenantRunCap(t) || !s.startOne(ctx, t, now) {
			misses++
			s.slotAt++
		} else {
			misses = 0
			s.slotAt++
		}
		s.compactSlots()
	}
}

// compactSlots drops tenants with nothing queued from the slot ring.
func (s *scheduler) compactSlots() {
	kept := s.slots[:0]
	for _, t := range s.slots {
		if len(t.ready) > 0 {
			kept = append(kept, t)
		} else {
			t.listed = false
		}
	}
	clear(s.slots[len(kept):])
	s.slots = kept
}

// startOne starts the next runnable row of t's lanes; false when none can start now.
func (s *scheduler) startOne(ctx actor.Context, t *tenant, now time.Time) bool {
	for tries := 0; tries < len(t.ready); tries++ {
		if t.next >= len(t.ready) {
			t.next = 0
		}
		l := t.ready[t.next]
		t.next++
		if l.running >= s.laneRunCap(l) {
			continue
		}
		if ok, until := l.breaker.allow(now); !ok {
			s.parkLane(t, l, until, "breaker_open")
			continue
		}
		c, ok := s.nextOf(t, l, now)
		if !ok {
			l.breaker.aborted()
			continue
		}
		l.running++
		t.running++
		s.running++
		ctx.Send(l.pid, &runAttempt{key: l.key, c: c, route: l.route})
		s.tidy(t, l)
		return true
	}
	s.tidy(t, nil)
	return false
}

// nextOf pops the row l runs next. An ordered lane runs only its head, and while the
// head waits for its retry every later row of the lane is parked behind it.
func (s *scheduler) nextOf(t *tenant, l *lane, now time.Time) (store.Claimed, bool) {
	for len(l.queue) > 0 {
		if l.block != nil && l.queue[0].Seq != l.block.Seq {
			s.parkIn(t, l, &l.queue[0], max(l.block.Until, now.UnixMilli())+1, "lane_blocked")
			l.pop()
			continue
		}
		// The block's own row always runs: the lane is waiting for it, and holding it back too would stall the lane.
		if seq, due, ok := l.wait.first(); ok && l.block == nil && seq < l.queue[0].Seq {
			// An earlier row of the lane is parked: the head comes back after it.
			s.parkIn(t, l, &l.queue[0], max(due, now.UnixMilli())+1, "lane_blocked")
			l.pop()
			continue
		}
		return l.pop(), true
	}
	return store.Claimed{}, false
}

// parkLane puts every queued row of l back as due at until, attempts unchanged: an open
// breaker spends no attempts and holds no slots, and a crashed lane's rows wait for its head.
func (s *scheduler) parkLane(t *tenant, l *lane, until time.Time, why string) {
	for i := range l.queue {
		s.parkIn(t, l, &l.queue[i], until.UnixMilli(), why)
	}
	clear(l.queue)
	l.queue = l.queue[:0]
}

func (s *scheduler) park(t *tenant, c *store.Claimed, at int64, why string) bool {
	if err := s.db.Reschedule(c, c.Row.Attempts, at, why); err != nil {
		s.d.log.Error().Err(err).Uint64("seq", c.Seq).Msg("cannot park a row")
		return false // it stays claimed in the store; the next start makes it due
	}
	s.d.tel.Parked(c.Row.SinkType)
	// Reschedule wakes the scheduler through the store's notification; the scan that
	// follows finds the parked row's due time and sleeps until it.
	s.release(t, c)
	return true
}

// parkIn parks c, a row of lane l (nil: a lane already gone); an ordered lane remembers it until it is claimed
// again, and runs no later row before it.
func (s *scheduler) parkIn(t *tenant, l *lane, c *store.Claimed, at int64, why string) {
	if s.park(t, c, at, why) && l != nil && l.route.ordered {
		l.wait.add(c.Seq, at)
	}
}

// tidy removes lanes with nothing queued from t's ready ring.
func (s *scheduler) tidy(t *tenant, _ *lane) {
	kept := t.ready[:0]
	for _, l := range t.ready {
		if len(l.queue) > 0 {
			kept = append(kept, l)
		} else {
			l.ready = false
		}
	}
	clear(t.ready[len(kept):])
	t.ready = kept
}

// A lane crashing more than laneCrashBudget times within laneCrashWindow crashes the
// scheduler (its supervisor's backoff and budget take over) instead of looping.
const (
	laneCrashBudget = 10
	laneCrashWindow = 10 * time.Second
)

// HandleFailure is the scheduler's supervision of its lanes (protoactor asks the parent
// actor first): a lane that crashed on a runAttempt dropped it before the attempt
// started, so the scheduler is told to give the row back, and the lane is restarted (it
// holds no state). Without this the row would stay claimed and its slot taken until the
// next start of the scheduler.
func (s *scheduler) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	rs.Fail()
	if rs.NumberOfFailures(laneCrashWindow) > laneCrashBudget {
		// The restarted scheduler finds the dropped row still claimed and makes it due again.
		rs.Reset()
		sup.EscalateFailure(reason, message)
		return
	}
	s.d.log.Warn().Str("lane", child.Id).Interface("reason", reason).Msg("dispatch lane crashed; restarting it")
	if m, ok := actor.UnwrapEnvelopeMessage(message).(*runAttempt); ok && s.self != nil {
		sys.Root.Send(s.self, &laneCrashed{key: m.key, c: m.c})
	}
	sup.RestartChildren(child)
}

// laneCrashed frees the slot of an attempt a crashed lane never started and puts its row
// back as due now, attempts unchanged. An ordered lane's queued rows go back with it, and
// the lane is blocked on its head as for a retry: the parked head reaches the due index
// only with the next outcome group, and a scan meanwhile finds the lane's later rows
// alone, which the block parks behind the head instead of running them first.
func (s *scheduler) laneCrashed(ctx actor.Context, m *laneCrashed) {
	now := s.d.now()
	t := s.tenant(m.key.ord)
	s.running--
	t.running--
	l := s.lanes[m.key]
	if l != nil {
		l.running--
		if l.route.ordered {
			if l.block == nil || l.block.Seq != m.c.Seq {
				s.blockLane(l, m.key, store.LaneBlock{Seq: m.c.Seq, Until: now.UnixMilli()})
			}
			s.parkLane(t, l, now, "lane_crashed")
		}
		if l.running == 0 && len(l.queue) == 0 {
			l.idle = now
		}
	}
	s.parkIn(t, l, &m.c, now.UnixMilli(), "lane_crashed")
	s.pump(ctx)
}

// done takes an attempt's outcome: frees its slot and claim, drives the breaker and the
// ordered lane's block, and scans again when slots would otherwise go idle.
func (s *scheduler) done(ctx actor.Context, m *attemptDone) {
	now := s.d.now()
	t := s.tenant(m.key.ord)
	l := s.lanes[m.key]
	s.running--
	t.running--
	t.seen = now
	s.release(t, &m.c)
	if l != nil {
		l.running--
		if l.running == 0 && len(l.queue) == 0 {
			l.idle = now
		}
		s.afterAttempt(t, l, m, now)
	}
	if s.claimed-s.running < s.d.set.Concurrency && !s.scanDue {
		s.scanDue = true
		ctx.Send(ctx.Self(), wake{})
	}
	s.pump(ctx)
	s.regrant()
}

// freshArrived takes the rows a commit claimed for this incarnation into their lanes, as a claim page's. A row
// its tenant cannot hold (its claim cap or its window's bytes; the grant leaves out only tenants already at the
// cap) goes back as due at once, attempts unchanged. A predecessor's rows are not this incarnation's: its start
// made them due again.
func (s *scheduler) freshArrived(ctx actor.Context, m *freshClaims) {
	if m.owner != s {
		return
	}
	now := s.d.now()
	nowMS := now.UnixMilli()
	for i := range m.claims {
		c := &m.claims[i]
		s.freshRows++
		s.freshBytes += int64(c.Size)
		t := s.tenant(c.Ord)
		t.seen = now
		if t.claimed >= s.claimCap(t) || (t.win.MaxInflightBytes > 0 && t.claimedBytes+int64(c.Size) > t.win.MaxInflightBytes) {
			if err := s.db.Reschedule(c, c.Row.Attempts, nowMS, c.Row.LastError); err != nil {
				s.d.log.Error().Err(err).Uint64("seq", c.Seq).Msg("cannot give back a fresh row")
				s.take(ctx, t, nowMS, m.claims[i:i+1]) // still claimed: run it rather than strand it
			}
			continue
		}
		s.take(ctx, t, nowMS, m.claims[i:i+1])
	}
	s.d.tel.FreshClaimed(len(m.claims))
	clear(m.claims)
	s.pump(ctx)
	s.regrant()
}

// installFresh makes this incarnation the store's receiver of fresh claims. A tenant with a window of its own is
// never claimed fresh: its window holds exactly, claims included.
func (s *scheduler) installFresh(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	windowed := map[string]struct{}{}
	for name, w := range s.d.set.Tenants {
		if w.MaxInflight > 0 || w.MaxInflightBytes > 0 {
			windowed[name] = struct{}{}
		}
	}
	s.db.SetFresh(func(claims []store.Claimed) { root.Send(self, &freshClaims{owner: s, claims: claims}) }, windowed)
}

// regrant sets what the next commits may claim fresh (grant).
func (s *scheduler) regrant() {
	if s.decide != nil {
		s.db.GrantFresh(s.decide)
	}
}

// grant is what the commits may claim fresh: nothing while due rows wait for a claim page, else a page's worth
// within the node's bounds, less the rows handed out and not received yet, for the tenants below their cap.
func (s *scheduler) grant(outRows int, outBytes int64) store.FreshGrant {
	if s.backlog || s.tasks == nil {
		return store.FreshGrant{}
	}
	set := &s.d.set
	rows := min(set.Batch, set.MaxInflight-s.claimed-(outRows-s.freshRows))
	bytes := set.MaxInflightBytes - s.claimedBytes - (outBytes - s.freshBytes)
	s.full = s.full[:0]
	for ord := range s.atCap {
		s.full = append(s.full, ord)
	}
	return store.FreshGrant{Rows: rows, Bytes: bytes, Full: s.full}
}

func (s *scheduler) afterAttempt(t *tenant, l *lane, m *attemptDone, now time.Time) {
	typ := l.route.typ
	switch m.outcome.class {
	case classOK, classPermanent:
		if l.breaker.success() {
			s.d.tel.Breaker(typ, t.name, m.key.source, "closed")
		}
	case classTransient:
		if l.breaker.failure(now) {
			s.d.tel.Breaker(typ, t.name, m.key.source, "open")
			s.parkLane(t, l, l.breaker.until, "breaker_open")
		}
	case classLost:
		l.breaker.aborted()
	}
	if !l.route.ordered {
		return
	}
	k := store.LaneKey{Ord: m.key.ord, Sink: m.key.sink, Source: m.key.source}
	switch {
	case m.outcome.result == telemetry.ResultRetry:
		b := store.LaneBlock{Seq: m.c.Seq, Until: m.outcome.next}
		s.blockLane(l, m.key, b)
		// Rows already queued behind the head wait for it, holding no slot.
		for len(l.queue) > 0 {
			s.parkIn(t, l, &l.queue[0], b.Until+1, "lane_blocked")
			l.pop()
		}
	case l.block != nil && l.block.Seq == m.c.Seq && m.outcome.class != classLost:
		l.block = nil
		if err := s.db.ClearLaneBlock(k); err != nil {
			s.d.log.Error().Err(err).Msg("cannot clear an ordered lane's block")
		}
	}
}

// blockLane makes the ordered lane l (of key) run only b's row until it is delivered, and records the block
// so a restarted scheduler keeps it.
func (s *scheduler) blockLane(l *lane, key sinkKey, b store.LaneBlock) {
	l.block = &b
	if err := s.db.SetLaneBlock(store.LaneKey{Ord: key.ord, Sink: key.sink, Source: key.source}, b); err != nil {
		s.d.log.Error().Err(err).Msg("cannot record an ordered lane's block")
	}
}

// sleepUntil arms the timer for the earliest row due later (0: none known).
func (s *scheduler) sleepUntil(ctx actor.Context, atMS int64) {
	if atMS == 0 {
		return
	}
	at := time.UnixMilli(atMS)
	if !s.timerAt.IsZero() && !at.Before(s.timerAt) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timerGen++
	gen, self, root := s.timerGen, ctx.Self(), ctx.ActorSystem().Root
	s.timerAt = at
	s.timer = time.AfterFunc(max(time.Until(at), 0), func() { root.Send(self, timerFired{gen: gen}) })
}

// housekeeping stops idle lanes and reports the gauges: counter reads, O(1) in the backlog.
func (s *scheduler) housekeeping(ctx actor.Context) {
	now := s.d.now()
	for k, l := range s.lanes {
		l.wait.expire(now.Add(-waitExpiry * s.d.set.IdleLane))
		if l.running == 0 && len(l.queue) == 0 && l.block == nil && l.wait.empty() && now.Sub(l.idle) >= s.d.set.IdleLane {
			ctx.Stop(l.pid)
			delete(s.lanes, k)
		}
	}
	for ord, t := range s.tenants {
		if t.claimed == 0 && t.running == 0 && len(t.ready) == 0 && now.Sub(t.seen) >= s.d.set.IdleLane {
			delete(s.tenants, ord)
		}
	}
	s.reportGauges(now)
}

func (s *scheduler) reportGauges(now time.Time) {
	c := s.db.Counts()
	g := telemetry.DispatchSample{
		Pending: c.Pending, Scheduled: c.Scheduled, Inflight: c.Inflight, Dead: c.Dead, ArchivePending: c.ArchivePending,
		Running: s.running, Claimed: s.claimed, ClaimedBytes: s.claimedBytes, ActiveTenants: len(s.active),
	}
	if at, ok, err := s.db.OldestDue(); err == nil && ok && at < now.UnixMilli() {
		g.OldestDueAge = now.Sub(time.UnixMilli(at))
	}
	for _, l := range s.lanes {
		if l.breaker.state(now) != breakerClosed {
			g.BreakersOpen++
		}
		if l.block != nil {
			g.LanesBlocked++
		}
	}
	g.TopTenants = make([]telemetry.TenantClaims, 0, len(s.tenants))
	for _, t := range s.tenants {
		g.TopTenants = append(g.TopTenants, telemetry.TenantClaims{Tenant: t.name, Claimed: t.claimed})
	}
	slices.SortFunc(g.TopTenants, func(a, b telemetry.TenantClaims) int { return b.Claimed - a.Claimed })
	s.d.tel.DispatchGauges(g)
}
