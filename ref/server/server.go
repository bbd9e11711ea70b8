// Package server wires one reference-server process from its Config: it
// opens the MySQL pool, the Redis client and, when the backends name them,
// the Kafka runtime (ref/fanout) and the MongoDB history store
// (ref/history); applies the schema (optional); builds the write path
// (allocator -> inbox.Writer -> send.Service with the hot cache and the
// push hub as commit hooks, plus the fan-out ack policies), the read path
// (pull.Service) and the HTTP surface (ref/api); runs the configured roles;
// and stops all of it in order.
//
// With Config.PushBus in mode redis (ref/pushbus), every commit hook chain
// of the process also publishes the committed entries, and a process
// running the api role subscribes and feeds its push hub: devices
// connected to an api-only process get what a consumer process wrote. The
// bus skips a process's own messages, so nothing is pushed twice.
//
// # Roles
//
// Roles are a registry (name -> start function, in start order):
//
//	api         the HTTP surface (contract routes, history routes when MongoDB
//	            is configured, admin purge, /v1/lab/lag, /metrics, /healthz)
//	relay       the outbox relay (needs Kafka)
//	consumer    the inbox tier of the fan-out, and the history tier when
//	            MongoDB is configured and this process does not run "history"
//	history     the history tier alone, its own consumer group (needs Kafka
//	            and MongoDB)
//	reconciler  forward/reverse/push reconciliation and retention timers
//
// "all" expands to every role whose backends this process has (without
// Kafka brokers: api and reconciler; without MongoDB: no history role);
// a role named explicitly without its backends is an error.
//
// Shared parts are built once per process: the seq allocator, the fan-out
// runtime and its lag monitor (whenever Kafka brokers are given), the
// history store and service (whenever a MongoDB URI is given), and the core
// (Core: built on first use; the fan-out's member source and commit hooks
// resolve it lazily, because the ack policies must exist before it).
//
// Every process serves /metrics, /healthz and GET /v1/lab/lag on
// cfg.Listen: through the api role, or, when the process does not run it,
// through a small ops listener with just those three routes. /v1/lab/lag
// is the lag monitor's latest snapshot as JSON (per group and partition:
// records behind and the age of the oldest unprocessed message; outbox
// backlog; dead letters). Like /metrics, which carries the same figures, it
// needs no token: it holds no user content. Keep cfg.Listen on loopback (the
// default) unless the network in front is trusted.
//
// With Config.LabRoutes the api role also mounts the lab routes GET
// /v1/lab/inbox and GET /v1/lab/stored (ref/api; read by ref/pull's
// StoreReader straight from MySQL) and GET /v1/lab/history (the history
// witness: ref/history's Service.Witness straight from MongoDB; 501
// without MongoDB), off by default.
//
// With MongoDB the api role also mounts POST /v1/admin/msg/purge
// ({"conv_id","conv_seq"}: physical delete; only for the uids in
// Config.AdminUIDs, 403 for everyone else, logged) and POST /v1/msg/read
// ({"conv_id","from_seq","to_seq"}: the 1:1 is_read flag for the caller).
// Under the strict policy, which publishes nothing, a commit hook puts one
// locator event per new message on the fan-out topic so that the history
// tier still fills MongoDB (the inbox tier finds those rows written).
//
// # Profiling
//
// Config.PprofListen (imlab ref/up --pprof 127.0.0.1:6060, or IMLAB_PPROF)
// serves net/http/pprof on a loopback listener of its own, never on the API
// address; off by default. Example: go tool pprof -seconds 10
// http://127.0.0.1:6060/debug/pprof/profile while imlab load runs.
//
// Shutdown order (Stop, or Run's context cancelled):
//  1. the ops listener, then roles in reverse start order (the api role:
//     stop accepting, finish in-flight requests, close every WebSocket
//     with 1001; the runners: cancel and wait);
//  2. send.Service.Close (no new sends; queued batches are committed and
//     answered), the push hub;
//  3. the lag monitor and the fan-out runtime (producer flushed, bounded);
//  4. the MongoDB client;
//  5. the Redis client and the MySQL pool.
//
// It holds no business logic and must not be imported by the services it
// wires.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"imlab/ref/api"
	"imlab/ref/auth"
	"imlab/ref/fanout"
	"imlab/ref/hotcache"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/pull"
	"imlab/ref/push"
	"imlab/ref/pushbus"
	"imlab/ref/rkeys"
	"imlab/ref/schema"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

// Backends says where the servers are (compose.Backends carries the same).
type Backends struct {
	MySQLDSN     string
	RedisAddr    string
	KafkaBrokers []string
	MongoURI     string
}

// RoleFunc starts a role and returns how to stop it. It must not block
// beyond start-up; stop must return by the context's deadline.
type RoleFunc func(ctx context.Context, p *Process) (stop func(context.Context) error, err error)

// Backends a role may need (Role.Needs).
const (
	NeedKafka = "kafka"
	NeedMongo = "mongo"
)

// Role is one registry entry.
type Role struct {
	Name  string
	Start RoleFunc
	// Needs lists the backends (NeedKafka, NeedMongo) the role cannot run
	// without; "all" leaves out roles whose backends are not configured.
	Needs []string
}

// Roles is the role registry, in start order.
type Roles []Role

// Role names of DefaultRoles.
const (
	RoleAPI        = "api"
	RoleRelay      = "relay"
	RoleConsumer   = "consumer"
	RoleHistory    = "history"
	RoleReconciler = "reconciler"
)

// DefaultRoles is the whole registry: api, relay, consumer, history,
// reconciler (see the package doc).
func DefaultRoles() Roles {
	return Roles{
		{Name: RoleAPI, Start: StartAPI},
		{Name: RoleRelay, Start: StartRelay, Needs: []string{NeedKafka}},
		{Name: RoleConsumer, Start: StartConsumer, Needs: []string{NeedKafka}},
		{Name: RoleHistory, Start: StartHistoryTier, Needs: []string{NeedKafka, NeedMongo}},
		{Name: RoleReconciler, Start: StartReconciler},
	}
}

// has tells whether the backends provide what a role needs.
func (b Backends) has(need string) bool {
	switch need {
	case NeedKafka:
		return len(b.KafkaBrokers) > 0
	case NeedMongo:
		return b.MongoURI != ""
	}
	return false
}

// Names lists the registered role names.
func (r Roles) Names() []string {
	out := make([]string, len(r))
	for i, x := range r {
		out[i] = x.Name
	}
	return out
}

// resolve turns the configured names into registry entries, in registry
// order; "all" selects every role whose backends b provides (the others
// are returned as left out). A role named explicitly whose backends are
// missing is an error.
func (r Roles) resolve(names []string, b Backends) (Roles, []string, error) {
	want := map[string]bool{}
	all := false
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == RoleAll {
			all = true
			continue
		}
		found := false
		for _, x := range r {
			if x.Name == n {
				found = true
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("%w: server: unknown role %q (known: %s, all)", model.ErrInvalid, n, strings.Join(r.Names(), ", "))
		}
		want[n] = true
	}
	var out Roles
	var left []string
	seen := map[string]bool{}
	for _, x := range r {
		if x.Start == nil || x.Name == "" || seen[x.Name] {
			return nil, nil, fmt.Errorf("%w: server: role registry entry %q is malformed or repeated", model.ErrInvalid, x.Name)
		}
		seen[x.Name] = true
		var missing []string
		for _, n := range x.Needs {
			if !b.has(n) {
				missing = append(missing, n)
			}
		}
		switch {
		case want[x.Name] && len(missing) > 0:
			return nil, nil, fmt.Errorf("%w: server: role %s needs %s (give the backends' addresses)", model.ErrInvalid, x.Name, strings.Join(missing, " and "))
		case want[x.Name]:
			out = append(out, x)
		case all && len(missing) > 0:
			left = append(left, x.Name+" (no "+strings.Join(missing, ", ")+")")
		case all:
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%w: server: no role to run", model.ErrInvalid)
	}
	return out, left, nil
}

// Process is one running process: its config, clients, metrics registry and
// the shared services built on first use.
type Process struct {
	Cfg      Config
	Backends Backends
	DB       *sql.DB
	Redis    *redis.Client
	Keys     rkeys.Keys
	Registry *prometheus.Registry
	Log      *slog.Logger
	Auth     *auth.Authority

	// SendPolicies are extra ack policies (ref/fanout) handed to the send
	// service; a role that provides one appends it before the first Core
	// call (roles start in registry order).
	SendPolicies []send.Policy
	// SendHooks are extra commit hooks for the send service, same rule.
	SendHooks []send.CommitHook
	// History, when a role earlier in the registry sets it, serves the
	// history routes (GET /v1/history, revoke, delete, conv/clear); nil
	// leaves them answering 501.
	History api.HistoryService

	// repairs remembers what this process's reconciler repaired
	// (RepairsPath); retention what its retention deleted (RetentionPath).
	repairs   repairLog
	retention retentionLog

	coreOnce sync.Once
	core     *Core
	coreErr  error

	// baseCtx outlives Start's context: lazy builds from role goroutines
	// use it.
	baseCtx   context.Context
	roleSet   map[string]bool
	roleOrder []string
	alloc     seqalloc.Allocator
	fan       *fanoutPart  // nil without Kafka brokers
	hist      *historyPart // nil without MongoDB
	bus       *pushbus.Bus // nil in push bus mode local

	mu        sync.Mutex
	apiAddr   net.Addr
	opsAddr   net.Addr
	pprofAddr net.Addr
	stops     []namedStop
	stopped   bool
	done      chan struct{}
	stopErr   error
}

type namedStop struct {
	name string
	fn   func(context.Context) error
}

// Core is the shared write and read path of the process.
type Core struct {
	Allocator seqalloc.Allocator
	Writer    *inbox.Writer
	Cache     *hotcache.Cache
	Hub       *push.Hub
	Send      *send.Service
	Pull      *pull.Service
}

// Core builds (once) and returns the shared services.
func (p *Process) Core(ctx context.Context) (*Core, error) {
	p.coreOnce.Do(func() { p.core, p.coreErr = p.buildCore(ctx) })
	return p.core, p.coreErr
}

func (p *Process) buildCore(ctx context.Context) (*Core, error) {
	cfg := p.Cfg
	alloc := p.alloc
	w, err := inbox.NewWriter(alloc, cfg.Inbox, p.Registry)
	if err != nil {
		return nil, fmt.Errorf("server: inbox writer: %w", err)
	}
	hc := cfg.HotCache
	hc.Logger = p.Log
	cache, err := hotcache.New(p.Redis, p.Keys, hc, p.Registry)
	if err != nil {
		return nil, fmt.Errorf("server: hot cache: %w", err)
	}
	hub, err := push.New(cfg.Push, p.Registry)
	if err != nil {
		return nil, fmt.Errorf("server: push hub: %w", err)
	}
	sc := cfg.Send
	sc.Policies = append(append([]send.Policy(nil), sc.Policies...), p.SendPolicies...)
	if fanoutPolicy(sc.Policy) {
		if p.fan == nil {
			hub.Close()
			return nil, fmt.Errorf("%w: server: ack policy %q needs Kafka brokers", model.ErrInvalid, sc.Policy)
		}
		pol, err := p.fan.rt.Policy(sc.Policy)
		if err != nil {
			hub.Close()
			return nil, fmt.Errorf("server: ack policy %s: %w", sc.Policy, err)
		}
		sc.Policies = append(sc.Policies, pol)
	}
	hooks := []send.CommitHook{cache, hub}
	if p.bus != nil {
		hooks = append(hooks, p.bus)
	}
	hooks = append(hooks, p.SendHooks...)
	if !fanoutPolicy(sc.Policy) && p.fan != nil && p.hist != nil {
		hooks = append(hooks, strictHistory{p: p, topic: cfg.Fanout.Topics.Fanout})
	}
	snd, err := send.New(ctx, sc, p.DB, w, p.Registry, hooks...)
	if err != nil {
		hub.Close()
		return nil, fmt.Errorf("server: send: %w", err)
	}
	pc := cfg.Pull
	pc.Logger = p.Log
	pl, err := pull.New(p.DB, cache, pc, p.Registry)
	if err != nil {
		_ = snd.Close()
		hub.Close()
		return nil, fmt.Errorf("server: pull: %w", err)
	}
	return &Core{Allocator: alloc, Writer: w, Cache: cache, Hub: hub, Send: snd, Pull: pl}, nil
}

// APIAddr is the address the api role listens on (nil without it).
func (p *Process) APIAddr() net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.apiAddr
}

// Addr is the address this process serves on: the api role's, or the ops
// listener's (/metrics, /healthz, /v1/lab/lag) when it runs no api role.
func (p *Process) Addr() net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apiAddr != nil {
		return p.apiAddr
	}
	return p.opsAddr
}

// RoleNames lists the roles this process runs, in start order.
func (p *Process) RoleNames() []string { return slices.Clone(p.roleOrder) }

// Runs tells whether this process runs the named role.
func (p *Process) Runs(role string) bool { return p.roleSet[role] }

// Done is closed when the process has stopped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Start opens the clients, migrates (if configured) and starts the
// configured roles of registry. On error everything started is stopped.
func Start(ctx context.Context, cfg Config, b Backends, registry Roles) (p *Process, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefects()
	if b.MySQLDSN == "" || b.RedisAddr == "" {
		return nil, fmt.Errorf("%w: server: a MySQL DSN and a Redis address are required", model.ErrInvalid)
	}
	roles, left, err := registry.resolve(cfg.Roles, b)
	if err != nil {
		return nil, err
	}
	if fanoutPolicy(cfg.Send.Policy) && !b.has(NeedKafka) {
		return nil, fmt.Errorf("%w: server: ack policy %q needs Kafka brokers", model.ErrInvalid, cfg.Send.Policy)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	authority, err := auth.New(cfg.Auth)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("server: register go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("server: register process collector: %w", err)
	}
	p = &Process{
		Cfg: cfg, Backends: b, Keys: rkeys.Keys{Prefix: cfg.Redis.KeyPrefix},
		Registry: reg, Log: log, Auth: authority, done: make(chan struct{}),
		baseCtx: context.WithoutCancel(ctx), roleSet: map[string]bool{},
	}
	for _, r := range roles {
		p.roleSet[r.Name] = true
		p.roleOrder = append(p.roleOrder, r.Name)
	}
	if len(left) > 0 {
		log.Info("server: roles left out of \"all\" for want of backends", "left_out", strings.Join(left, ", "))
	}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
			defer cancel()
			if serr := p.Stop(sctx); serr != nil {
				err = errors.Join(err, serr)
			}
			p = nil
		}
	}()

	mc := cfg.MySQL
	if mc.DriverLog == nil {
		mc.DriverLog = log
	}
	db, err := OpenMySQL(ctx, b.MySQLDSN, mc)
	if err != nil {
		return p, err
	}
	p.DB = db
	p.onStop("mysql", func(context.Context) error { return db.Close() })
	rdb, err := OpenRedis(ctx, b.RedisAddr, cfg.Redis)
	if err != nil {
		return p, err
	}
	p.Redis = rdb
	p.onStop("redis", func(context.Context) error { return rdb.Close() })
	if cfg.PushBus.Mode == pushbus.ModeRedis {
		// Registered before the fan-out runtime and the core: stopped
		// after them, so their last commit hooks still publish.
		bus, err := pushbus.New(rdb, p.Keys, cfg.PushBus, reg)
		if err != nil {
			return p, fmt.Errorf("server: push bus: %w", err)
		}
		p.bus = bus
		p.onStop("push bus", func(context.Context) error { return bus.Close() })
	}
	if cfg.Migrate {
		applied, err := schema.Migrate(ctx, db)
		if err != nil {
			return p, fmt.Errorf("server: migrate: %w", err)
		}
		if len(applied) > 0 {
			log.Info("server: schema migrated", "applied", applied)
		}
		if err := schema.ApplyDefects(ctx, db, cfg.Defects); err != nil {
			return p, fmt.Errorf("server: migrate: %w", err)
		}
	}
	if !cfg.Defects.Empty() {
		log.Warn("server: SHIPPED DEFECTS ENABLED (lab negative control): this process loses or misorders messages on purpose", "defects", cfg.Defects.String())
	}
	switch cfg.Allocator {
	case AllocatorSegment:
		p.alloc = seqalloc.NewSegment(db, cfg.Segment)
	default:
		p.alloc = seqalloc.NewRedis(rdb, p.Keys)
	}
	if b.has(NeedMongo) {
		if err := p.startHistory(ctx); err != nil {
			return p, err
		}
	}
	if b.has(NeedKafka) {
		if err := p.startFanout(ctx); err != nil {
			return p, err
		}
	}
	// The core is closed after every role: register its stop now, it
	// closes only what was built.
	p.onStop("core", p.closeCore)
	for _, r := range roles {
		stop, err := r.Start(ctx, p)
		if err != nil {
			return p, fmt.Errorf("server: start role %s: %w", r.Name, err)
		}
		if stop != nil {
			p.onStop("role "+r.Name, stop)
		}
		log.Info("server: role started", "role", r.Name)
	}
	if p.bus != nil && p.roleSet[RoleAPI] {
		core, err := p.Core(ctx)
		if err != nil {
			return p, err
		}
		if err := p.bus.Subscribe(ctx, core.Hub); err != nil {
			return p, fmt.Errorf("server: push bus: %w", err)
		}
		// Stopped first: the hub gets nothing after the roles stop.
		p.onStop("push bus subscriber", func(context.Context) error { return p.bus.Unsubscribe() })
	}
	if !p.roleSet[RoleAPI] {
		if err := p.startOps(ctx); err != nil {
			return p, err
		}
	}
	if p.Cfg.PprofListen != "" {
		if err := p.startPprof(ctx); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (p *Process) onStop(name string, fn func(context.Context) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stops = append(p.stops, namedStop{name, fn})
}

func (p *Process) closeCore(context.Context) error {
	if p.core == nil {
		return nil
	}
	err := p.core.Send.Close()
	p.core.Hub.Close()
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// Stop stops every role (newest first), then the core, then the clients,
// bounded by ctx. It is safe to call more than once; later calls return the
// first result.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		<-p.done
		return p.stopErr
	}
	p.stopped = true
	stops := p.stops
	p.stops = nil
	p.mu.Unlock()
	var errs []error
	for i := len(stops) - 1; i >= 0; i-- {
		if err := stops[i].fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", stops[i].name, err))
		}
	}
	p.stopErr = errors.Join(errs...)
	close(p.done)
	return p.stopErr
}

// Run starts the process with the default registry and blocks until ctx is
// cancelled, then stops it within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, b Backends) error {
	return RunRoles(ctx, cfg, b, DefaultRoles(), nil)
}

// RunRoles is Run with a given registry; ready (optional) is called once
// every role has started.
func RunRoles(ctx context.Context, cfg Config, b Backends, registry Roles, ready func(*Process)) error {
	p, err := Start(ctx, cfg, b, registry)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(p)
	}
	<-ctx.Done()
	p.Log.Info("server: stopping", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	err = p.Stop(sctx)
	p.Log.Info("server: stopped", "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// StartAPI is the api role: it builds the core and serves the HTTP surface
// on cfg.Listen.
func StartAPI(ctx context.Context, p *Process) (func(context.Context) error, error) {
	core, err := p.Core(ctx)
	if err != nil {
		return nil, err
	}
	deps := api.Deps{
		Auth:     p.Auth,
		Send:     core.Send,
		Pull:     core.Pull,
		Hub:      hubAdapter{core.Hub},
		Encoder:  push.AppendItem,
		Registry: p.Registry,
		Logger:   p.Log,
	}
	hs := p.History
	if hs == nil && p.hist != nil {
		hs = p.hist.svc
	}
	if hs != nil {
		deps.History = api.HistoryRoutes(hs)
	}
	if p.hist != nil {
		deps.Extra = append(deps.Extra, p.historyExtraRoutes()...)
	}
	deps.Open = append(deps.Open, api.OpenRoute{Path: LagPath, Name: "lab_lag", Handle: p.lagAnswer},
		api.OpenRoute{Path: LagNowPath, Name: "lab_lag_now", Handle: p.lagNowAnswer},
		api.OpenRoute{Path: TimePath, Name: "lab_time", Handle: clockAnswer},
		api.OpenRoute{Path: RepairsPath, Name: "lab_repairs", Handle: p.repairsAnswer},
		api.OpenRoute{Path: RetentionPath, Name: "lab_retention", Handle: p.retentionAnswer})
	if p.Cfg.LabRoutes {
		deps.Open = append(deps.Open, api.OpenRoute{Path: ProcsPath, Name: "lab_procs", Handle: p.procsAnswer})
		if p.fan != nil {
			deps.Open = append(deps.Open, api.OpenRoute{Path: DeadLettersPath, Name: "lab_deadletters", Handle: p.deadLettersAnswer})
		}
		outbox := func(ctx context.Context, msgID uint64) (int, error) { return fanout.OutboxStatus(ctx, p.DB, msgID) }
		lab, err := pull.NewStoreReader(p.DB, core.Send.PolicyName(), p.Cfg.API.RequestTimeout, outbox)
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
		deps.Lab = lab
		if p.hist != nil {
			deps.LabHistory = p.hist.svc
		}
	}
	srv, err := api.New(p.Cfg.API, deps)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.Cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("api: listen %s: %w", p.Cfg.Listen, err)
	}
	p.mu.Lock()
	p.apiAddr = ln.Addr()
	p.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		if serr := <-served; serr != nil {
			err = errors.Join(err, serr)
		}
		return err
	}, nil
}

// hubAdapter presents *push.Hub as api.Hub.
type hubAdapter struct{ h *push.Hub }

func (a hubAdapter) Subscribe(uid uint64, did string) (api.Subscription, error) {
	s, err := a.h.Subscribe(uid, did)
	if err != nil {
		return nil, err
	}
	return subAdapter{s}, nil
}

type subAdapter struct{ *push.Subscription }

func (s subAdapter) Frames() <-chan []byte { return s.C }

// MySQLDSN normalizes a go-sql-driver DSN: parseTime=true, loc=UTC,
// interpolateParams=true.
func MySQLDSN(dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: server: mysql dsn: %v", model.ErrInvalid, err)
	}
	if c.DBName == "" {
		return "", fmt.Errorf("%w: server: mysql dsn names no database", model.ErrInvalid)
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true
	return c.FormatDSN(), nil
}

// OpenMySQL opens and pings the pool.
func OpenMySQL(ctx context.Context, dsn string, cfg MySQLConfig) (*sql.DB, error) {
	norm, err := MySQLDSN(dsn)
	if err != nil {
		return nil, err
	}
	mc, err := mysql.ParseDSN(norm)
	if err != nil {
		return nil, fmt.Errorf("%w: server: mysql dsn: %v", model.ErrInvalid, err)
	}
	if cfg.DriverLog != nil {
		mc.Logger = driverLog{cfg.DriverLog}
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("server: open mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxIdleConns)
	db.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	db.SetConnMaxIdleTime(cfg.ConnMaxIdleTime)
	pctx, cancel := context.WithTimeout(ctx, cfg.PingTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: server: mysql ping: %v", model.ErrUnavailable, err)
	}
	return db, nil
}

// driverLog passes the MySQL driver's lines to a process's logger.
type driverLog struct{ l *slog.Logger }

func (d driverLog) Print(v ...any) {
	d.l.Warn("mysql driver", "msg", strings.TrimSpace(fmt.Sprint(v...)))
}

// OpenRedis opens and pings the client.
func OpenRedis(ctx context.Context, addr string, cfg RedisConfig) (*redis.Client, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     cfg.PoolSize,
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout,
	})
	pctx, cancel := context.WithTimeout(ctx, cfg.PingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%w: server: redis ping %s: %v", model.ErrUnavailable, addr, err)
	}
	return rdb, nil
}
