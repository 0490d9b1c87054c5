package claimcheck

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// Sweep deletes every pack in a dt= partition older than retentionDays before now (UTC days), across all
// tenants: whole partitions go, so a claim lives at least retentionDays and less than one day more
// (inventory D.5; a bucket uses a lifecycle rule on claims/ instead). It returns the number of packs deleted.
// Keys outside the layout are left alone.
func Sweep(ctx context.Context, store blob.Store, retentionDays int, now time.Time) (int, error) {
	if retentionDays < 1 {
		return 0, fmt.Errorf("claimcheck: cannot sweep with retention_days %d (at least 1)", retentionDays)
	}
	y, m, d := now.UTC().Date()
	// Partitions strictly before this day are older than retentionDays whole days.
	cutoff := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -retentionDays).Format(time.DateOnly)
	var expired []string
	err := store.List(ctx, "claims/", func(o blob.Object) error {
		// claims/tenant=<t>/dt=<yyyy-mm-dd>/<pack_id>
		parts := strings.Split(o.Key, "/")
		if len(parts) != 4 || !strings.HasPrefix(parts[1], "tenant=") || !strings.HasPrefix(parts[2], "dt=") {
			return nil
		}
		day := strings.TrimPrefix(parts[2], "dt=")
		if _, err := time.Parse(time.DateOnly, day); err != nil {
			return nil
		}
		if day < cutoff {
			expired = append(expired, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("claimcheck: cannot sweep: %w", err)
	}
	for i, k := range expired {
		if err := store.Delete(ctx, k); err != nil {
			return i, fmt.Errorf("claimcheck: cannot sweep: %w", err)
		}
	}
	return len(expired), nil
}
