package dispatch_test

import "github.com/ankusa-go/ankusa/dispatch"

func dispatchReplay() dispatch.ReplayRequest {
	return dispatch.ReplayRequest{Kind: dispatch.ReplayDLQ, Rate: 1000}
}
