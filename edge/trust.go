package edge

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/verify"
)

// ErrBadTrust: a source's verify, on_verify_failure, dedupe or store_headers configuration cannot be
// built. A configuration that passed config's Validate never produces it.
var ErrBadTrust = errors.New("edge: invalid source trust configuration")

// Trust is everything the handler applies to one source's request after the body is read: verification,
// the verify-failure policy, the dedupe key and the store_headers policy. It is built once per source and
// shared by every request, read only.
type Trust struct {
	Verifier verify.Verifier
	// OnFailure is config.OnVerifyReject, OnVerifyQuarantine or OnVerifyAcceptFlag.
	OnFailure string
	// Dedupe is nil when the source has no dedupe block. A flagged (accept_flag) hook gets no key, so it
	// cannot suppress the real event (inventory C.4).
	Dedupe  *DedupeExtractor
	Headers HeaderPolicy
	// TrustURLTenant: the operator accepts that this shared source, verifying nothing, takes whichever
	// tenant a tenant_path URL names.
	TrustURLTenant bool
	// PeerCert: the verifier reads the TLS client certificate, so the handler hands it over
	// (for client_cert sources alone, as the design asks).
	PeerCert bool

	budget *verifyBudget // sources.<id>.verify_failure_bytes; nil for a source that verifies nothing
	// verifies is false for type none: such a shared source takes a URL's tenant only with
	// TrustURLTenant.
	verifies bool
	// urlTenants is a shared source's allow-list (url_tenants, or tenant_secrets' tenants), each
	// tenant mapped to itself so that naming one allocates nothing; nil = no allow-list.
	urlTenants map[string]string
	// tenantVerifiers holds the verifiers of tenant_secrets, by URL tenant; nil = Verifier for all.
	tenantVerifiers map[string]verify.Verifier
	// handshake answers the provider's subscription handshake; nil = none (handshake.go).
	handshake *handshake
}

// NewTrust builds a source's trust bundle. Errors wrap ErrBadTrust, or the verifier's *verify.SpecError
// (errors.Is verify.ErrBadSecret / verify.ErrBadScheme).
func NewTrust(src config.Source) (*Trust, error) {
	v, err := verify.New(src.Verify)
	if err != nil {
		return nil, fmt.Errorf("edge: cannot build the verifier: %w", err)
	}
	t := &Trust{
		Verifier:       v,
		budget:         newVerifyBudget(src),
		OnFailure:      src.OnVerifyFailure,
		Headers:        NewHeaderPolicy(src.StoreHeaders, src.Verify.CredentialHeaders()),
		TrustURLTenant: src.TrustURLTenant,
		PeerCert:       src.Verify.Type == "client_cert",
		handshake:      newHandshake(src),
	}
	t.verifies = src.Verify.Type != "" && src.Verify.Type != "none"
	for _, name := range src.URLTenants {
		t.allowURLTenant(name)
	}
	for name, keys := range src.TenantSecrets {
		tv, err := verify.New(src.Verify.ForKeys(keys))
		if err != nil {
			return nil, fmt.Errorf("edge: cannot build the verifier of tenant %s: %w", name, err)
		}
		if t.tenantVerifiers == nil {
			t.tenantVerifiers = make(map[string]verify.Verifier, len(src.TenantSecrets))
		}
		t.tenantVerifiers[name] = tv
		t.allowURLTenant(name)
	}
	switch t.OnFailure {
	case "":
		t.OnFailure = config.OnVerifyReject
	case config.OnVerifyReject, config.OnVerifyQuarantine, config.OnVerifyAcceptFlag:
	default:
		return nil, fmt.Errorf("%w: unknown on_verify_failure %q", ErrBadTrust, t.OnFailure)
	}
	switch src.StoreHeaders.Mode {
	case "", config.StoreHeadersDrop, config.StoreHeadersHash:
	default:
		return nil, fmt.Errorf("%w: unknown store_headers mode %q", ErrBadTrust, src.StoreHeaders.Mode)
	}
	if src.Dedupe != nil {
		if t.Dedupe, err = NewDedupeExtractor(*src.Dedupe); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Trust) allowURLTenant(name string) {
	if t.urlTenants == nil {
		t.urlTenants = map[string]string{}
	}
	t.urlTenants[name] = name
}

// VerifierFor is the verifier of a hook of tenant: the tenant's own (tenant_secrets) or the source's.
// A tenant_secrets source has no verifier for a tenant it does not list: such a hook fails closed.
func (t *Trust) VerifierFor(tenant string) verify.Verifier {
	if t.tenantVerifiers == nil {
		return t.Verifier
	}
	if v, ok := t.tenantVerifiers[tenant]; ok {
		return v
	}
	return failClosed{}
}

// failClosed verifies nothing: the answer for a tenant a tenant_secrets source holds no key for.
type failClosed struct{}

func (failClosed) Verify(*verify.Request) verify.Result {
	return verify.Result{Status: verify.StatusFailed, Provider: "none", Scheme: "none", Reason: verify.ErrBadSecret}
}

// AdmitVerification refuses a request before its body is read while the source's failed verifications
// are over their budget (429 verify_rate_limited, Retry-After when the debt is repaid). The check is one
// atomic load.
func (t *Trust) AdmitVerification(now time.Time) *RefusedError {
	if t.budget == nil {
		return nil
	}
	if w := t.budget.wait(now); w > 0 {
		return refuse429("verify_rate_limited", w)
	}
	return nil
}

// Verify runs the verifier of a hook of tenant on an incoming request and charges what a failure hashed
// to the source's verification budget. A success is never charged: the tenant's quotas govern accepted
// hooks.
func (t *Trust) Verify(tenant string, r *verify.Request) verify.Result {
	res := t.VerifierFor(tenant).Verify(r)
	if res.Status == verify.StatusFailed && res.HashedBytes > 0 && t.budget != nil {
		t.budget.charge(r.Now, res.HashedBytes)
	}
	return res
}

// verifyBudget is a token bucket of bytes hashed by failed verifications. A failure's cost is known only
// once it is spent, so the bucket runs into debt and the source is refused until the debt is repaid: at
// most one request per connection overshoots it. Requests read closedUntil alone; only a failure locks.
type verifyBudget struct {
	rate, burst float64      // bytes per second, bytes
	closedUntil atomic.Int64 // unix nanoseconds before which the source is refused

	mu     sync.Mutex
	tokens float64 // may be negative: a debt
	last   int64   // unix nanoseconds of the last refill; 0 = full bucket, never charged
}

func newVerifyBudget(src config.Source) *verifyBudget {
	if src.Verify.Type == "" || src.Verify.Type == "none" {
		return nil
	}
	lim := config.Rate{Rate: config.DefaultVerifyFailureRate, Burst: config.DefaultVerifyFailureBurst}
	if src.VerifyFailureBytes != nil {
		lim = *src.VerifyFailureBytes
	}
	return &verifyBudget{rate: lim.Rate, burst: lim.Burst, tokens: lim.Burst}
}

func (b *verifyBudget) wait(now time.Time) time.Duration {
	return time.Duration(max(b.closedUntil.Load()-now.UnixNano(), 0))
}

func (b *verifyBudget) charge(now time.Time, n int64) {
	t := now.UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last != 0 && t > b.last {
		b.tokens = min(b.burst, b.tokens+float64(t-b.last)/float64(time.Second)*b.rate)
	}
	b.last = max(b.last, t)
	b.tokens -= float64(n)
	if b.tokens < 0 {
		b.closedUntil.Store(t + int64(-b.tokens/b.rate*float64(time.Second)))
	}
}
