package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
)

// Limit is a rate: Rate units per second refilling a bucket of Burst units; Rate 0 is no limit.
type Limit struct {
	Rate, Burst float64
}

// Request is one hook's call: the tenant's buckets to take from and the event key to claim.
type Request struct {
	Tenant string
	Hooks  Limit    // one unit per hook
	Bytes  Limit    // Size units
	Size   int64    // body bytes
	Claim  Claim    // zero Key: no claim
	ID     [16]byte // the hook's id, the claim's owner
}

// Claim names one provider event key of one source of one tenant.
type Claim struct {
	Tenant, Source, Key string
}

// Dedupe verdicts of Admit.
const (
	Claimed   = iota // the key was free and is now pending under this hook's id (or no key was asked)
	Pending          // another hook holds it pending: its commit is not finished
	Committed        // another hook committed it: Verdict.Original is its id
)

// Verdict is Admit's answer.
type Verdict struct {
	Limited    bool          // a bucket refused: nothing was taken and nothing claimed
	RetryAfter time.Duration // when Limited
	Dedupe     int           // Claimed, Pending or Committed
	Original   [16]byte      // when Committed
}

// Store is one node's client of the fleet store.
type Store struct {
	rdb        *redis.Client
	prefix     string
	timeout    time.Duration
	pendingTTL time.Duration
	failures   int64
	openFor    time.Duration
	// Breaker state: consecutive failed calls, and until when (unix ns) the breaker is open; a probe is one
	// call let through once it has passed.
	failed    atomic.Int64
	openUntil atomic.Int64
	probing   atomic.Bool
	degraded  atomic.Bool
	onDegrade func(bool)
}

// New returns the client of cfg's fleet.store. pendingTTL is how long a pending claim outlives a node that
// died before settling it. onDegrade, when set, is told each time the breaker opens (true) or closes.
func New(cfg config.Fleet, pendingTTL time.Duration, onDegrade func(bool)) *Store {
	timeout := time.Duration(cfg.TimeoutMS) * time.Millisecond
	rdb := redis.NewClient(&redis.Options{
		Addr: cfg.Store.Addr, DB: cfg.Store.DB, Password: cfg.Store.Password,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true,
	})
	if onDegrade == nil {
		onDegrade = func(bool) {}
	}
	return &Store{rdb: rdb, prefix: cfg.Store.KeyPrefix, timeout: timeout, pendingTTL: pendingTTL,
		failures: int64(max(cfg.BreakerFailures, 1)), openFor: time.Duration(cfg.BreakerOpenMS) * time.Millisecond,
		onDegrade: onDegrade}
}

// Close closes the client's connections.
func (s *Store) Close() error { return s.rdb.Close() }

// Degraded reports whether the breaker is open: the node limits and dedupes alone.
func (s *Store) Degraded() bool { return s.degraded.Load() }

// ErrBreakerOpen is the error of a call the open breaker did not let through.
var ErrBreakerOpen = errors.New("fleet: breaker open")

// admitScript takes from both buckets (GCRA in microseconds on Redis's clock; a refusal writes nothing) and
// then claims the event key pending. KEYS: hooks bucket, bytes bucket, claim. ARGV: hook cost and burst, byte
// cost and burst (a negative cost is no limit), the pending value ("" = no claim), its TTL in ms.
// Answers {0} claimed, {1, wait_us} limited, {2, 0, value} held by another hook.
var admitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function take(key, cost, burst)
  if cost < 0 then return nil, 0 end
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local nxt = tat + cost
  if nxt - now > burst and tat > now then
    if cost > burst then return nil, tat - now end
    return nil, nxt - now - burst
  end
  return nxt, 0
end
local h, hw = take(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
if hw > 0 then return {1, math.ceil(hw)} end
local b, bw = take(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
if bw > 0 then return {1, math.ceil(bw)} end
if h then redis.call('SET', KEYS[1], string.format('%.0f', h), 'PX', math.floor((h - now) / 1000) + 1) end
if b then redis.call('SET', KEYS[2], string.format('%.0f', b), 'PX', math.floor((b - now) / 1000) + 1) end
if ARGV[5] ~= '' then
  local v = redis.call('GET', KEYS[3])
  if v then return {2, 0, v} end
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[6])
end
return {0}
`)

// settleScript replaces a claim still held by its pending value: ARGV new value ("" deletes), TTL in ms.
var settleScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
`)

const (
	pendingMark   = 'p'
	committedMark = 'c'
)

func (s *Store) bucketKey(tenant string, kind byte) string {
	return s.prefix + "rl:{" + tenant + "}:" + string(kind)
}

func (s *Store) claimKey(c Claim) string {
	return s.prefix + "dd:{" + c.Tenant + "}:" + c.Source + "\x00" + c.Key
}

func claimValue(mark byte, id [16]byte) string {
	b := make([]byte, 0, 17)
	b = append(b, mark)
	return string(append(b, id[:]...))
}

// gcra is a limit's cost of n units and its burst, in microseconds; "-1" costs nothing.
func gcra(l Limit, n float64) (cost, burst string) {
	if !(l.Rate > 0) {
		return "-1", "0"
	}
	interval := 1e6 / l.Rate
	return strconv.FormatFloat(n*interval, 'f', 0, 64), strconv.FormatFloat(l.Burst*interval, 'f', 0, 64)
}

// Admit is the one call of a hook. ok is false when the fleet store did not answer (the breaker is open, or
// the call failed or ran out of its budget): the caller then limits and dedupes on its own.
func (s *Store) Admit(req *Request) (v Verdict, ok bool, err error) {
	if !s.allow() {
		return Verdict{}, false, ErrBreakerOpen
	}
	hc, hb := gcra(req.Hooks, 1)
	bc, bb := gcra(req.Bytes, float64(req.Size))
	claimKey, claim := s.prefix+"dd:none", ""
	if req.Claim.Key != "" {
		claimKey, claim = s.claimKey(req.Claim), claimValue(pendingMark, req.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	res, err := admitScript.Run(ctx, s.rdb,
		[]string{s.bucketKey(req.Tenant, 'h'), s.bucketKey(req.Tenant, 'b'), claimKey},
		hc, hb, bc, bb, claim, s.pendingTTL.Milliseconds()).Slice()
	if err != nil {
		s.failure()
		return Verdict{}, false, fmt.Errorf("fleet admit: %w", err)
	}
	s.success()
	v, err = parseVerdict(res)
	if err != nil {
		return Verdict{}, false, err
	}
	return v, true, nil
}

func parseVerdict(res []any) (Verdict, error) {
	code, _ := res[0].(int64)
	switch code {
	case 0:
		return Verdict{Dedupe: Claimed}, nil
	case 1:
		if len(res) > 1 {
			us, _ := res[1].(int64)
			return Verdict{Limited: true, RetryAfter: time.Duration(us) * time.Microsecond}, nil
		}
	case 2:
		if len(res) > 2 {
			if val, _ := res[2].(string); len(val) == 17 {
				if val[0] == committedMark {
					return Verdict{Dedupe: Committed, Original: [16]byte([]byte(val[1:]))}, nil
				}
				return Verdict{Dedupe: Pending}, nil
			}
		}
	}
	return Verdict{}, fmt.Errorf("fleet admit: unexpected answer %v", res)
}

// Commit makes this hook's pending claim committed under id (the hook's own, or the original a local dedupe
// found) for ttl, the source's dedupe window.
func (s *Store) Commit(c Claim, owner, id [16]byte, ttl time.Duration) error {
	return s.settle(c, owner, claimValue(committedMark, id), ttl)
}

// Release drops this hook's pending claim: its commit failed, so a provider retry must be able to claim it.
func (s *Store) Release(c Claim, owner [16]byte) error { return s.settle(c, owner, "", 0) }

func (s *Store) settle(c Claim, owner [16]byte, value string, ttl time.Duration) error {
	if !s.allow() {
		return ErrBreakerOpen
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := settleScript.Run(ctx, s.rdb, []string{s.claimKey(c)}, claimValue(pendingMark, owner), value,
		max(ttl.Milliseconds(), 1)).Err()
	if err != nil {
		s.failure()
		return fmt.Errorf("fleet settle claim: %w", err)
	}
	s.success()
	return nil
}

// ForgetTenant deletes tenant's buckets (a tenant erase); its claims expire on their own TTL.
func (s *Store) ForgetTenant(ctx context.Context, tenant string) error {
	if err := s.rdb.Del(ctx, s.bucketKey(tenant, 'h'), s.bucketKey(tenant, 'b')).Err(); err != nil {
		return fmt.Errorf("fleet: delete the buckets of tenant %s: %w", tenant, err)
	}
	return nil
}

// allow reports whether a call may go to the store: the breaker is closed, or its open period passed and
// this call is the one probe.
func (s *Store) allow() bool {
	until := s.openUntil.Load()
	if until == 0 {
		return true
	}
	if time.Now().UnixNano() < until {
		return false
	}
	return s.probing.CompareAndSwap(false, true)
}

func (s *Store) success() {
	s.failed.Store(0)
	if s.openUntil.Load() != 0 {
		s.openUntil.Store(0)
		s.probing.Store(false)
		if s.degraded.CompareAndSwap(true, false) {
			s.onDegrade(false)
		}
	}
}

func (s *Store) failure() {
	n := s.failed.Add(1)
	if n < s.failures && s.openUntil.Load() == 0 {
		return
	}
	s.openUntil.Store(time.Now().Add(s.openFor).UnixNano())
	s.probing.Store(false)
	if s.degraded.CompareAndSwap(false, true) {
		s.onDegrade(true)
	}
}
