package instance

import (
	"os"
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
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

// watchKillFile is debug.kill_file: while the file names an actor under the instance, its
// kill injection stays armed, so the actor crashes on every ordinary message it gets.
func (i *Instance) watchKillFile(tasks *task.Group) {
	path := i.cfg.Debug.KillFile
	tasks.Every(10*time.Millisecond, func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		if actor := strings.TrimSpace(string(b)); actor != "" {
			i.kill.Arm(i.cfg.Instance + "/" + actor)
		}
	})
}
