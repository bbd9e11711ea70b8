package main

import (
	"net"
	"time"

	"github.com/spf13/cobra"

	"imlab/ref/server"
)

// addServeFlags registers the flags shared by ref and up.
func addServeFlags(cmd *cobra.Command, backendsDefault string) {
	f := cmd.Flags()
	f.String("listen", "127.0.0.1:8080", "API listen address, host:port (default $"+envListen+")")
	f.String("secret", "", "token signing secret, >= 16 bytes ($"+envSecret+")")
	f.String("mysql-dsn", "", "MySQL DSN with a database ($"+envMySQLDSN+")")
	f.String("redis-addr", "", "Redis host:port ($"+envRedisAddr+")")
	f.String("backends", backendsDefault, "backend mode: auto, external, local or embedded ($"+envBackends+")")
	f.String("allocator", server.AllocatorRedis, "per-user seq allocator: redis or segment ($"+envAllocator+")")
	f.String("policy", "strict", "ack policy ($"+envPolicy+")")
	f.String("role", server.RoleAll, "roles to run, comma-separated, or all ($"+envRoles+")")
	f.Uint16("node", 0, "msg_id node 0..1023; processes sharing a database need distinct nodes")
	f.Bool("migrate", true, "apply schema migrations at start")
	f.String("redis-prefix", "", "prefix for every Redis key (labs sharing one Redis)")
	f.Duration("shutdown-timeout", 30*time.Second, "bound on the graceful stop")
	f.String("log-level", "info", "debug, info, warn or error ($"+envLogLevel+")")
}

// serveConfig builds the server config from the flags and environment.
func serveConfig(cmd *cobra.Command, secret string) (server.Config, error) {
	f := cmd.Flags()
	cfg := server.DefaultConfig()
	cfg.Listen = fromEnv(f, "listen", envListen)
	cfg.Auth.Secret = secret
	cfg.Allocator = fromEnv(f, "allocator", envAllocator)
	cfg.Send.Policy = fromEnv(f, "policy", envPolicy)
	cfg.Roles = splitList(fromEnv(f, "role", envRoles))
	node, _ := f.GetUint16("node")
	cfg.Send.Node = node
	cfg.Migrate, _ = f.GetBool("migrate")
	cfg.Redis.KeyPrefix, _ = f.GetString("redis-prefix")
	cfg.ShutdownTimeout, _ = f.GetDuration("shutdown-timeout")
	log, err := newLogger(cmd)
	if err != nil {
		return cfg, err
	}
	cfg.Logger = log
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// endpointLines describes what a process serves at addr.
func endpointLines(addr string) [][2]string {
	base := "http://" + addr
	return [][2]string{
		{"api", base + "/v1/ (msg/send, sync/pull, sync/ack, conv/pull, group/create)"},
		{"ws", "ws://" + addr + "/v1/ws"},
		{"metrics", base + "/metrics"},
		{"healthz", base + "/healthz"},
	}
}

// reachable turns a listen address into one a local client can dial
// (0.0.0.0 and :: become 127.0.0.1).
func reachable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
