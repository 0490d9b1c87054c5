package edge

import (
	"errors"
	"fmt"

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
		OnFailure:      src.OnVerifyFailure,
		Headers:        NewHeaderPolicy(src.StoreHeaders, src.Verify.CredentialHeaders()),
		TrustURLTenant: src.TrustURLTenant,
		PeerCert:       src.Verify.Type == "client_cert",
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
