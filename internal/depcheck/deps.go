package depcheck
import (
 _ "github.com/coder/websocket"
 _ "github.com/miekg/dns"
 _ "github.com/cespare/xxhash/v2"
 _ "github.com/urfave/cli/v2"
 _ "github.com/superfly/fly-go/flaps"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/prometheus/client_golang/prometheus/promhttp"
 _ "golang.org/x/sync/errgroup"
 _ "golang.org/x/sync/singleflight"
 _ "go.uber.org/goleak"
 _ "github.com/BurntSushi/toml"
)
