package instance_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks/claimcheck"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

const claimToken = "acme-claims-reader-0123"

func claimRole(retentionDays int) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Node.Roles = []string{config.RoleClaimCheck}
		cfg.ClaimCheck.Auth.Tokens = []config.ClaimToken{{Token: claimToken, Scopes: []string{config.ScopeClaimsRead}, Tenants: []string{"acme"}}}
		cfg.ClaimCheck.RetentionDays = retentionDays
		cfg.ClaimCheck.SweepIntervalMS = 50
	}
}

func claimGet(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// The claim_check role serves the claim store (by default the storage store, unprefixed) on its own listener:
// a pack checked in is read back byte-exact with a token for its tenant, refused without one; once the
// instance stopped, the port is closed (and TestMain's goleak check finds no goroutine of it).
func TestClaimCheckRoleServesClaims(t *testing.T) {
	inst := fixture.Instance(t, "claims", claimRole(0), nil)
	store, err := blob.Open(context.Background(), inst.Config().ClaimBlobStore())
	if err != nil {
		t.Fatal(err)
	}
	claims, err := claimcheck.NewChecker(store, claimcheck.Options{}).CheckIn(context.Background(), "acme", [][]byte{[]byte("a large body")})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + inst.ClaimCheckAddr() + "/v1/claims/acme/" + claims[0].ID.String()
	if code, body := claimGet(t, url, claimToken); code != 200 || string(body) != "a large body" {
		t.Fatalf("GET = %d %q", code, body)
	}
	if code, _ := claimGet(t, url, ""); code != 401 {
		t.Fatalf("GET without a token = %d, want 401", code)
	}
	// Each read is counted by result on the instance's registry (admin /metrics).
	_, metrics := claimGet(t, "http://"+inst.AdminAddr()+"/metrics", "")
	for _, want := range []string{
		`ankusa_claim_check_redeems_total{instance="claims",result="ok"} 1`,
		`ankusa_claim_check_redeems_total{instance="claims",result="unauthorized"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("the claim gateway still answers after Stop")
	}
}

// claim_check.retention_days: the role's sweep deletes day partitions past retention and keeps today's.
func TestClaimCheckRoleSweepsOldPartitions(t *testing.T) {
	inst := fixture.Instance(t, "claimsweep", claimRole(2), nil)
	store, err := blob.Open(context.Background(), inst.Config().ClaimBlobStore())
	if err != nil {
		t.Fatal(err)
	}
	old := claimcheck.NewChecker(store, claimcheck.Options{Now: func() time.Time { return time.Now().AddDate(0, 0, -4) }})
	oldClaims, err := old.CheckIn(context.Background(), "acme", [][]byte{[]byte("old")})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := claimcheck.NewChecker(store, claimcheck.Options{}).CheckIn(context.Background(), "acme", [][]byte{[]byte("fresh")})
	if err != nil {
		t.Fatal(err)
	}
	r := claimcheck.NewReader(store)
	poll.Eventually(t, 10*time.Second, func() error {
		if _, err := r.Stat(context.Background(), "acme", oldClaims[0].ID.String()); !errors.Is(err, claimcheck.ErrNotFound) {
			return errors.New("the 4-day-old pack is still there")
		}
		return nil
	})
	if _, err := r.Stat(context.Background(), "acme", fresh[0].ID.String()); err != nil {
		t.Fatalf("today's pack: %v", err)
	}
	// The sweep counts a pack after its whole pass, which may end after the delete the poll above saw.
	poll.Eventually(t, 10*time.Second, func() error {
		_, metrics := claimGet(t, "http://"+inst.AdminAddr()+"/metrics", "")
		if !strings.Contains(string(metrics), `ankusa_claim_check_swept_packs_total{instance="claimsweep"} 1`) {
			return errors.New("/metrics does not count the swept pack")
		}
		return nil
	})
}
