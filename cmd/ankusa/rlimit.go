package main

import (
	"fmt"
	"syscall"
)

// raiseFileLimit lifts the soft limit on open files (RLIMIT_NOFILE) to the hard limit:
// every connection and every store file is a descriptor, and a process out of them
// cannot accept. It returns both limits as they stand afterwards. (Go's runtime makes the
// same raise at start on Linux; doing it here makes it explicit and logged.)
func raiseFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("cannot read the open-files limit: %w", err)
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return lim.Cur, lim.Max, fmt.Errorf("cannot raise the open-files limit: %w", err)
		}
		lim = want
	}
	return lim.Cur, lim.Max, nil
}
