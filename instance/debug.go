package instance

import (
	"os"
	"time"

	"github.com/ankusa-go/ankusa/store"
)

// holdCommits is debug.hold_commits_file: every synced write waits while a file exists
// at path, the way a stalled disk holds an fsync. A child process cannot take a Go fault,
// so black-box tests stall the writer through the file system. inner (may be nil) still
// runs after the hold.
func holdCommits(path string, inner *store.Faults) *store.Faults {
	f := &store.Faults{}
	if inner != nil {
		*f = *inner
	}
	next := f.BeforeCommit
	f.BeforeCommit = func() error {
		for {
			if _, err := os.Stat(path); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if next != nil {
			return next()
		}
		return nil
	}
	return f
}
