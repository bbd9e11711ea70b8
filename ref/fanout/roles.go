package fanout

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/rkeys"
	"imlab/ref/send"
)

// Deps is what the fan-out roles take from their process (ref/server
// builds them; this package does not import it).
type Deps struct {
	DB       *sql.DB
	Redis    redis.UniversalClient
	Keys     rkeys.Keys
	Registry prometheus.Registerer
	Log      *slog.Logger
	Brokers  []string
	// Members lists a group's members (send.Service.Members).
	Members MembersFunc
	// NewWriter builds an inbox writer over the process's allocator with
	// the given dedup strategy (nil: uk_uid_msg).
	NewWriter func(d inbox.Dedup) (*inbox.Writer, error)
	// Hooks run after inbox commits: the hot cache, then the push hub.
	Hooks []send.CommitHook
	// History, when set, gets its own consumer tier.
	History HistoryWriter
}

// Config is the fan-out side of one process.
type Config struct {
	Topics Topics
	// Dedup is the consumers' strategy: uk_uid_msg, mq_dedup or redis.
	Dedup          string
	Producer       ProducerConfig
	Consumer       ConsumerConfig // the inbox tier; Brokers/Topic/DLQ are filled in
	HistoryGroup   string         // the history tier's consumer group
	InboxSink      InboxSinkConfig
	Relay          RelayConfig
	Monitor        MonitorConfig
	Direct         DirectConfig
	HealthInterval time.Duration
}

// DefaultConfig: im.fanout.msg with 16 partitions, uk_uid_msg, groups
// imlab-inbox and imlab-history.
func DefaultConfig() Config {
	return Config{
		Topics: DefaultTopics(), Dedup: DedupUK, Producer: DefaultProducerConfig(), Consumer: DefaultConsumerConfig(),
		HistoryGroup: "imlab-history", InboxSink: DefaultInboxSinkConfig(), Relay: DefaultRelayConfig(),
		Monitor: DefaultMonitorConfig(), Direct: DefaultDirectConfig(), HealthInterval: time.Second,
	}
}

// Validate checks the parts that do not need brokers.
func (c Config) Validate() error {
	if err := c.Topics.Validate(); err != nil {
		return err
	}
	switch c.Dedup {
	case DedupUK, DedupTable, DedupRedis:
	default:
		return fmt.Errorf("%w: dedup %q", model.ErrInvalid, c.Dedup)
	}
	if c.HistoryGroup == "" || c.HistoryGroup == c.Consumer.Group {
		return fmt.Errorf("%w: the history tier needs its own consumer group", model.ErrInvalid)
	}
	if c.HealthInterval < 100*time.Millisecond {
		return fmt.Errorf("%w: health interval below 100ms", model.ErrInvalid)
	}
	if err := c.InboxSink.Validate(); err != nil {
		return err
	}
	if err := c.Consumer.ValidateWindow(); err != nil {
		return err
	}
	return c.Relay.Validate()
}

// Runtime is the fan-out side of one process: one producer and one set of
// metrics shared by its roles and its ack policy. Close releases them.
type Runtime struct {
	cfg  Config
	deps Deps
	m    *Metrics
	log  *slog.Logger

	mu     sync.Mutex
	prod   *Producer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	relay  *Relay // the in-process relay, when this process runs one
}

// NewRuntime checks cfg and deps and creates the topics if missing.
func NewRuntime(ctx context.Context, cfg Config, deps Deps) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.DB == nil || len(deps.Brokers) == 0 || deps.Members == nil || deps.NewWriter == nil || deps.Registry == nil {
		return nil, fmt.Errorf("%w: fan-out needs a database, brokers, a member source, a writer factory and a registry", model.ErrInvalid)
	}
	log := deps.Log
	if log == nil {
		log = slog.Default()
	}
	m, err := NewMetrics(deps.Registry)
	if err != nil {
		return nil, err
	}
	cfg.Producer.Brokers = deps.Brokers
	prod, err := NewProducer(cfg.Producer)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := EnsureTopics(tctx, prod.Client(), cfg.Topics); err != nil {
		prod.Close()
		return nil, err
	}
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Runtime{cfg: cfg, deps: deps, m: m, log: log, prod: prod, ctx: rctx, cancel: rcancel}, nil
}

// Metrics are the runtime's series.
func (r *Runtime) Metrics() *Metrics { return r.m }

// Producer is the shared producer.
func (r *Runtime) Producer() *Producer { return r.prod }

// Close stops the runtime's own goroutines (direct fan-out, health) and
// the producer, after flushing what it buffered (bounded by ctx).
func (r *Runtime) Close(ctx context.Context) {
	_ = r.prod.Flush(ctx)
	r.cancel()
	r.wg.Wait()
	r.prod.Close()
}

func (r *Runtime) inboxSink() (*InboxSink, error) {
	st, err := NewStrategy(r.cfg.Dedup, StrategyDeps{Redis: r.deps.Redis, Keys: r.deps.Keys, DB: r.deps.DB, Defects: r.cfg.InboxSink.Defects})
	if err != nil {
		return nil, err
	}
	w, err := r.deps.NewWriter(st)
	if err != nil {
		return nil, err
	}
	return NewInboxSink(r.cfg.InboxSink, r.deps.DB, w, st, r.deps.Members, r.log, r.deps.Hooks...)
}

// Policy builds the named ack policy ("store", "outbox" or "queue") for
// send.Config.Policies. store and outbox get a direct fan-out for when
// the queue is down; outbox wakes this process's relay when it runs one.
func (r *Runtime) Policy(name string) (send.Policy, error) {
	switch name {
	case PolicyStore, PolicyOutbox:
		sink, err := r.inboxSink()
		if err != nil {
			return nil, err
		}
		direct, err := NewDirect(r.ctx, r.cfg.Direct, sink, r.log)
		if err != nil {
			return nil, err
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); <-r.ctx.Done(); direct.Wait() }()
		if name == PolicyStore {
			return NewStore(r.prod, r.cfg.Topics.Fanout, direct, r.m, r.log)
		}
		health := NewHealth(r.ctx, r.prod, r.cfg.HealthInterval)
		r.wg.Add(1)
		go func() { defer r.wg.Done(); <-r.ctx.Done(); health.Wait() }()
		return NewOutbox(r.cfg.Topics.Fanout, r.wakeRelay, health, direct)
	case PolicyQueue:
		return NewQueue(r.prod, r.cfg.Topics.Fanout, r.m, r.log)
	}
	return nil, fmt.Errorf("%w: fan-out policy %q", model.ErrInvalid, name)
}

func (r *Runtime) wakeRelay() {
	r.mu.Lock()
	rl := r.relay
	r.mu.Unlock()
	if rl != nil {
		rl.Wake()
	}
}

// RunRelay is the relay role: it blocks until ctx is done.
func (r *Runtime) RunRelay(ctx context.Context) error {
	cfg := r.cfg.Relay
	if cfg.Logger == nil {
		cfg.Logger = r.log
	}
	rl, err := NewRelay(cfg, r.deps.DB, r.prod, r.m)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.relay = rl
	r.mu.Unlock()
	return rl.Run(ctx)
}

// RunConsumer is the consumer role: the inbox tier and, with a history
// writer, the history tier, each its own group; it blocks until ctx is
// done and returns the first tier's error.
func (r *Runtime) RunConsumer(ctx context.Context) error {
	sink, err := r.inboxSink()
	if err != nil {
		return err
	}
	tiers := []struct {
		cfg ConsumerConfig
		h   Handler
	}{}
	cc := r.cfg.Consumer
	cc.Brokers, cc.Topic, cc.DLQTopic = r.deps.Brokers, r.cfg.Topics.Fanout, r.cfg.Topics.DLQ
	if cc.Logger == nil {
		cc.Logger = r.log
	}
	tiers = append(tiers, struct {
		cfg ConsumerConfig
		h   Handler
	}{cc, sink})
	if r.deps.History != nil {
		hs, err := NewHistorySink(r.deps.DB, r.deps.History)
		if err != nil {
			return err
		}
		hc := cc
		hc.Group, hc.Tier = r.cfg.HistoryGroup, "history"
		hc.MaxBatch, hc.MaxPollRecords = min(hc.MaxBatch, HistoryMaxBatch), min(hc.MaxPollRecords, HistoryMaxPollRecords)
		// A stalled history store makes the history tier wait (its own
		// group: the inbox tier goes on), not dead-letter.
		hc.RetryTransient = true
		tiers = append(tiers, struct {
			cfg ConsumerConfig
			h   Handler
		}{hc, hs})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(tiers))
	for _, t := range tiers {
		c, err := NewConsumer(t.cfg, t.h, r.prod, r.m)
		if err != nil {
			cancel()
			return err
		}
		go func() { errs <- c.Run(ctx) }()
	}
	var first error
	for range tiers {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// NewMonitor builds the lag monitor over this runtime's topics and tiers
// (the JSON endpoint serves its Snapshot; Run updates /metrics): the inbox
// group, and the history group when withHistory (a process that runs or
// serves a history tier).
func (r *Runtime) NewMonitor(withHistory bool) (*Monitor, error) {
	mc := r.cfg.Monitor
	mc.Brokers, mc.Topic, mc.DLQTopic = r.deps.Brokers, r.cfg.Topics.Fanout, r.cfg.Topics.DLQ
	mc.Groups = []string{r.cfg.Consumer.Group}
	if withHistory {
		mc.Groups = append(mc.Groups, r.cfg.HistoryGroup)
	}
	if mc.Logger == nil {
		mc.Logger = r.log
	}
	return NewMonitor(mc, r.deps.DB, r.m)
}
