package test

import (
	"fmt"
	"os"
	"testing"
)

// benchf writes one line of a load benchmark's report to stdout, prefixed with the benchmark's name. The
// testing package keeps only the first ten lines of a benchmark's log (b.Log), so a report of several rounds or
// sinks lost its later rounds and its summary in `make bench`; stdout is printed whole, as the run goes.
func benchf(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Fprintf(os.Stdout, "%s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}
