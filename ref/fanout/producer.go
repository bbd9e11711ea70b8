package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/model"
)

// ProducerConfig configures a Producer.
type ProducerConfig struct {
	Brokers  []string
	ClientID string
	// Linger lets records of concurrent sends share a produce request.
	Linger time.Duration
	// MaxBufferedRecords bounds records waiting for the broker; Publish
	// fails fast (ErrUnavailable) instead of blocking when it is reached.
	MaxBufferedRecords int
	// DeliveryTimeout bounds how long one record may be retried inside the
	// client before it fails.
	DeliveryTimeout time.Duration
	// MaxRecreates bounds how often one PublishSync call rebuilds the client
	// after UNKNOWN_TOPIC_ID (a topic deleted and recreated under it).
	MaxRecreates int
	// RecreateMinInterval spaces rebuilds so a storm of failing records
	// rebuilds the client once.
	RecreateMinInterval time.Duration
}

// DefaultProducerConfig returns working defaults (brokers must be set).
func DefaultProducerConfig() ProducerConfig {
	return ProducerConfig{
		ClientID:            "imlab-fanout",
		Linger:              2 * time.Millisecond,
		MaxBufferedRecords:  200_000,
		DeliveryTimeout:     10 * time.Second,
		MaxRecreates:        3,
		RecreateMinInterval: 200 * time.Millisecond,
	}
}

// Validate checks the configuration.
func (c ProducerConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: producer needs at least one broker", model.ErrInvalid)
	case c.Linger < 0 || c.Linger > time.Second:
		return fmt.Errorf("%w: producer linger %s out of 0..1s", model.ErrInvalid, c.Linger)
	case c.MaxBufferedRecords < 1:
		return fmt.Errorf("%w: producer max buffered records < 1", model.ErrInvalid)
	case c.DeliveryTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: producer delivery timeout below 100ms", model.ErrInvalid)
	case c.MaxRecreates < 0 || c.MaxRecreates > 10:
		return fmt.Errorf("%w: producer max recreates out of 0..10", model.ErrInvalid)
	case c.RecreateMinInterval < 0:
		return fmt.Errorf("%w: producer recreate interval negative", model.ErrInvalid)
	}
	return nil
}

// Producer publishes fan-out records. It owns one franz-go client and
// replaces it when the broker answers UNKNOWN_TOPIC_ID: after a topic is
// deleted and recreated, a client keeps the old topic id and fails every
// record, while a new client works.
type Producer struct {
	cfg ProducerConfig

	mu       sync.RWMutex
	cl       *kgo.Client
	gen      uint64
	lastMade time.Time
	closed   bool

	recreates atomic.Int64
	wg        sync.WaitGroup // old clients being closed
}

// NewProducer builds a producer (no connection is made until the first
// record).
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Producer{cfg: cfg}
	cl, err := p.newClient()
	if err != nil {
		return nil, err
	}
	p.cl = cl
	p.lastMade = time.Now()
	return p, nil
}

func (p *Producer) newClient() (*kgo.Client, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.ClientID(p.cfg.ClientID),
		kgo.RecordPartitioner(partitioner()),
		kgo.ProducerLinger(p.cfg.Linger),
		kgo.MaxBufferedRecords(p.cfg.MaxBufferedRecords),
		kgo.RecordDeliveryTimeout(p.cfg.DeliveryTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.UnknownTopicRetries(4),
		// Notice a recreated topic (new topic id) quickly.
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		return nil, fmt.Errorf("fanout: producer client: %w", err)
	}
	return cl, nil
}

// Client returns the current client (for admin requests). It may be
// replaced after UNKNOWN_TOPIC_ID; do not keep it.
func (p *Producer) Client() *kgo.Client {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cl
}

// Ping asks the brokers for metadata with the current client (so a
// health check keeps working after the client is replaced).
func (p *Producer) Ping(ctx context.Context) error {
	cl, _, err := p.current()
	if err != nil {
		return err
	}
	return cl.Ping(ctx)
}

// Recreates counts client rebuilds after UNKNOWN_TOPIC_ID.
func (p *Producer) Recreates() int64 { return p.recreates.Load() }

func (p *Producer) current() (*kgo.Client, uint64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, 0, fmt.Errorf("%w: producer closed", model.ErrUnavailable)
	}
	return p.cl, p.gen, nil
}

// recreate replaces the client of generation gen (a no-op when another
// caller already did, or when the last rebuild is too recent).
func (p *Producer) recreate(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.gen != gen || time.Since(p.lastMade) < p.cfg.RecreateMinInterval {
		return
	}
	cl, err := p.newClient()
	if err != nil {
		return
	}
	old := p.cl
	p.cl = cl
	p.gen++
	p.lastMade = time.Now()
	p.recreates.Add(1)
	p.wg.Add(1)
	go func() { // the old client fails its buffered records; their callers retry
		defer p.wg.Done()
		old.Close()
	}()
}

// IsUnknownTopicID tells whether err is the broker's UNKNOWN_TOPIC_ID.
func IsUnknownTopicID(err error) bool { return errors.Is(err, kerr.UnknownTopicID) }

// cloneRecord copies what a produce needs. The timestamp is left for the
// client to stamp: franz-go measures a record's delivery timeout from its
// timestamp, so an old one (a message sent before an outage, relayed or
// dead-lettered later) would fail at once. Ages come from the payload's
// sent_at, not from the record timestamp.
func cloneRecord(r *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
}

// PublishSync produces records and waits until every one is acknowledged
// by the broker (all in-sync replicas). Records with the same key keep
// their relative order. After UNKNOWN_TOPIC_ID the client is rebuilt and
// the failed records are produced again (at most MaxRecreates times); any
// other failure is returned, wrapping model.ErrUnavailable.
func (p *Producer) PublishSync(ctx context.Context, recs []*kgo.Record) error {
	pending := recs
	for attempt := 0; ; attempt++ {
		cl, gen, err := p.current()
		if err != nil {
			return err
		}
		batch := make([]*kgo.Record, len(pending))
		for i, r := range pending {
			batch[i] = cloneRecord(r)
		}
		results := cl.ProduceSync(ctx, batch...)
		var failed []*kgo.Record
		var firstErr error
		unknownID := false
		for i, res := range results {
			if res.Err == nil {
				continue
			}
			failed = append(failed, pending[i])
			if firstErr == nil {
				firstErr = res.Err
			}
			if IsUnknownTopicID(res.Err) || errors.Is(res.Err, kgo.ErrClientClosed) {
				unknownID = true
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if !unknownID || attempt >= p.cfg.MaxRecreates || ctx.Err() != nil {
			return fmt.Errorf("%w: publish %d of %d records: %w", model.ErrUnavailable, len(failed), len(recs), firstErr)
		}
		if IsUnknownTopicID(firstErr) || hasUnknownID(results) {
			p.recreate(gen)
		}
		pending = failed
	}
}

func hasUnknownID(rs kgo.ProduceResults) bool {
	for _, r := range rs {
		if IsUnknownTopicID(r.Err) {
			return true
		}
	}
	return false
}

// Publish produces one record without waiting; done (may be nil) runs with
// the outcome from the client's goroutine. It never blocks: when the buffer
// is full it fails at once with model.ErrUnavailable. A record failing with
// UNKNOWN_TOPIC_ID is produced once more on a rebuilt client.
func (p *Producer) Publish(ctx context.Context, r *kgo.Record, done func(error)) {
	p.publish(ctx, r, done, 1)
}

func (p *Producer) publish(ctx context.Context, r *kgo.Record, done func(error), again int) {
	cl, gen, err := p.current()
	if err != nil {
		if done != nil {
			done(err)
		}
		return
	}
	cl.TryProduce(ctx, cloneRecord(r), func(_ *kgo.Record, err error) {
		if err != nil && again > 0 && (IsUnknownTopicID(err) || errors.Is(err, kgo.ErrClientClosed)) {
			if IsUnknownTopicID(err) {
				p.recreate(gen)
			}
			p.publish(ctx, r, done, again-1)
			return
		}
		if err != nil {
			err = fmt.Errorf("%w: publish: %w", model.ErrUnavailable, err)
		}
		if done != nil {
			done(err)
		}
	})
}

// Flush waits until every buffered record has an outcome.
func (p *Producer) Flush(ctx context.Context) error {
	cl, _, err := p.current()
	if err != nil {
		return err
	}
	return cl.Flush(ctx)
}

// Close flushes nothing: buffered records fail with ErrClientClosed. Call
// Flush first to wait for them.
func (p *Producer) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	cl := p.cl
	p.mu.Unlock()
	cl.Close()
	p.wg.Wait()
}
