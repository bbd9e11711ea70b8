package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"imlab/ref/defect"
	"imlab/ref/fanout"
	"imlab/ref/model"
	"imlab/ref/msgid"
	"imlab/ref/server"
)

// addServeFlags registers the flags shared by ref and up; labRoutes is
// --lab-routes' default (up: on, the laptop lab; ref: off).
func addServeFlags(cmd *cobra.Command, backendsDefault string, labRoutes bool) {
	f := cmd.Flags()
	def := server.DefaultConfig()
	f.String("listen", "127.0.0.1:8080", "listen address, host:port: the API, or /metrics, /healthz and "+server.LagPath+" for a process without the api role ($"+envListen+")")
	f.String("secret", "", "token signing secret, >= 16 bytes ($"+envSecret+")")
	f.String("mysql-dsn", "", "MySQL DSN with a database ($"+envMySQLDSN+")")
	f.String("redis-addr", "", "Redis host:port ($"+envRedisAddr+")")
	f.String("kafka-brokers", "", "Kafka seed brokers host:port,... ($"+envKafkaBrokers+"; up: empty starts an in-process one)")
	f.String("mongo-uri", "", "MongoDB URI for the history ($"+envMongoURI+"; up: empty starts an in-process FerretDB)")
	f.String("backends", backendsDefault, "backend mode: auto, external, local or embedded ($"+envBackends+")")
	f.String("allocator", server.AllocatorRedis, "per-user seq allocator: redis or segment ($"+envAllocator+")")
	f.String("policy", "strict", "ack policy: strict, store, outbox or queue ($"+envPolicy+"). "+fanout.UnsafeWarning)
	f.String("role", server.RoleAll, "roles to run, comma-separated: api, relay, consumer, history, reconciler, or all ($"+envRoles+")")
	f.Uint16("node", 0, "msg_id node 0..1023; processes sharing a database need distinct nodes")
	f.Int("node-from-ordinal", -1, "msg_id node = this base + the ordinal that ends the host name (NAME-K, as a Kubernetes StatefulSet names its pods), so replicas get distinct nodes; -1: off, use --node")
	f.Bool("migrate", true, "apply schema migrations at start")
	f.String("redis-prefix", "", "prefix for every Redis key (labs sharing one Redis)")
	f.Duration("shutdown-timeout", 30*time.Second, "bound on the graceful stop")
	f.String("log-level", "info", "debug, info, warn or error ($"+envLogLevel+")")
	// Queue side and history.
	f.Bool("history", true, "MongoDB history (bucketed, seed 004): the history routes and the history tier ($"+envHistory+"; ref: needs --mongo-uri)")
	f.String("mongo-db", def.Mongo.Database, "MongoDB database of the history ($"+envMongoDB+")")
	f.String("dedup", def.Fanout.Dedup, "consumers' idempotency: uk_uid_msg (unique key), mq_dedup (table) or redis (SET NX) ($"+envDedup+")")
	f.String("topic", def.Fanout.Topics.Fanout, "fan-out topic ($"+envTopic+")")
	f.String("dlq-topic", def.Fanout.Topics.DLQ, "dead-letter topic ($"+envDLQTopic+")")
	f.Int32("partitions", def.Fanout.Topics.Partitions, "partitions of the fan-out topic when it is created ($"+envPartitions+")")
	f.String("inbox-group", def.Fanout.Consumer.Group, "consumer group of the inbox tier ($"+envInboxGroup+")")
	f.String("history-group", def.Fanout.HistoryGroup, "consumer group of the history tier ($"+envHistoryGroup+")")
	f.String("pprof", "", "serve net/http/pprof on this loopback host:port, apart from the API (e.g. 127.0.0.1:6060; empty: off) ($"+envPprof+")")
	f.Bool("lab-routes", labRoutes, "mount the lab routes GET /v1/lab/inbox and /v1/lab/stored: inboxes and messages read straight from MySQL, "+
		"for the lab's store witness and read-after-ACK probe; never in a production-like set-up ($"+envLabRoutes+")")
	f.String("admin-uids", "", "uids allowed to call POST "+server.PurgePath+" (physical delete), comma-separated ($"+envAdminUIDs+")")
	f.StringSlice("defect", nil, "LAB ONLY: enable a shipped defect (a negative control that loses or misorders messages on purpose; see imlab ref --list-defects); refused without --lab-defects")
	f.Bool("lab-defects", false, "LAB ONLY: allow --defect on this instance")
}

// serveConfig builds the server config from the flags and environment.
func serveConfig(cmd *cobra.Command, secret string) (server.Config, error) {
	f := cmd.Flags()
	cfg := server.DefaultConfig()
	var err error
	cfg.Listen = fromEnv(f, "listen", envListen)
	cfg.PprofListen = fromEnv(f, "pprof", envPprof)
	cfg.Auth.Secret = secret
	cfg.Allocator = fromEnv(f, "allocator", envAllocator)
	cfg.Send.Policy = fromEnv(f, "policy", envPolicy)
	cfg.Roles = splitList(fromEnv(f, "role", envRoles))
	node, _ := f.GetUint16("node")
	if base, _ := f.GetInt("node-from-ordinal"); base >= 0 {
		host, _ := os.Hostname()
		n, err := nodeFromOrdinal(base, host)
		if err != nil {
			return cfg, err
		}
		node = n
	}
	cfg.Send.Node = node
	cfg.Migrate, _ = f.GetBool("migrate")
	cfg.Redis.KeyPrefix, _ = f.GetString("redis-prefix")
	cfg.ShutdownTimeout, _ = f.GetDuration("shutdown-timeout")
	cfg.Mongo.Database = fromEnv(f, "mongo-db", envMongoDB)
	cfg.Fanout.Dedup = fromEnv(f, "dedup", envDedup)
	cfg.Fanout.Topics.Fanout = fromEnv(f, "topic", envTopic)
	cfg.Fanout.Topics.DLQ = fromEnv(f, "dlq-topic", envDLQTopic)
	cfg.Fanout.Consumer.Group = fromEnv(f, "inbox-group", envInboxGroup)
	cfg.Fanout.HistoryGroup = fromEnv(f, "history-group", envHistoryGroup)
	if f.Lookup("push-bus") != nil {
		cfg.PushBus.Mode = fromEnv(f, "push-bus", envPushBus)
	}
	if cfg.LabRoutes, err = boolFromEnv(cmd, "lab-routes", envLabRoutes); err != nil {
		return cfg, err
	}
	parts, err := intFromEnv(cmd, "partitions", envPartitions)
	if err != nil {
		return cfg, err
	}
	cfg.Fanout.Topics.Partitions = int32(parts)
	for _, s := range splitList(fromEnv(f, "admin-uids", envAdminUIDs)) {
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil || u == 0 {
			return cfg, fmt.Errorf("%w: admin uid %q", model.ErrInvalid, s)
		}
		cfg.AdminUIDs = append(cfg.AdminUIDs, u)
	}
	switch cfg.Send.Policy {
	case "strict", fanout.PolicyStore, fanout.PolicyOutbox, fanout.PolicyQueue:
	default:
		return cfg, fmt.Errorf("%w: --policy %q (want strict, store, outbox or queue)", model.ErrInvalid, cfg.Send.Policy)
	}
	names, _ := f.GetStringSlice("defect")
	lab, _ := f.GetBool("lab-defects")
	if cfg.Defects, err = defect.Enable(lab, names...); err != nil {
		if errors.Is(err, defect.ErrNotLab) {
			return cfg, fmt.Errorf("%w: --defect: %w (--lab-defects)", model.ErrInvalid, err)
		}
		return cfg, fmt.Errorf("%w: --defect: %w", model.ErrInvalid, err)
	}
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

// historyWanted resolves --history / IMLAB_HISTORY.
func historyWanted(cmd *cobra.Command) (bool, error) { return boolFromEnv(cmd, "history", envHistory) }

// boolFromEnv resolves a boolean flag: given, it wins; else the
// environment variable when set; else the flag's default.
func boolFromEnv(cmd *cobra.Command, flag, env string) (bool, error) {
	f := cmd.Flags()
	v, _ := f.GetBool(flag)
	if f.Changed(flag) {
		return v, nil
	}
	if e := strings.TrimSpace(lookupEnv(env)); e != "" {
		b, err := strconv.ParseBool(e)
		if err != nil {
			return false, fmt.Errorf("%w: %s=%q: want true or false", model.ErrInvalid, env, e)
		}
		return b, nil
	}
	return v, nil
}

func intFromEnv(cmd *cobra.Command, flag, env string) (int, error) {
	f := cmd.Flags()
	v, _ := f.GetInt32(flag)
	if f.Changed(flag) {
		return int(v), nil
	}
	if e := strings.TrimSpace(lookupEnv(env)); e != "" {
		n, err := strconv.Atoi(e)
		if err != nil {
			return 0, fmt.Errorf("%w: %s=%q: want a number", model.ErrInvalid, env, e)
		}
		return n, nil
	}
	return int(v), nil
}

// endpointLines describes what a process serves at addr.
func endpointLines(addr string, api, history bool) [][2]string {
	base := "http://" + addr
	var out [][2]string
	if api {
		out = append(out,
			[2]string{"api", base + "/v1/ (msg/send, sync/pull, sync/ack, conv/pull, group/create)"},
			[2]string{"ws", "ws://" + addr + "/v1/ws"})
		if history {
			out = append(out,
				[2]string{"history", base + "/v1/history, /v1/msg/revoke, /v1/msg/delete, /v1/conv/clear, " + server.ReadPath},
				[2]string{"admin", base + server.PurgePath + " (uids in --admin-uids)"})
		}
	}
	return append(out,
		[2]string{"lag", base + server.LagPath + " (JSON, no token; polled by the lab)"},
		[2]string{"metrics", base + "/metrics"},
		[2]string{"healthz", base + "/healthz"})
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

// nodeFromOrdinal is base plus the ordinal K that ends host ("imlab-api-2":
// 2), refused when host has no ordinal or the node leaves 0..MaxNode.
func nodeFromOrdinal(base int, host string) (uint16, error) {
	i := strings.LastIndexByte(host, '-')
	k, err := strconv.Atoi(host[i+1:])
	if i < 0 || err != nil || k < 0 {
		return 0, fmt.Errorf("%w: --node-from-ordinal: host name %q does not end in -ORDINAL (a StatefulSet pod's does)", model.ErrInvalid, host)
	}
	if n := base + k; n <= msgid.MaxNode {
		return uint16(n), nil
	}
	return 0, fmt.Errorf("%w: --node-from-ordinal %d + ordinal %d is past the largest msg_id node %d", model.ErrInvalid, base, k, msgid.MaxNode)
}
