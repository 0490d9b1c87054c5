package backup

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// BenchmarkBackupRun measures one backup of a store of hooks=%d 1 KiB hooks to a LocalFS directory: "first"
// uploads every file, "next" a run after a few more commits, which uploads the new tables and the private
// files only (MB/s counts the store's size, so the ratio between the two is the saving of shared tables).
func BenchmarkBackupRun(b *testing.B) {
	for _, hooks := range []int{2000, 20000} {
		for _, mode := range []string{"first", "next"} {
			b.Run(fmt.Sprintf("hooks=%d/%s", hooks, mode), func(b *testing.B) {
				ctx := context.Background()
				db := openStore(b, filepath.Join(b.TempDir(), "store"))
				for range hooks / 500 {
					commitSized(b, db, 500, 1024)
				}
				var size int64
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					bs, err := blob.NewLocalFS(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					r := newRunner(b, Target{Name: "primary", Store: bs})
					if mode == "next" {
						if _, err := r.Run(ctx, db); err != nil {
							b.Fatal(err)
						}
						commitSized(b, db, 50, 1024)
					}
					b.StartTimer()
					res, err := r.Run(ctx, db)
					if err != nil {
						b.Fatal(err)
					}
					size = 0
					for _, f := range res.Manifest.Files {
						size += f.Size
					}
				}
				b.SetBytes(size)
			})
		}
	}
}
