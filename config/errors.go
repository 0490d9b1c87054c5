package config

import (
	"errors"
	"strings"
)

// ExitConfig is the process exit status for a configuration that cannot be loaded (EX_CONFIG, sysexits.h).
const ExitConfig = 78

// ErrInvalid matches every *Error with errors.Is: the configuration was read but refused.
var ErrInvalid = errors.New("config: invalid configuration")

// Problem is one reason a configuration is refused.
type Problem struct {
	// Path is the dotted key path ("batcher.max_batch", "sources.gh.sinks[0].type"), or the environment
	// variable whose value is wrong ("ANKUSA_HTTP_PORT"); "" for the document as a whole.
	Path string
	// Msg says what is wrong ("must be > 0, got 0", "unknown key"); it never holds a secret's value.
	Msg string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Error holds every problem found in one configuration, sorted by path.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) hold for every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
