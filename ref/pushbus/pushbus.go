// Package pushbus owns the Redis pub/sub transport of push events between
// processes: a process that commits inbox rows publishes each committed
// entry batch (model.InboxEntry, PrevSeq included, compactly encoded) to
// channels sharded by uid (rkeys.Keys.PushChannel(uid % Shards)); every
// process serving devices' WebSockets subscribes to all shards and hands
// what it receives to its local sink (push.Hub.Committed).
//
// Best-effort by design: Redis pub/sub keeps nothing, so a publish lost
// (queue full, Redis down, subscriber buffer full, no subscriber yet)
// only delays delivery to the device's next pull; the inbox is the truth.
// Publishing never blocks the write path: Committed copies the batch into
// a bounded queue and drops (counted in imlab_push_bus_dropped_total) when
// it is full; one goroutine, owned by the Bus and stopped by Close,
// publishes. A subscriber ignores messages of its own Bus (the local hub
// already had them through the commit hooks), so one process never pushes
// an entry twice.
//
// It must not decide delivery order or drop late frames (ref/push does,
// per uid by PrevSeq) and must not touch storage.
package pushbus

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/ref/model"
	"imlab/ref/rkeys"
)

// Modes.
const (
	ModeLocal = "local" // no bus: pushes reach devices of the committing process only
	ModeRedis = "redis" // Redis pub/sub between processes
)

// Drop reasons (imlab_push_bus_dropped_total{reason}).
const (
	DropQueueFull = "queue_full"  // the publish queue was full
	DropPublish   = "publish_err" // Redis refused or was unreachable
	DropDecode    = "decode_err"  // a received message did not decode
	DropClosed    = "closed"      // Committed after Close
	DropTooLarge  = "too_large"   // an entry too large to encode
)

// Named limits.
const (
	MaxShards  = 1024
	maxEntries = 1 << 16 // entries per decoded message
	maxContent = 1 << 20 // bytes of one entry's content
	magic      = byte(1) // encoding version
)

// Config tunes the bus.
type Config struct {
	// Mode is ModeLocal or ModeRedis.
	Mode string
	// Shards is the number of channels uids are spread over.
	Shards int
	// PublishQueue bounds the batches waiting to be published.
	PublishQueue int
	// SubscribeBuffer bounds the received messages waiting for the sink
	// (the go-redis channel size); past it go-redis drops after
	// SubscribeSendTimeout.
	SubscribeBuffer      int
	SubscribeSendTimeout time.Duration
	// PublishTimeout bounds one pipelined publish round trip.
	PublishTimeout time.Duration
	// SubscribeTimeout bounds waiting for the subscription confirmations.
	SubscribeTimeout time.Duration
}

// DefaultConfig is the local mode with sizes for the redis mode.
func DefaultConfig() Config {
	return Config{
		Mode: ModeLocal, Shards: 16, PublishQueue: 4096, SubscribeBuffer: 4096,
		SubscribeSendTimeout: 100 * time.Millisecond,
		PublishTimeout:       2 * time.Second, SubscribeTimeout: 5 * time.Second,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(s string) error { return fmt.Errorf("%w: pushbus: %s", model.ErrInvalid, s) }
	switch c.Mode {
	case ModeLocal, ModeRedis:
	default:
		return bad(fmt.Sprintf("mode %q (want local or redis)", c.Mode))
	}
	switch {
	case c.Shards < 1 || c.Shards > MaxShards:
		return bad(fmt.Sprintf("Shards must be in 1..%d", MaxShards))
	case c.PublishQueue < 1 || c.PublishQueue > 1<<20:
		return bad("PublishQueue must be in 1..1048576")
	case c.SubscribeBuffer < 1 || c.SubscribeBuffer > 1<<20:
		return bad("SubscribeBuffer must be in 1..1048576")
	case c.SubscribeSendTimeout <= 0 || c.PublishTimeout <= 0 || c.SubscribeTimeout <= 0:
		return bad("timeouts must be > 0")
	}
	return nil
}

// Sink receives entries published by other processes (push.Hub).
type Sink interface {
	Committed(ctx context.Context, entries []model.InboxEntry)
}

// Bus publishes and subscribes push events. Safe for concurrent use.
type Bus struct {
	cfg    Config
	rdb    *redis.Client
	keys   rkeys.Keys
	origin uint64

	queue     chan []model.InboxEntry
	mu        sync.RWMutex // guards closed against sends on queue
	closed    bool
	pubDone   chan struct{}
	subMu     sync.Mutex // guards the subscription (never taken by Committed)
	subCancel context.CancelFunc
	subDone   chan struct{}
	ps        *redis.PubSub

	dropped   *prometheus.CounterVec
	published prometheus.Counter
	received  prometheus.Counter
}

// New builds a redis-mode bus and starts its publisher. reg may be nil.
func New(rdb *redis.Client, keys rkeys.Keys, cfg Config, reg prometheus.Registerer) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode != ModeRedis {
		return nil, fmt.Errorf("%w: pushbus: New needs mode redis", model.ErrInvalid)
	}
	if rdb == nil {
		return nil, fmt.Errorf("%w: pushbus: a Redis client is required", model.ErrInvalid)
	}
	var ob [8]byte
	if _, err := rand.Read(ob[:]); err != nil {
		return nil, fmt.Errorf("pushbus: origin id: %w", err)
	}
	b := &Bus{
		cfg: cfg, rdb: rdb, keys: keys, origin: binary.LittleEndian.Uint64(ob[:]) | 1,
		queue: make(chan []model.InboxEntry, cfg.PublishQueue), pubDone: make(chan struct{}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_push_bus_dropped_total", Help: "Push bus batches or messages dropped (best-effort transport), by reason.",
		}, []string{"reason"}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imlab_push_bus_published_total", Help: "Push bus messages published.",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imlab_push_bus_received_total", Help: "Push bus messages from other processes handed to the hub.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{b.dropped, b.published, b.received} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("pushbus: register metrics: %w", err)
			}
		}
	}
	go b.publishLoop()
	return b, nil
}

// dropCounter is the drop counter of one reason.
func (b *Bus) dropCounter(reason string) prometheus.Counter { return b.dropped.WithLabelValues(reason) }

// Committed is a commit hook: it queues a copy of the batch for publishing
// and never blocks (a full queue drops the batch, counted).
func (b *Bus) Committed(_ context.Context, entries []model.InboxEntry) {
	if len(entries) == 0 {
		return
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		b.dropCounter(DropClosed).Inc()
		return
	}
	cp := append([]model.InboxEntry(nil), entries...)
	select {
	case b.queue <- cp:
	default:
		b.dropCounter(DropQueueFull).Inc()
	}
}

func (b *Bus) publishLoop() {
	defer close(b.pubDone)
	for batch := range b.queue {
		b.publish(batch)
	}
}

// publish groups a batch by shard and publishes one message per shard in
// one pipelined round trip.
func (b *Bus) publish(batch []model.InboxEntry) {
	groups := make(map[int][]model.InboxEntry)
	for _, e := range batch {
		if len(e.Content) > maxContent {
			b.dropCounter(DropTooLarge).Inc()
			continue
		}
		s := int(e.UID % uint64(b.cfg.Shards))
		groups[s] = append(groups[s], e)
	}
	if len(groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.PublishTimeout)
	defer cancel()
	pipe := b.rdb.Pipeline()
	for s, es := range groups {
		pipe.Publish(ctx, b.keys.PushChannel(s), Encode(b.origin, es))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.dropped.WithLabelValues(DropPublish).Add(float64(len(groups)))
		return
	}
	b.published.Add(float64(len(groups)))
}

// Subscribe subscribes to every shard, waits for Redis to confirm, then
// starts one goroutine (owned by the Bus, stopped by Close) handing other
// processes' entries to sink. Call it once (again only after
// Unsubscribe). It never holds a lock Committed takes.
func (b *Bus) Subscribe(ctx context.Context, sink Sink) error {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return fmt.Errorf("%w: pushbus: closed", model.ErrUnavailable)
	}
	if b.ps != nil {
		return fmt.Errorf("%w: pushbus: already subscribed", model.ErrInvalid)
	}
	chans := make([]string, b.cfg.Shards)
	for i := range chans {
		chans[i] = b.keys.PushChannel(i)
	}
	ps := b.rdb.Subscribe(ctx, chans...)
	wctx, cancel := context.WithTimeout(ctx, b.cfg.SubscribeTimeout)
	defer cancel()
	for n := 0; n < len(chans); {
		msg, err := ps.Receive(wctx)
		if err != nil {
			_ = ps.Close()
			return fmt.Errorf("pushbus: subscribe: %w", err)
		}
		if _, ok := msg.(*redis.Subscription); ok {
			n++
		}
	}
	ch := ps.Channel(redis.WithChannelSize(b.cfg.SubscribeBuffer), redis.WithChannelSendTimeout(b.cfg.SubscribeSendTimeout))
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.ps, b.subCancel, b.subDone = ps, scancel, done
	go b.receiveLoop(sctx, ch, sink, done)
	return nil
}

func (b *Bus) receiveLoop(ctx context.Context, ch <-chan *redis.Message, sink Sink, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			origin, es, err := Decode([]byte(m.Payload))
			if err != nil {
				b.dropCounter(DropDecode).Inc()
				continue
			}
			if origin == b.origin {
				continue
			}
			b.received.Inc()
			sink.Committed(ctx, es)
		}
	}
}

// Unsubscribe stops the subscriber goroutine and closes the subscription
// (the sink gets nothing more); publishing goes on. Safe to call more than
// once, and without a subscription.
func (b *Bus) Unsubscribe() error {
	b.subMu.Lock()
	ps, cancel, done := b.ps, b.subCancel, b.subDone
	b.ps, b.subCancel, b.subDone = nil, nil, nil
	b.subMu.Unlock()
	if ps == nil {
		return nil
	}
	cancel()
	err := ps.Close()
	<-done
	if err != nil {
		return fmt.Errorf("pushbus: close subscription: %w", err)
	}
	return nil
}

// Close stops the subscriber, then publishes what is queued and stops the
// publisher (bounded by PublishTimeout per message). Safe to call more
// than once.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.queue)
	b.mu.Unlock()
	err := b.Unsubscribe()
	<-b.pubDone
	return err
}

// Encode writes origin and entries compactly: a version byte, the origin,
// the count, then per entry uvarints (UID, Seq, PrevSeq, MsgID, ConvID,
// ConvType, ConvSeq, SenderUID), CreatedAt as a varint of Unix nanoseconds,
// a flags byte (1: Missing, 2: zero CreatedAt) and the length-prefixed content.
func Encode(origin uint64, entries []model.InboxEntry) string {
	n := 1 + 8 + binary.MaxVarintLen64
	for _, e := range entries {
		n += 9*binary.MaxVarintLen64 + 1 + len(e.Content) + binary.MaxVarintLen64
	}
	buf := make([]byte, 0, n)
	buf = append(buf, magic)
	buf = binary.LittleEndian.AppendUint64(buf, origin)
	buf = binary.AppendUvarint(buf, uint64(len(entries)))
	for _, e := range entries {
		for _, v := range []uint64{e.UID, e.Seq, e.PrevSeq, e.MsgID, e.ConvID, uint64(e.ConvType), e.ConvSeq, e.SenderUID} {
			buf = binary.AppendUvarint(buf, v)
		}
		var fl byte
		var ns int64
		if e.Missing {
			fl |= 1
		}
		if e.CreatedAt.IsZero() {
			fl |= 2
		} else {
			ns = e.CreatedAt.UnixNano()
		}
		buf = binary.AppendVarint(buf, ns)
		buf = append(buf, fl)
		buf = binary.AppendUvarint(buf, uint64(len(e.Content)))
		buf = append(buf, e.Content...)
	}
	return string(buf)
}

var errCorrupt = errors.New("pushbus: corrupt message")

// Decode reads what Encode wrote; anything malformed is an error wrapping
// model.ErrInvalid.
func Decode(b []byte) (uint64, []model.InboxEntry, error) {
	bad := func() (uint64, []model.InboxEntry, error) {
		return 0, nil, fmt.Errorf("%w: %w", model.ErrInvalid, errCorrupt)
	}
	if len(b) < 9 || b[0] != magic {
		return bad()
	}
	origin := binary.LittleEndian.Uint64(b[1:9])
	b = b[9:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	cnt, ok := uv()
	if !ok || cnt > maxEntries || cnt > uint64(len(b)) {
		return bad()
	}
	out := make([]model.InboxEntry, 0, cnt)
	for i := uint64(0); i < cnt; i++ {
		var f [8]uint64
		for j := range f {
			if f[j], ok = uv(); !ok {
				return bad()
			}
		}
		ns, n := binary.Varint(b)
		if n <= 0 || len(b) < n+1 {
			return bad()
		}
		fl := b[n]
		b = b[n+1:]
		if fl > 3 || f[5] > 255 {
			return bad()
		}
		ln, ok := uv()
		if !ok || ln > maxContent || ln > uint64(len(b)) {
			return bad()
		}
		content := string(b[:ln])
		b = b[ln:]
		out = append(out, model.InboxEntry{
			UID: f[0], Seq: f[1], PrevSeq: f[2], MsgID: f[3], ConvID: f[4], ConvType: model.ConvType(f[5]),
			ConvSeq: f[6], SenderUID: f[7], Content: content, Missing: fl&1 != 0,
		})
		if fl&2 == 0 {
			out[len(out)-1].CreatedAt = time.Unix(0, ns).UTC()
		}
	}
	if len(b) != 0 {
		return bad()
	}
	return origin, out, nil
}
