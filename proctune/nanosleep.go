package proctune

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// sysNanosleep is nanosleep's number as /proc/<pid>/task/<tid>/syscall prints it: the call the runtime's
// usleep makes on Linux.
var sysNanosleep = strconv.Itoa(unix.SYS_NANOSLEEP)
