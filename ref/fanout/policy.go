package fanout

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/model"
	"imlab/ref/send"
)

// Policy names beside send's "strict".
const (
	PolicyStore  = "store"  // seed 003 option B
	PolicyOutbox = "outbox" // option C
	PolicyQueue  = "queue"  // option A: deliberately unsafe, the negative control
)

// UnsafeWarning is logged and reported wherever the queue policy runs.
const UnsafeWarning = "ack policy \"queue\" is DELIBERATELY UNSAFE (option A of the message-queue design document, seed 003: publish, ACK, then store): " +
	"an ACKed message is lost when the queue loses it; it exists as the negative control"

func recordOf(topic string, ev Event, m model.Message) (*kgo.Record, error) {
	// Key and value share one allocation; the key's capacity ends where
	// the value starts.
	b, err := ev.AppendMarshal(binary.BigEndian.AppendUint64(make([]byte, 0, 8+ev.Len()), m.ConvID))
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: b[:8:8], Value: b[8:], Timestamp: m.CreatedAt}, nil
}

// Store is option B: msg_content committed, ACK, then the fan-out event is
// published without holding the ACK. A publish that fails (queue down) is
// handed to the direct fan-out when there is one (online push goes on); the
// inbox rows it could not write are repaired by forward reconciliation.
type Store struct {
	prod   *Producer
	topic  string
	direct *Direct
	m      *Metrics
	log    *slog.Logger
}

// NewStore builds the store policy. direct may be nil.
func NewStore(prod *Producer, topic string, direct *Direct, m *Metrics, log *slog.Logger) (*Store, error) {
	if prod == nil || topic == "" {
		return nil, fmt.Errorf("%w: store policy needs a producer and a topic", model.ErrInvalid)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Store{prod: prod, topic: topic, direct: direct, m: m, log: log}, nil
}

// Name implements send.Policy.
func (*Store) Name() string { return PolicyStore }

// StoresContent implements send.Policy.
func (*Store) StoresContent() bool { return true }

// InTx implements send.Policy: nothing beyond msg_content.
func (*Store) InTx(context.Context, *sql.Tx, []*send.Pending) ([]model.InboxEntry, error) {
	return nil, nil
}

// AfterCommit implements send.Policy: it queues the publishes and returns
// at once, so the ACK does not wait for Kafka.
func (p *Store) AfterCommit(ctx context.Context, batch []*send.Pending) error {
	ctx = context.WithoutCancel(ctx)
	for _, pd := range batch {
		msg := pd.Msg
		rec, err := recordOf(p.topic, StoredEvent(msg), msg)
		if err != nil {
			p.log.Error("store policy: bad event", "msg_id", msg.MsgID, "err", err)
			continue
		}
		p.prod.Publish(ctx, rec, func(err error) {
			if err == nil {
				p.m.publish(PolicyStore, "ok", 1)
				return
			}
			p.m.publish(PolicyStore, "failed", 1)
			if p.direct != nil {
				p.direct.Offer(msg)
			}
		})
	}
	return nil
}

// Outbox is option C: msg_content and an mq_outbox row in one transaction,
// ACK; the relay publishes. When the queue is known to be down (health),
// committed messages are also offered to the direct fan-out so online
// devices still get them; the relay catches the rest up later.
type Outbox struct {
	topic  string
	wake   func()
	health *Health
	direct *Direct
}

// NewOutbox builds the outbox policy. wake (may be nil) nudges an
// in-process relay; health and direct may be nil.
func NewOutbox(topic string, wake func(), health *Health, direct *Direct) (*Outbox, error) {
	if topic == "" || len(topic) > 64 {
		return nil, fmt.Errorf("%w: outbox policy topic %q", model.ErrInvalid, topic)
	}
	return &Outbox{topic: topic, wake: wake, health: health, direct: direct}, nil
}

// Name implements send.Policy.
func (*Outbox) Name() string { return PolicyOutbox }

// StoresContent implements send.Policy.
func (*Outbox) StoresContent() bool { return true }

// InTx implements send.Policy: one multi-row INSERT into mq_outbox, in
// batch order (conv_seq order within a conversation), so ids follow it.
func (p *Outbox) InTx(ctx context.Context, tx *sql.Tx, batch []*send.Pending) ([]model.InboxEntry, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	now := time.Now().UTC()
	for start := 0; start < len(batch); start += dedupChunk {
		end := min(start+dedupChunk, len(batch))
		var sb strings.Builder
		args := make([]any, 0, 4*(end-start))
		sb.WriteString("INSERT INTO mq_outbox (topic, shard_key, payload, status, retry, created_at) VALUES ")
		for i := start; i < end; i++ {
			if i > start {
				sb.WriteByte(',')
			}
			b, err := StoredEvent(batch[i].Msg).Marshal()
			if err != nil {
				return nil, err
			}
			sb.WriteString("(?,?,?,0,0,?)")
			args = append(args, p.topic, batch[i].Msg.ConvID, b, now)
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return nil, fmt.Errorf("fanout: insert mq_outbox: %w", err)
		}
	}
	return nil, nil
}

// AfterCommit implements send.Policy.
func (p *Outbox) AfterCommit(_ context.Context, batch []*send.Pending) error {
	if p.wake != nil {
		p.wake()
	}
	if p.direct != nil && p.health != nil && p.health.Down() {
		for _, pd := range batch {
			p.direct.Offer(pd.Msg)
		}
	}
	return nil
}

// Queue is option A, deliberately unsafe: nothing is stored before the
// ACK; the event carries the body, AfterCommit publishes it and waits for
// the broker, then the ACK goes out; the consumer stores body and inbox
// rows. If the queue loses the record, the ACKed message is gone.
type Queue struct {
	prod  *Producer
	topic string
	m     *Metrics
}

// NewQueue builds the unsafe queue policy and logs UnsafeWarning.
func NewQueue(prod *Producer, topic string, m *Metrics, log *slog.Logger) (*Queue, error) {
	if prod == nil || topic == "" {
		return nil, fmt.Errorf("%w: queue policy needs a producer and a topic", model.ErrInvalid)
	}
	if log == nil {
		log = slog.Default()
	}
	log.Warn(UnsafeWarning)
	return &Queue{prod: prod, topic: topic, m: m}, nil
}

// Name implements send.Policy.
func (*Queue) Name() string { return PolicyQueue }

// StoresContent implements send.Policy: false, that is the point.
func (*Queue) StoresContent() bool { return false }

// InTx implements send.Policy: nothing.
func (*Queue) InTx(context.Context, *sql.Tx, []*send.Pending) ([]model.InboxEntry, error) {
	return nil, nil
}

// AfterCommit implements send.Policy: publish with the body and wait.
func (p *Queue) AfterCommit(ctx context.Context, batch []*send.Pending) error {
	recs := make([]*kgo.Record, 0, len(batch))
	for _, pd := range batch {
		rec, err := recordOf(p.topic, EventOf(pd.Msg, true), pd.Msg)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	if err := p.prod.PublishSync(ctx, recs); err != nil {
		p.m.publish(PolicyQueue, "failed", len(recs))
		return err
	}
	p.m.publish(PolicyQueue, "ok", len(recs))
	return nil
}

// Pinger answers whether the brokers are reachable; Producer is one (it
// pings with its current client, which it replaces after a topic is
// re-created).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Health tells whether the brokers answer, from a ping every interval.
type Health struct {
	down atomic.Bool
	done chan struct{}
}

// NewHealth pings through p every interval until ctx is done. The caller
// owns the goroutine: it ends it through ctx and waits for it with Wait.
func NewHealth(ctx context.Context, p Pinger, interval time.Duration) *Health {
	h := &Health{done: make(chan struct{})}
	go func() { // owned by the caller of NewHealth: ends with ctx, awaited by Wait
		defer close(h.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			pctx, cancel := context.WithTimeout(ctx, interval)
			err := p.Ping(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			h.down.Store(err != nil)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// Wait blocks until the ping goroutine has ended (after its ctx is done).
func (h *Health) Wait() { <-h.done }

// Down reports the last ping's failure.
func (h *Health) Down() bool { return h != nil && h.down.Load() }

// DirectConfig bounds the direct fan-out.
type DirectConfig struct {
	// QueueSize bounds messages waiting; past it offers are dropped (and
	// counted): reconciliation writes their inbox rows later.
	QueueSize int
	// MaxBatch bounds messages per write.
	MaxBatch int
}

// DefaultDirectConfig: 10k queued, 256 per write.
func DefaultDirectConfig() DirectConfig { return DirectConfig{QueueSize: 10_000, MaxBatch: 256} }

// Direct is the degraded path when the queue is down: committed messages
// go straight through the inbox sink (fenced, idempotent inbox rows, then
// the hot cache and online push) from the process that stored them, when
// they extend their conversation's chain in every recipient's inbox
// (InboxSink.HandleChained); the others are deferred to the relay or to
// reconciliation, which write them in order. Best effort and bounded: what
// it drops, reconciliation repairs.
type Direct struct {
	cfg      DirectConfig
	sink     *InboxSink
	ch       chan model.Message
	dropped  atomic.Int64
	written  atomic.Int64
	deferred atomic.Int64
	log      *slog.Logger
	wg       sync.WaitGroup
}

// NewDirect starts the direct fan-out goroutine; it stops when ctx is done
// (Wait waits for it).
func NewDirect(ctx context.Context, cfg DirectConfig, sink *InboxSink, log *slog.Logger) (*Direct, error) {
	if cfg.QueueSize < 1 || cfg.MaxBatch < 1 || sink == nil {
		return nil, fmt.Errorf("%w: direct fan-out config", model.ErrInvalid)
	}
	if log == nil {
		log = slog.Default()
	}
	d := &Direct{cfg: cfg, sink: sink, ch: make(chan model.Message, cfg.QueueSize), log: log}
	d.wg.Add(1)
	go d.run(ctx)
	return d, nil
}

// Offer queues a committed message without blocking.
func (d *Direct) Offer(m model.Message) {
	select {
	case d.ch <- m:
	default:
		d.dropped.Add(1)
	}
}

// Stats returns messages written, dropped (queue full, write failed) and
// deferred (not extending their conversation's chain: see
// InboxSink.HandleChained) so far.
func (d *Direct) Stats() (written, dropped, deferred int64) {
	return d.written.Load(), d.dropped.Load(), d.deferred.Load()
}

// Wait waits for the goroutine after ctx is done.
func (d *Direct) Wait() { d.wg.Wait() }

func (d *Direct) run(ctx context.Context) {
	defer d.wg.Done()
	for {
		var batch []Delivery
		select {
		case <-ctx.Done():
			return
		case m := <-d.ch:
			batch = append(batch, Delivery{Event: StoredEvent(m)})
		}
	fill:
		for len(batch) < d.cfg.MaxBatch {
			select {
			case m := <-d.ch:
				batch = append(batch, Delivery{Event: StoredEvent(m)})
			default:
				break fill
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		// The body is stored: the events carry a copy (Stored), so nothing
		// is read back or stored again.
		written, deferred, err := d.sink.HandleChained(wctx, batch)
		cancel()
		d.written.Add(int64(written))
		d.deferred.Add(int64(deferred))
		if err != nil {
			d.dropped.Add(int64(len(batch) - written - deferred))
			d.log.Warn("direct fan-out failed; reconciliation will repair", "n", len(batch)-written-deferred, "err", err)
		}
	}
}
