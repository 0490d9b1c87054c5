package main

import (
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/proctune"
)

// tuneMonitor gives the Go runtime's monitor thread the timer slack ANKUSA_MONITOR_TIMER_SLACK asks for, if any
// (proctune says what it buys and costs). A slack the process may not set (no CAP_SYS_NICE) is logged, at info
// as the commit thread's refused nice is, and the node serves on; only a malformed value is an error.
func tuneMonitor(log zerolog.Logger, env func(string) (string, bool)) error {
	t, err := proctune.TuneMonitor(env(proctune.MonitorSlackEnv))
	switch {
	case err != nil:
		return err
	case t.Slack == 0:
		log.Info().Msg("runtime monitor timer slack left to the kernel (" + proctune.MonitorSlackEnv + " unset or 0)")
	case t.Refused != nil:
		log.Info().Err(t.Refused).Msg("runtime monitor timer slack left to the kernel")
	default:
		log.Info().Int("tid", t.Tid).Str("slack", t.Slack.String()).Msg("runtime monitor timer slack set")
	}
	return nil
}
