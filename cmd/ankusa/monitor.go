package main

import (
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/proctune"
)

// tuneMonitor gives the Go runtime's monitor thread the timer slack ANKUSA_MONITOR_TIMER_SLACK asks for, if any
// (proctune says what it buys and costs). A slack the process may not set (no CAP_SYS_NICE) is logged, at info
// as the commit thread's refused nice is, and the node serves on; only a malformed value is an error.
func tuneMonitor(log zerolog.Logger, env func(string) (string, bool)) error {
	v, set := env(proctune.MonitorSlackEnv)
	slack, err := proctune.MonitorSlackSetting(v, set)
	if err != nil {
		return err
	}
	if slack == 0 {
		log.Info().Msg("runtime monitor timer slack left to the kernel (" + proctune.MonitorSlackEnv + " unset or 0)")
		return nil
	}
	tid, err := proctune.MonitorSlack(slack)
	if err != nil {
		log.Info().Err(err).Msg("runtime monitor timer slack left to the kernel")
		return nil
	}
	log.Info().Int("tid", tid).Str("slack", slack.String()).Msg("runtime monitor timer slack set")
	return nil
}
