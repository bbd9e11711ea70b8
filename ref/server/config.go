package server

import (
	"fmt"
	"imlab/ref/defect"
	"log/slog"
	"time"

	"imlab/ref/api"
	"imlab/ref/auth"
	"imlab/ref/fanout"
	"imlab/ref/history"
	"imlab/ref/hotcache"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/pull"
	"imlab/ref/push"
	"imlab/ref/pushbus"
	"imlab/ref/reconcile"
	"imlab/ref/retention"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

// Allocator names.
const (
	AllocatorRedis   = "redis"
	AllocatorSegment = "segment"
)

// RoleAll expands to every registered role, in registry order.
const RoleAll = "all"

// MySQLConfig sizes the database pool.
type MySQLConfig struct {
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	ConnMaxIdleTime time.Duration
	// PingTimeout bounds the first connection check.
	PingTimeout time.Duration
	// DriverLog receives the MySQL driver's own lines (a connection it
	// found broken, a packet it could not read), at warn level; nil: the
	// driver's default (stderr). Start sets it to the process's logger.
	DriverLog *slog.Logger
}

// RedisConfig sizes the Redis client.
type RedisConfig struct {
	PoolSize     int
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	PingTimeout  time.Duration
	// KeyPrefix goes in front of every key (rkeys.Keys.Prefix): "" in
	// production (the seed's exact key names); tests and labs sharing one
	// Redis set it.
	KeyPrefix string
}

// MongoConfig says which database holds the history and bounds the client.
type MongoConfig struct {
	// Database is the MongoDB database of the history collections.
	Database       string
	ConnectTimeout time.Duration
	MaxPoolSize    uint64
}

// Config is everything one process needs. Start from DefaultConfig.
type Config struct {
	// Listen is the API address (host:port; port 0 picks a free one).
	Listen string
	// PprofListen, when set, serves net/http/pprof on this address of its
	// own; it must be a loopback host:port (port 0 picks a free one).
	PprofListen string
	// Roles this process runs: names from the role registry, or "all".
	Roles []string
	// Allocator is the per-user seq allocator: "redis" or "segment".
	Allocator string
	// Migrate applies the schema migrations at start.
	Migrate bool
	// ShutdownTimeout bounds the graceful stop (drain HTTP, close ws, drain
	// send batches).
	ShutdownTimeout time.Duration

	MySQL MySQLConfig
	Redis RedisConfig
	Auth  auth.Config
	API   api.Config
	Send  send.Config
	Pull  pull.Config
	Push  push.Config
	// PushBus carries committed entries to the push hubs of other
	// processes (mode redis) so that an api-only process pushes what a
	// consumer process wrote; mode local (the default) pushes to this
	// process's devices only.
	PushBus  pushbus.Config
	HotCache hotcache.Config
	Inbox    inbox.Config
	Segment  seqalloc.SegmentConfig

	// Fanout is the queue side (topics, consumer groups, dedup strategy,
	// relay, lag monitor); used when the backends name Kafka brokers.
	Fanout fanout.Config
	// Mongo and History configure the history store; used when the
	// backends name a MongoDB URI.
	Mongo   MongoConfig
	History history.Config
	// Reconcile and Retention are the reconciler role's two timers. The
	// forward repair's horizon (Reconcile.Horizon, 0: Retention.Horizon())
	// may not pass retention's: see ref/retention's tombstones.
	Reconcile reconcile.Config
	Retention retention.Config
	// LabRoutes mounts the lab routes GET /v1/lab/inbox and GET
	// /v1/lab/stored on the api role (ref/api): a uid's inbox and one
	// message as MySQL holds them, bypassing every cache, for the lab's
	// store witness and read-after-ACK probe; GET /v1/lab/history (a
	// conversation's history as MongoDB stores it: the history witness);
	// and GET /v1/lab/procs (this
	// process's pid and roles, for the capacity search's CPU figures). Off
	// by default: they cost full reads and are no part of the contract.
	// imlab up and the scenario runner turn them on; imlab ref with
	// --lab-routes (IMLAB_LAB_ROUTES).
	LabRoutes bool
	// Defects are shipped defects put into this process on purpose (the
	// lab's negative controls, ref/defect); empty by default. Start hands
	// the set to every package where one of them lives. Only a lab-only
	// switch may set it (defect.Enable).
	Defects defect.Set
	// AdminUIDs may call POST /v1/admin/msg/purge (physical delete of a
	// history message); empty: the route refuses everyone (403).
	AdminUIDs []uint64

	// Logger receives the process's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig is one all-in-one process on 127.0.0.1:8080 with the Redis
// allocator, the strict policy and the seed's limits. Auth.Secret is empty:
// Validate refuses it until a secret is set.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		Roles:           []string{RoleAll},
		Allocator:       AllocatorRedis,
		Migrate:         true,
		ShutdownTimeout: 30 * time.Second,
		MySQL: MySQLConfig{
			MaxOpenConns:    64,
			MaxIdleConns:    64,
			ConnMaxLifetime: 30 * time.Minute,
			ConnMaxIdleTime: 5 * time.Minute,
			PingTimeout:     10 * time.Second,
		},
		Redis: RedisConfig{
			PoolSize:     128,
			DialTimeout:  2 * time.Second,
			ReadTimeout:  2 * time.Second,
			WriteTimeout: 2 * time.Second,
			PingTimeout:  5 * time.Second,
		},
		Auth:     auth.DefaultConfig(),
		API:      api.DefaultConfig(),
		Send:     send.DefaultConfig(),
		Pull:     pull.DefaultConfig(),
		Push:     push.DefaultConfig(),
		PushBus:  pushbus.DefaultConfig(),
		HotCache: hotcache.DefaultConfig(),
		Inbox:    inbox.DefaultConfig(),
		Segment:  seqalloc.DefaultSegmentConfig(),

		Fanout:    fanout.DefaultConfig(),
		Mongo:     MongoConfig{Database: "imlab", ConnectTimeout: 10 * time.Second, MaxPoolSize: 64},
		History:   history.DefaultConfig(),
		Reconcile: reconcile.DefaultConfig(),
		Retention: retention.DefaultConfig(),
	}
}

// withDefects hands the process's defect set to every package where one
// of the shipped defects lives.
func (c Config) withDefects() Config {
	c.Pull.Defects = c.Defects
	c.Inbox.Defects = c.Defects
	c.HotCache.Defects = c.Defects
	c.Send.Defects = c.Defects
	c.Fanout.InboxSink.Defects = c.Defects
	c.Fanout.Consumer.Defects = c.Defects
	c.History.Defects = c.Defects
	c.Retention.Defects = c.Defects
	return c
}

// fanoutPolicy tells whether an ack policy name is one of ref/fanout's
// (they need Kafka; the send service gets them from the fan-out runtime).
func fanoutPolicy(name string) bool {
	switch name {
	case fanout.PolicyStore, fanout.PolicyOutbox, fanout.PolicyQueue:
		return true
	}
	return false
}

// Validate checks every field and every part's config. Role names are
// checked against the registry by Start.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: server: %s", model.ErrInvalid, fmt.Sprintf(format, a...))
	}
	if c.Listen == "" {
		return bad("listen address is required")
	}
	if c.PprofListen != "" && !loopbackAddr(c.PprofListen) {
		return bad("pprof listen address %q must be a loopback host:port", c.PprofListen)
	}
	if len(c.Roles) == 0 {
		return bad("at least one role is required")
	}
	switch c.Allocator {
	case AllocatorRedis, AllocatorSegment:
	default:
		return bad("allocator %q (want redis or segment)", c.Allocator)
	}
	if c.ShutdownTimeout <= 0 {
		return bad("shutdown timeout must be > 0")
	}
	if c.MySQL.MaxOpenConns < 1 || c.MySQL.MaxIdleConns < 0 || c.MySQL.MaxIdleConns > c.MySQL.MaxOpenConns {
		return bad("mysql pool: need 1 <= max open, 0 <= max idle <= max open")
	}
	if c.MySQL.ConnMaxLifetime < 0 || c.MySQL.ConnMaxIdleTime < 0 || c.MySQL.PingTimeout <= 0 {
		return bad("mysql timeouts: lifetimes >= 0, ping timeout > 0")
	}
	if c.Redis.PoolSize < 1 || c.Redis.DialTimeout <= 0 || c.Redis.ReadTimeout <= 0 || c.Redis.WriteTimeout <= 0 || c.Redis.PingTimeout <= 0 {
		return bad("redis: pool size >= 1 and positive timeouts")
	}
	// The send pool must not starve: every committer holds one connection.
	if c.MySQL.MaxOpenConns < c.Send.Shards+1 {
		return bad("mysql max open conns %d must exceed send shards %d", c.MySQL.MaxOpenConns, c.Send.Shards)
	}
	if c.Mongo.Database == "" || c.Mongo.ConnectTimeout <= 0 || c.Mongo.MaxPoolSize < 1 {
		return bad("mongo: a database name, a positive connect timeout and a pool size >= 1")
	}
	for _, u := range c.AdminUIDs {
		if u == 0 {
			return bad("admin uid 0")
		}
	}
	// The fan-out policies are built at start from the runtime; check the
	// rest of the send config with the built-in one.
	sc := c.Send
	if fanoutPolicy(sc.Policy) {
		sc.Policy = "strict"
	}
	for name, v := range map[string]interface{ Validate() error }{
		"auth": c.Auth, "api": c.API, "send": sc, "pull": c.Pull, "push": c.Push, "pushbus": c.PushBus,
		"hotcache": c.HotCache, "inbox": c.Inbox, "segment": c.Segment,
		"fanout": c.Fanout, "history": c.History, "reconcile": c.Reconcile, "retention": c.Retention,
	} {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("server: %s config: %w", name, err)
		}
	}
	if c.Reconcile.Overlap <= c.Send.TxTimeout {
		return bad("reconcile overlap %s not above the send transaction timeout %s (a message committed late would be missed by the runs between full ones)",
			c.Reconcile.Overlap, c.Send.TxTimeout)
	}
	if h := c.Retention.Horizon(); c.Reconcile.Horizon > h {
		return bad("reconcile horizon %s beyond retention's %s (a row deleted earlier leaves no tombstone: the repair would write it again)",
			c.Reconcile.Horizon, h)
	}
	return nil
}

// Defects lists the shipped defects (ref/defect) a lab may enable through
// Config.Defects: the lab's negative controls.
func Defects() []defect.Info { return defect.List() }

// ParseDefects builds a Config.Defects from names (as ref/defect's Parse:
// an unknown name is an error). Whoever calls it is the lab-only switch.
func ParseDefects(names ...string) (defect.Set, error) { return defect.Parse(names...) }
