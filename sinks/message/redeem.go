package message

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ClaimPath is the claim gateway's path for a claim: ClaimPath + "<tenant>/<claim_id>" (inventory D.5).
const ClaimPath = "/v1/claims/"

// Redeem returns m's body: the inline body as it is, or a claimed body fetched from the claim gateway at
// baseURL (GET <baseURL>/v1/claims/<tenant>/<claim_id>, Authorization: Bearer token) with c. It reads at most
// m.Size+1 bytes of the answer, so a gateway cannot make it read without bound, and returns the body only
// when its length is m.Size (else CodeSizeMismatch) and its SHA-256 is m.SHA256 (else CodeIntegrity). The
// claim's tenant must be m's (CodeTenantMismatch), as Decode already checked for a decoded message. A 404 is
// ErrClaimNotFound; any other non-200 answer an error naming the status. c nil means http.DefaultClient.
func Redeem(ctx context.Context, c *http.Client, baseURL, token string, m *Message) ([]byte, error) {
	if m.Claim == "" {
		return m.body, nil
	}
	tenant, id, err := ParseClaimRef(m.Claim)
	if err != nil {
		return nil, fieldErr("claim", errNotClaim)
	}
	if tenant != tenantOrDefault(m.TenantID) {
		return nil, &DecodeError{Code: CodeTenantMismatch, Field: "claim"}
	}
	if m.Size < 0 || !lowerHex64(m.SHA256) {
		return nil, fieldErr("sha256", errNotHex)
	}
	if c == nil {
		c = http.DefaultClient
	}
	// tenant and id passed ParseClaimRef: [A-Za-z0-9_-] and Crockford base32 need no escaping.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+ClaimPath+tenant+"/"+id, nil)
	if err != nil {
		return nil, fmt.Errorf("message: cannot redeem claim: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("message: cannot redeem claim: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, ErrClaimNotFound
	default:
		return nil, fmt.Errorf("message: cannot redeem claim: gateway answered %s", resp.Status)
	}
	body := make([]byte, 0, min(m.Size, 1<<20)+1)
	body, err = readAtMost(body, resp.Body, m.Size+1)
	if err != nil {
		return nil, fmt.Errorf("message: cannot redeem claim: %w", err)
	}
	if err := check(m, body); err != nil {
		return nil, err
	}
	return body, nil
}

// readAtMost appends up to n bytes of r to buf.
func readAtMost(buf []byte, r io.Reader, n int64) ([]byte, error) {
	lr := io.LimitReader(r, n)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
