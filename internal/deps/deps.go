//go:build imlabdeps

// Package deps pins the project's chosen libraries in go.mod while the code
// that uses them is being written; it is never built.
package deps

import (
	_ "github.com/FerretDB/FerretDB/ferretdb"
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/Shopify/toxiproxy/v2"
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/dolthub/go-mysql-server"
	_ "github.com/dolthub/go-mysql-server/server"
	_ "github.com/fasthttp/websocket"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/spf13/cobra"
	_ "github.com/tsenart/vegeta/v12/lib"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/valyala/fasthttp"
	_ "go.mongodb.org/mongo-driver/mongo"
	_ "gopkg.in/yaml.v3"
)
