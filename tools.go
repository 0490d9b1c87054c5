//go:build tools

// Package ankusa pins the modules the build relies on before every package imports them.
package ankusa

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/google/uuid"
	_ "github.com/linxGnu/grocksdb"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/rs/zerolog"
	_ "github.com/spf13/cobra"
	_ "github.com/valyala/fasthttp"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
)
