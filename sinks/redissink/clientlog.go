package redissink

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// BridgeClientLog sends go-redis's own log lines (pool dial failures and the like, printed to stderr by
// default) to log at debug level: the sink already returns every failure as an error that dispatch logs, so
// these lines only add detail. go-redis has one logger per process, so only main calls this, once.
func BridgeClientLog(log zerolog.Logger) {
	redis.SetLogger(clientLog{log.With().Str("component", "go-redis").Logger()})
}

type clientLog struct{ log zerolog.Logger }

func (c clientLog) Printf(_ context.Context, format string, v ...any) {
	c.log.Debug().Msg(fmt.Sprintf(format, v...))
}
