package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/defect"
	"imlab/ref/model"
)

// Delivery is one fan-out record handed to a Handler.
type Delivery struct {
	Event     Event
	Topic     string
	Partition int32
	Offset    int64
	// OutboxID is mq_outbox.id when the relay published the record (0
	// otherwise); the inbox tier confirms such rows (status 2).
	OutboxID uint64
}

// Handler is one tier's sink. Handle gets deliveries of one partition in
// offset order and must be idempotent: a delivery may come again after a
// crash, a rebalance or a replay. An error wrapping model.ErrInvalid (see
// Permanent) is never retried.
type Handler interface {
	Handle(ctx context.Context, ds []Delivery) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, ds []Delivery) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, ds []Delivery) error { return f(ctx, ds) }

// Permanent marks err as one that no retry can fix (it wraps
// model.ErrInvalid): the delivery goes to the dead-letter topic at once.
func Permanent(err error) error {
	if errors.Is(err, model.ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: %w", model.ErrInvalid, err)
}

func isPermanent(err error) bool { return errors.Is(err, model.ErrInvalid) }

// ConsumerConfig configures one consumer tier (one consumer group).
type ConsumerConfig struct {
	Brokers []string
	// Group is the consumer group; each tier (inbox, history) has its own,
	// so a slow tier never holds back another.
	Group string
	// Tier names the tier in logs and metrics ("inbox", "history").
	Tier  string
	Topic string
	// DLQTopic receives deliveries that failed MaxAttempts times or are
	// permanently bad, with the reason in a header.
	DLQTopic string
	// MaxBatch bounds the deliveries handed to one Handle call.
	MaxBatch int
	// MaxPollRecords bounds records taken from the client per poll.
	MaxPollRecords int
	// QueueDepth bounds the polled chunks waiting for one partition loop.
	QueueDepth int
	// MessageTimeout bounds the handling of one delivery: a batch attempt
	// gets MessageTimeout per delivery up to BatchTimeout, a delivery retried
	// alone gets MessageTimeout.
	MessageTimeout time.Duration
	BatchTimeout   time.Duration
	// BatchAttempts is how often a whole batch is tried before its
	// deliveries are tried one by one.
	BatchAttempts int
	// MaxAttempts bounds the tries of one delivery (batch tries included)
	// before it is dead-lettered: at most MaxAttempts-1 retries.
	MaxAttempts int
	// RetryTransient retries a delivery that fails with a non-permanent
	// error (store unavailable, timeout) with backoff until it succeeds or
	// the worker stops, instead of dead-lettering it after MaxAttempts: the
	// partition waits for the store to come back. For a tier with its own
	// consumer group (history), where waiting holds back nothing else and
	// a dead letter would leave a hole until replayed. Permanent errors are
	// still dead-lettered at once.
	RetryTransient bool
	// TransientWindow: without RetryTransient, a delivery failing with a
	// non-permanent error is retried (backoff up to BackoffMax) until
	// MaxAttempts are used *and* this long has passed since its batch
	// first failed, then dead-lettered. MaxAttempts alone spends well
	// under a second of backoff, so a one-second store outage (a reset
	// connection) dead-lettered deliveries: a hole in their inboxes until
	// the outbox republished them (ConfirmTimeout later) or reconciliation
	// repaired them, and their conversation's order broken. 0: MaxAttempts
	// only. Bounded by MaxTransientWindow; a process's configuration
	// (Config.Validate) keeps it at MinTransientWindow or more unless
	// LabShortWindow is set.
	TransientWindow time.Duration
	// LabShortWindow (LAB ONLY) lets a process run with a TransientWindow
	// below MinTransientWindow (down to MinLabTransientWindow), so that a
	// scenario can keep a backend down past it within seconds and see
	// records reach the dead-letter topic. Set through the server's lab
	// switch only (ref/server LabTransientWindow).
	LabShortWindow bool
	// Defects are shipped defects enabled on purpose (ref/defect; empty by
	// default): the lab's negative controls.
	Defects     defect.Set
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// CommitInterval is how often marked (processed) offsets are committed.
	CommitInterval   time.Duration
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Logger           *slog.Logger
}

// Batch bounds of the history tier, which keeps the smaller batches: its
// store (MongoDB, or FerretDB at a few hundred writes/s) must finish one
// within BatchTimeout.
const (
	HistoryMaxBatch       = 256
	HistoryMaxPollRecords = 4096
)

// DefaultConsumerConfig returns the defaults: batches of 1024 (a drain
// pays each transaction's round trips — fence lock, insert, fence raise,
// commit, hooks, ARCHITECTURE.md "The inbox tier" — once per batch; 1024
// drained the 1:1 benchmark at 0.40–0.51 of its raw reference against
// 0.30–0.32 with 256, same runs, RESULTS.md; 2048 halves the round trips
// per row again but was not measurably faster, and holds each
// recipient's fence row twice as long), a 3 s per-message timeout, at
// most 5 attempts (4 retries) with backoff from 50 ms to 1 s, and a
// delivery failing with a transient error retried for 10 s before it is
// dead-lettered (a short store outage waits instead of leaving holes).
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		Group:            "imlab-inbox",
		Tier:             "inbox",
		Topic:            DefaultTopic,
		DLQTopic:         DefaultDLQTopic,
		MaxBatch:         1024,
		MaxPollRecords:   16384,
		QueueDepth:       4,
		MessageTimeout:   3 * time.Second,
		BatchTimeout:     30 * time.Second,
		BatchAttempts:    2,
		MaxAttempts:      5,
		TransientWindow:  10 * time.Second,
		BackoffBase:      50 * time.Millisecond,
		BackoffMax:       time.Second,
		CommitInterval:   100 * time.Millisecond,
		SessionTimeout:   10 * time.Second,
		RebalanceTimeout: 30 * time.Second,
	}
}

// Validate checks the configuration.
func (c ConsumerConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: consumer needs brokers", model.ErrInvalid)
	case c.Group == "" || c.Topic == "" || c.DLQTopic == "" || c.Topic == c.DLQTopic:
		return fmt.Errorf("%w: consumer needs a group, a topic and a distinct dead-letter topic", model.ErrInvalid)
	case c.MaxBatch < 1 || c.MaxBatch > 10_000:
		return fmt.Errorf("%w: consumer max batch out of 1..10000", model.ErrInvalid)
	case c.MaxPollRecords < c.MaxBatch || c.MaxPollRecords > 100_000:
		return fmt.Errorf("%w: consumer max poll records out of max batch..100000", model.ErrInvalid)
	case c.QueueDepth < 1 || c.QueueDepth > 64:
		return fmt.Errorf("%w: consumer queue depth out of 1..64", model.ErrInvalid)
	case c.MessageTimeout < 10*time.Millisecond || c.MessageTimeout > time.Minute:
		return fmt.Errorf("%w: consumer message timeout out of 10ms..1m", model.ErrInvalid)
	case c.BatchTimeout < c.MessageTimeout || c.BatchTimeout > 10*time.Minute:
		return fmt.Errorf("%w: consumer batch timeout out of message timeout..10m", model.ErrInvalid)
	case c.MaxAttempts < 1 || c.MaxAttempts > 6:
		return fmt.Errorf("%w: consumer max attempts out of 1..6 (at most 5 retries)", model.ErrInvalid)
	case c.BatchAttempts < 1 || c.BatchAttempts > c.MaxAttempts:
		return fmt.Errorf("%w: consumer batch attempts out of 1..max attempts", model.ErrInvalid)
	case c.TransientWindow < 0 || c.TransientWindow > MaxTransientWindow:
		return fmt.Errorf("%w: consumer transient window out of 0..%s", model.ErrInvalid, MaxTransientWindow)
	case c.BackoffBase < 0 || c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: consumer backoff", model.ErrInvalid)
	case c.CommitInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: consumer commit interval below 10ms", model.ErrInvalid)
	case c.SessionTimeout < time.Second || c.RebalanceTimeout < time.Second:
		return fmt.Errorf("%w: consumer session/rebalance timeout below 1s", model.ErrInvalid)
	}
	return nil
}

func (c ConsumerConfig) backoff(attempt int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

type tp struct {
	topic     string
	partition int32
}

// worker is one partition's loop. The Consumer's group callbacks own it:
// created on assignment, stopped (and waited for) on revoke or loss.
type worker struct {
	tp   tp
	ch   chan []*kgo.Record
	quit chan struct{}
	done chan struct{}
}

// Consumer runs one tier: a group member with one loop per assigned
// partition. Offsets are marked only after the Handler succeeded (or the
// delivery was dead-lettered) and committed every CommitInterval and on
// revoke, so a crash re-delivers at most the uncommitted tail.
type Consumer struct {
	cfg ConsumerConfig
	h   Handler
	dlq *Producer
	m   *Metrics
	log *slog.Logger

	mu      sync.Mutex
	workers map[tp]*worker
	cl      *kgo.Client
	ctx     context.Context // Run's context, for the workers
}

// NewConsumer builds a tier. dlq publishes dead letters; m may be nil.
func NewConsumer(cfg ConsumerConfig, h Handler, dlq *Producer, m *Metrics) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil || dlq == nil {
		return nil, fmt.Errorf("%w: consumer needs a handler and a dead-letter producer", model.ErrInvalid)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Consumer{cfg: cfg, h: h, dlq: dlq, m: m, log: log.With("tier", cfg.Tier, "group", cfg.Group),
		workers: map[tp]*worker{}}, nil
}

// Run joins the group and processes until ctx is done, then stops every
// partition loop, commits what was processed and leaves the group.
func (c *Consumer) Run(ctx context.Context) error {
	c.ctx = ctx
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ClientID("imlab-"+c.cfg.Tier),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.BlockRebalanceOnPoll(),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(c.cfg.CommitInterval),
		kgo.SessionTimeout(c.cfg.SessionTimeout),
		kgo.RebalanceTimeout(c.cfg.RebalanceTimeout),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
	)
	if err != nil {
		return fmt.Errorf("fanout: consumer client: %w", err)
	}
	c.mu.Lock()
	c.cl = cl
	c.mu.Unlock()
	defer func() {
		c.stopAll()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := cl.CommitMarkedOffsets(cctx); err != nil {
			c.log.Warn("final offset commit failed", "err", err)
		}
		cancel()
		cl.CloseAllowingRebalance()
	}()

	recreated := false
	for {
		fs := cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if ctx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			if IsUnknownTopicID(err) {
				recreated = true
			}
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("fetch error", "topic", topic, "partition", p, "err", err)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			c.mu.Lock()
			w := c.workers[tp{p.Topic, p.Partition}]
			c.mu.Unlock()
			if w == nil {
				return // not ours any more; the new owner fetches from the committed offset
			}
			select {
			case w.ch <- p.Records:
			case <-w.quit:
			case <-ctx.Done():
			}
		})
		cl.AllowRebalance()
		if recreated {
			// The topic was deleted and recreated: the client keeps the old
			// topic id until the topic is purged and added again.
			recreated = false
			c.log.Warn("topic recreated; re-adding it", "topic", c.cfg.Topic)
			cl.PurgeTopicsFromConsuming(c.cfg.Topic)
			cl.AddConsumeTopics(c.cfg.Topic)
		}
	}
}

func (c *Consumer) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ps := range m {
		for _, p := range ps {
			k := tp{topic, p}
			if c.workers[k] != nil {
				continue
			}
			w := &worker{tp: k, ch: make(chan []*kgo.Record, c.cfg.QueueDepth),
				quit: make(chan struct{}), done: make(chan struct{})}
			c.workers[k] = w
			go c.runWorker(w)
		}
	}
}

func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	c.stop(m)
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		c.log.Warn("commit on revoke failed", "err", err)
	}
}

func (c *Consumer) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.stop(m)
}

func (c *Consumer) stop(m map[string][]int32) {
	c.mu.Lock()
	var ws []*worker
	for topic, ps := range m {
		for _, p := range ps {
			if w := c.workers[tp{topic, p}]; w != nil {
				delete(c.workers, w.tp)
				ws = append(ws, w)
			}
		}
	}
	c.mu.Unlock()
	for _, w := range ws {
		close(w.quit)
	}
	for _, w := range ws {
		<-w.done
	}
}

func (c *Consumer) stopAll() {
	c.mu.Lock()
	m := map[string][]int32{}
	for k := range c.workers {
		m[k.topic] = append(m[k.topic], k.partition)
	}
	c.mu.Unlock()
	c.stop(m)
}

// Assigned lists the partitions this member owns now.
func (c *Consumer) Assigned() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for k := range c.workers {
		out = append(out, k.partition)
	}
	return out
}

func (c *Consumer) runWorker(w *worker) {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case <-c.ctx.Done():
			return
		case recs := <-w.ch:
			for len(recs) > 0 {
				n := min(len(recs), c.cfg.MaxBatch)
				if !c.processBatch(w, recs[:n]) {
					return // stopped mid-batch: nothing past it is marked
				}
				recs = recs[n:]
				select {
				case <-w.quit:
					return
				default:
				}
			}
		}
	}
}

// stopped tells whether the worker must stop (revoked, lost, shut down).
func (c *Consumer) stopped(w *worker) bool {
	select {
	case <-w.quit:
		return true
	case <-c.ctx.Done():
		return true
	default:
		return false
	}
}

// sleep waits d unless the worker is stopped; it reports whether it may go on.
func (c *Consumer) sleep(w *worker, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.quit:
		return false
	case <-c.ctx.Done():
		return false
	}
}

func (c *Consumer) call(ds []Delivery) error {
	d := min(c.cfg.BatchTimeout, c.cfg.MessageTimeout*time.Duration(len(ds)))
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	return c.h.Handle(ctx, ds)
}

// processBatch handles one bounded batch and marks it. It returns false
// when the worker was stopped before the batch was done (nothing marked).
func (c *Consumer) processBatch(w *worker, recs []*kgo.Record) bool {
	ds := make([]Delivery, 0, len(recs))
	idx := make([]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		ev, err := UnmarshalEvent(r.Value)
		if err != nil {
			if !c.deadLetter(w, r, deadInfo{reason: err, class: DLQClassUndecodable}) {
				return false
			}
			continue
		}
		d := Delivery{Event: ev, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		for _, h := range r.Headers {
			if h.Key == HeaderOutboxID {
				if id, err := strconv.ParseUint(string(h.Value), 10, 64); err == nil {
					d.OutboxID = id
				}
			}
		}
		ds = append(ds, d)
		idx = append(idx, r)
	}
	if len(ds) > 0 {
		var err error
		attempts := 0
		for attempts < c.cfg.BatchAttempts {
			attempts++
			if err = c.call(ds); err == nil || isPermanent(err) || c.stopped(w) {
				break
			}
			if attempts < c.cfg.BatchAttempts && !c.sleep(w, c.cfg.backoff(attempts)) {
				return false
			}
		}
		if c.stopped(w) {
			return false
		}
		if err != nil {
			c.m.handleFailed(c.cfg.Tier, "batch")
			c.log.Warn("batch failed; retrying one by one", "partition", w.tp.partition,
				"first_offset", ds[0].Offset, "n", len(ds), "err", err)
			if len(ds) == 1 && isPermanent(err) {
				if !c.deadLetter(w, idx[0], deadInfo{reason: err, attempts: attempts, class: DLQClassPermanent}) {
					return false
				}
			} else {
				failedAt := time.Now()
				for i := range ds {
					ok, dead := c.one(w, ds[i], idx[i], attempts, failedAt)
					if !ok {
						return false
					}
					if dead && c.cfg.Defects.Has(defect.DLQAbandonsBatch) {
						// Defect: the rest of the batch is given up with
						// the dead letter, unwritten and not dead-lettered;
						// markRecords below marks it all.
						break
					}
				}
			}
		} else {
			c.m.processed(c.cfg.Tier, len(ds))
		}
	}
	w.markRecords(c, recs)
	return true
}

// Bounds of ConsumerConfig.TransientWindow: at most MaxTransientWindow;
// in a process's configuration at least MinTransientWindow, or
// MinLabTransientWindow with the lab switch (LabShortWindow).
const (
	MaxTransientWindow    = 10 * time.Minute
	MinTransientWindow    = 5 * time.Second
	MinLabTransientWindow = 500 * time.Millisecond
)

// ValidateWindow checks TransientWindow against the floor a process's
// configuration keeps (the lab switch lowers it); the error names the
// setting.
func (c ConsumerConfig) ValidateWindow() error {
	floor := MinTransientWindow
	if c.LabShortWindow {
		floor = MinLabTransientWindow
	}
	if c.TransientWindow < floor || c.TransientWindow > MaxTransientWindow {
		hint := ""
		if !c.LabShortWindow {
			hint = " (a shorter one is a lab-only setting)"
		}
		return fmt.Errorf("%w: consumer transient window %s out of %s..%s%s", model.ErrInvalid,
			c.TransientWindow, floor, MaxTransientWindow, hint)
	}
	return nil
}

// Dead-letter classes (HeaderDLQClass): why a delivery was given up.
const (
	DLQClassTransient   = "transient"   // retried through the transient window, still failing
	DLQClassPermanent   = "permanent"   // no retry can fix it (model.ErrInvalid)
	DLQClassUndecodable = "undecodable" // the record is not an Event
)

// one retries a single delivery after its batch failed, then dead-letters
// it. ok is false when the worker was stopped; dead tells that the
// delivery was dead-lettered.
func (c *Consumer) one(w *worker, d Delivery, r *kgo.Record, used int, failedAt time.Time) (ok, dead bool) {
	var err error
	attempts := used
	window := c.cfg.TransientWindow
	if c.cfg.Defects.Has(defect.DLQBeforeTransientWindow) {
		window = 0 // Defect: MaxAttempts alone decides, the window is ignored.
	}
	for attempts < c.cfg.MaxAttempts || c.cfg.RetryTransient || time.Since(failedAt) < window {
		if !c.sleep(w, c.cfg.backoff(attempts)) {
			return false, false
		}
		attempts++
		if err = c.call([]Delivery{d}); err == nil {
			c.m.processed(c.cfg.Tier, 1)
			return true, false
		}
		if isPermanent(err) || c.stopped(w) {
			break
		}
		if c.cfg.RetryTransient && attempts%20 == 0 {
			c.log.Warn("delivery still failing; retrying until the store answers", "partition", w.tp.partition,
				"offset", d.Offset, "attempts", attempts, "err", err)
		}
	}
	if c.stopped(w) {
		return false, false
	}
	class := DLQClassTransient
	if isPermanent(err) {
		class = DLQClassPermanent
	}
	return c.deadLetter(w, r, deadInfo{reason: err, attempts: attempts, class: class, retried: time.Since(failedAt)}), true
}

// deadInfo is why and after what a delivery is dead-lettered.
type deadInfo struct {
	reason   error
	attempts int
	class    string        // DLQClass*
	retried  time.Duration // since its batch first failed (0: not retried)
}

// deadLetter publishes r to the dead-letter topic with the reason. It keeps
// trying while the worker runs (the partition cannot advance past a record
// that is neither handled nor dead-lettered); it returns false if stopped.
func (c *Consumer) deadLetter(w *worker, r *kgo.Record, di deadInfo) bool {
	msg := "unknown"
	if di.reason != nil {
		msg = di.reason.Error()
	}
	if len(msg) > 512 {
		msg = msg[:512]
	}
	dl := &kgo.Record{
		Topic: c.cfg.DLQTopic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
		Headers: append(append([]kgo.RecordHeader(nil), r.Headers...),
			kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(msg)},
			kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
			kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
			kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
			kgo.RecordHeader{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(di.attempts))},
			kgo.RecordHeader{Key: HeaderDLQGroup, Value: []byte(c.cfg.Group)},
			kgo.RecordHeader{Key: HeaderDLQClass, Value: []byte(di.class)},
			kgo.RecordHeader{Key: HeaderDLQRetriedMS, Value: []byte(strconv.FormatInt(di.retried.Milliseconds(), 10))},
			kgo.RecordHeader{Key: HeaderDLQWindowMS, Value: []byte(strconv.FormatInt(c.cfg.TransientWindow.Milliseconds(), 10))},
		),
	}
	for i := 1; ; i++ {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		err := c.dlq.PublishSync(ctx, []*kgo.Record{dl})
		cancel()
		if err == nil {
			c.m.deadLettered(c.cfg.Tier)
			c.log.Warn("dead-lettered", "partition", r.Partition, "offset", r.Offset, "attempts", di.attempts, "class", di.class, "reason", msg)
			return true
		}
		c.log.Warn("dead-letter publish failed", "err", err)
		if !c.sleep(w, c.cfg.backoff(i)) {
			return false
		}
	}
}

func (w *worker) markRecords(c *Consumer, recs []*kgo.Record) {
	c.mu.Lock()
	cl := c.cl
	c.mu.Unlock()
	cl.MarkCommitRecords(recs[len(recs)-1])
}
