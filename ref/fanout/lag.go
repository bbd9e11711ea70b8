package fanout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/model"
)

// PartitionLag is one partition's lag for one consumer group.
type PartitionLag struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset (the first unprocessed
	// record); -1 when the group never committed (it starts at Start).
	Committed int64 `json:"committed"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	// Records is End minus the first unprocessed offset.
	Records int64 `json:"records"`
	// AgeSeconds is now minus the sent_at of the first unprocessed record
	// (0 when there is none): the age of the oldest unprocessed message.
	// It is 0 and AgeUnknown is true when records wait but the first of
	// them could not be read (the probe failed or timed out): a failed
	// measurement is unknown, never 0.
	AgeSeconds float64 `json:"age_seconds"`
	AgeUnknown bool    `json:"age_unknown,omitempty"`
	// OldestSentAt is that record's sent_at (zero when caught up).
	OldestSentAt time.Time `json:"oldest_sent_at,omitzero"`
}

// LagSnapshot is one measurement of the queue side, as served on the lag
// JSON endpoint and mirrored on /metrics.
type LagSnapshot struct {
	At         time.Time      `json:"at"`
	Partitions []PartitionLag `json:"partitions"`
	// MaxAgeSeconds and Records summarise each group (MaxAgeSeconds over
	// the partitions whose age is known).
	MaxAgeSeconds map[string]float64 `json:"max_age_seconds"`
	Records       map[string]int64   `json:"records"`
	// UnknownAge counts, per group, the partitions with records waiting
	// whose age could not be measured: MaxAgeSeconds of such a group is a
	// lower bound only. A group whose offsets could not be read at all is
	// missing from MaxAgeSeconds and named in Errors.
	UnknownAge map[string]int `json:"unknown_age,omitempty"`
	// OutboxBacklog is the count of mq_outbox rows with status 0 and
	// OutboxOldestAgeSeconds the age of the oldest (-1 without a database).
	OutboxBacklog          int64   `json:"outbox_backlog"`
	OutboxOldestAgeSeconds float64 `json:"outbox_oldest_age_seconds"`
	// OutboxUnconfirmed counts rows published but not confirmed (status 1).
	OutboxUnconfirmed int64 `json:"outbox_unconfirmed"`
	// DLQRecords is the number of records in the dead-letter topic.
	DLQRecords int64 `json:"dlq_records"`
	// Errors are the parts of the measurement that failed. A snapshot with
	// errors is not a complete measurement (Complete).
	Errors []string `json:"errors,omitempty"`
	// OutboxError is the outbox query's error, which is also one of
	// Errors: a reader that needs the consumer lag alone can tell the
	// outbox's failure from the others' without reading the text. ""
	// when the outbox was measured or there is none.
	OutboxError string `json:"outbox_error,omitempty"`
}

// Complete tells whether every part of the measurement succeeded: no
// errors and no partition of unknown age.
func (s LagSnapshot) Complete() bool {
	return len(s.Errors) == 0 && len(s.UnknownAge) == 0 && !s.At.IsZero()
}

// MonitorConfig configures a lag Monitor.
type MonitorConfig struct {
	Brokers  []string
	Topic    string
	DLQTopic string
	// Groups are the tiers' consumer groups to measure.
	Groups []string
	// Interval between measurements (the lab polls each second).
	Interval time.Duration
	// ProbeTimeout bounds reading the first unprocessed records.
	ProbeTimeout time.Duration
	Logger       *slog.Logger
}

// DefaultMonitorConfig measures the inbox and history groups every second.
func DefaultMonitorConfig() MonitorConfig {
	return MonitorConfig{
		Topic: DefaultTopic, DLQTopic: DefaultDLQTopic,
		Groups:   []string{"imlab-inbox", "imlab-history"},
		Interval: time.Second, ProbeTimeout: 2 * time.Second,
	}
}

// Validate checks the configuration.
func (c MonitorConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: monitor needs brokers", model.ErrInvalid)
	case c.Topic == "" || c.DLQTopic == "":
		return fmt.Errorf("%w: monitor needs topics", model.ErrInvalid)
	case len(c.Groups) == 0 || len(c.Groups) > 16:
		return fmt.Errorf("%w: monitor needs 1..16 groups", model.ErrInvalid)
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("%w: monitor interval below 100ms", model.ErrInvalid)
	case c.ProbeTimeout < 100*time.Millisecond || c.ProbeTimeout > c.Interval*10:
		return fmt.Errorf("%w: monitor probe timeout", model.ErrInvalid)
	}
	return nil
}

// Monitor measures lag as the age of the oldest unprocessed message: for
// each group and partition it reads the committed offset and, when it is
// behind the end, the record at that offset, whose sent_at the lab wrote.
// It works from any process (a consumer that is down still has lag), and
// it is exact up to the consumers' commit interval.
//
// The monitor keeps two Kafka clients for its life: the admin client and
// a direct consumer (no group) that each probe points at the wanted
// offsets (AddConsumePartitions) and releases afterwards, so a poll opens
// no new connections. Polls are serialised.
type Monitor struct {
	cfg MonitorConfig
	db  *sql.DB // optional, for the outbox backlog
	m   *Metrics
	log *slog.Logger
	adm *kadm.Client
	cl  *kgo.Client
	pc  *kgo.Client // the probe's direct consumer

	pollMu sync.Mutex // one Poll at a time (the probe client's partitions)
	mu     sync.Mutex
	last   LagSnapshot
}

// NewMonitor builds a monitor; db (may be nil) adds the outbox backlog.
func NewMonitor(cfg MonitorConfig, db *sql.DB, m *Metrics) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("imlab-lag"),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("fanout: monitor client: %w", err)
	}
	pc, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("imlab-lag-probe"),
		kgo.FetchMaxPartitionBytes(64<<10), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("fanout: monitor probe client: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Monitor{cfg: cfg, db: db, m: m, log: log, adm: kadm.NewClient(cl), cl: cl, pc: pc}, nil
}

// Close releases the clients.
func (mo *Monitor) Close() {
	mo.pc.Close()
	mo.cl.Close()
}

// freshEnough is how old the latest measurement may be for Fresh to
// return it instead of measuring again: it bounds the measurements a
// caller can trigger (at most one per freshEnough) while keeping the
// answer's age well under the lab's one-second polls.
const freshEnough = 100 * time.Millisecond

// Fresh returns a measurement taken now: the latest when it is younger
// than freshEnough, else a new one (bounded like Run's), so that a poller
// whose clock is not Run's gets figures of the moment it asked, not of up
// to Interval before.
func (mo *Monitor) Fresh(ctx context.Context) LagSnapshot {
	fresh := func() (LagSnapshot, bool) {
		s := mo.Snapshot()
		return s, !s.At.IsZero() && time.Since(s.At) < freshEnough
	}
	if s, ok := fresh(); ok {
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, mo.pollTimeout())
	defer cancel()
	mo.pollMu.Lock()
	defer mo.pollMu.Unlock()
	// Callers that waited here behind a measurement take its answer.
	if s, ok := fresh(); ok {
		return s
	}
	s, err := mo.pollLocked(ctx)
	if err != nil && ctx.Err() == nil {
		mo.log.Warn("lag measurement failed", "err", err)
	}
	return s
}

// Snapshot returns the latest measurement (zero before the first).
func (mo *Monitor) Snapshot() LagSnapshot {
	mo.mu.Lock()
	defer mo.mu.Unlock()
	return mo.last
}

// pollTimeout bounds one Poll of Run: a broker that does not answer makes
// the measurement fail (and say so) instead of leaving an old snapshot in
// place.
func (mo *Monitor) pollTimeout() time.Duration { return mo.cfg.Interval + 2*mo.cfg.ProbeTimeout }

// Run measures every Interval until ctx is done.
func (mo *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(mo.cfg.Interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, mo.pollTimeout())
		_, err := mo.Poll(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			mo.log.Warn("lag measurement failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll takes one measurement, stores it as the latest and updates metrics.
// A measurement that failed as a whole is stored too, with its error and
// no ages, so that nobody reads the previous one as current.
func (mo *Monitor) Poll(ctx context.Context) (LagSnapshot, error) {
	mo.pollMu.Lock()
	defer mo.pollMu.Unlock()
	return mo.pollLocked(ctx)
}

// pollLocked is Poll with pollMu held.
func (mo *Monitor) pollLocked(ctx context.Context) (LagSnapshot, error) {
	s, err := mo.measure(ctx)
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
	}
	mo.mu.Lock()
	mo.last = s
	mo.mu.Unlock()
	return s, err
}

// measure is one measurement (its caller holds pollMu).
func (mo *Monitor) measure(ctx context.Context) (LagSnapshot, error) {
	now := time.Now()
	s := LagSnapshot{At: now.UTC(), MaxAgeSeconds: map[string]float64{}, Records: map[string]int64{}, OutboxOldestAgeSeconds: -1}
	starts, err := mo.adm.ListStartOffsets(ctx, mo.cfg.Topic, mo.cfg.DLQTopic)
	if err != nil {
		return s, fmt.Errorf("fanout: list start offsets: %w", err)
	}
	ends, err := mo.adm.ListEndOffsets(ctx, mo.cfg.Topic, mo.cfg.DLQTopic)
	if err != nil {
		return s, fmt.Errorf("fanout: list end offsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic != mo.cfg.DLQTopic || o.Err != nil {
			return
		}
		st := int64(0)
		if so, ok := starts.Lookup(o.Topic, o.Partition); ok && so.Err == nil {
			st = so.Offset
		}
		s.DLQRecords += o.Offset - st
	})

	type probeKey struct {
		partition int32
		offset    int64
	}
	probes := map[probeKey][]int{} // → indexes into s.Partitions
	for _, g := range mo.cfg.Groups {
		offs, err := mo.adm.FetchOffsets(ctx, g)
		if errors.Is(err, kerr.GroupIDNotFound) {
			// A tier that never committed: everything is unprocessed.
			offs, err = kadm.OffsetResponses{}, nil
		}
		if err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("group %s: %v", g, err))
			continue
		}
		s.MaxAgeSeconds[g] = 0
		s.Records[g] = 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic != mo.cfg.Topic {
				return
			}
			if o.Err != nil {
				s.Errors = append(s.Errors, fmt.Sprintf("end offset %s/%d: %v", o.Topic, o.Partition, o.Err))
				return
			}
			pl := PartitionLag{Group: g, Topic: o.Topic, Partition: o.Partition, Committed: -1, End: o.Offset}
			if so, ok := starts.Lookup(o.Topic, o.Partition); ok && so.Err == nil {
				pl.Start = so.Offset
			}
			first := pl.Start
			if co, ok := offs.Lookup(o.Topic, o.Partition); ok && co.Err == nil && co.At >= 0 {
				pl.Committed = co.At
				first = max(co.At, pl.Start)
			}
			if first > pl.End { // committed past the end: the topic was recreated
				first = pl.End
			}
			pl.Records = pl.End - first
			s.Partitions = append(s.Partitions, pl)
			if pl.Records > 0 {
				k := probeKey{o.Partition, first}
				probes[k] = append(probes[k], len(s.Partitions)-1)
			}
		})
	}

	if len(probes) > 0 {
		want := map[int32]map[int64]bool{}
		for k := range probes {
			if want[k.partition] == nil {
				want[k.partition] = map[int64]bool{}
			}
			want[k.partition][k.offset] = true
		}
		found, err := mo.probe(ctx, want)
		if err != nil {
			s.Errors = append(s.Errors, err.Error())
		}
		for k, idx := range probes {
			ts, ok := found[k.partition][k.offset]
			for _, i := range idx {
				if ok {
					s.Partitions[i].OldestSentAt = ts.UTC()
					s.Partitions[i].AgeSeconds = max(0, now.Sub(ts).Seconds())
				} else {
					s.Partitions[i].AgeUnknown = true
				}
			}
		}
	}
	for _, pl := range s.Partitions {
		s.MaxAgeSeconds[pl.Group] = max(s.MaxAgeSeconds[pl.Group], pl.AgeSeconds)
		s.Records[pl.Group] += pl.Records
		if pl.AgeUnknown {
			if s.UnknownAge == nil {
				s.UnknownAge = map[string]int{}
			}
			s.UnknownAge[pl.Group]++
		}
	}
	sort.Slice(s.Partitions, func(i, j int) bool {
		a, b := s.Partitions[i], s.Partitions[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Partition < b.Partition
	})

	if mo.db != nil {
		if err := mo.outbox(ctx, now, &s); err != nil {
			s.OutboxError = err.Error()
			s.Errors = append(s.Errors, s.OutboxError)
		}
	}

	for _, pl := range s.Partitions {
		age := pl.AgeSeconds
		if pl.AgeUnknown {
			age = math.NaN() // unknown, never 0
		}
		mo.m.setLag(pl.Group, pl.Topic, pl.Partition, age, pl.Records)
	}
	if mo.m != nil {
		mo.m.DLQRecords.Set(float64(s.DLQRecords))
		if mo.db != nil {
			mo.m.OutboxBacklog.Set(float64(s.OutboxBacklog))
			mo.m.OutboxOldest.Set(max(0, s.OutboxOldestAgeSeconds))
		}
	}
	return s, nil
}

// probe reads the records at the wanted offsets and returns their sent_at.
func (mo *Monitor) probe(ctx context.Context, want map[int32]map[int64]bool) (map[int32]map[int64]time.Time, error) {
	// One direct consumer per distinct offset of a partition is rare (two
	// groups at different offsets); read from the lowest and scan forward
	// only as far as the highest wanted offset.
	lo := map[int32]int64{}
	hi := map[int32]int64{}
	for p, offs := range want {
		first := true
		for o := range offs {
			if first || o < lo[p] {
				lo[p] = o
			}
			if first || o > hi[p] {
				hi[p] = o
			}
			first = false
		}
	}
	parts := map[int32]kgo.Offset{}
	ids := make([]int32, 0, len(lo))
	for p, o := range lo {
		parts[p] = kgo.NewOffset().At(o)
		ids = append(ids, p)
	}
	// The probe client consumes exactly these partitions for this probe:
	// they are released (and resumed) before it returns, so the next probe
	// starts from its own offsets.
	cl := mo.pc
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{mo.cfg.Topic: parts})
	defer func() {
		tps := map[string][]int32{mo.cfg.Topic: ids}
		cl.RemoveConsumePartitions(tps)
		cl.ResumeFetchPartitions(tps)
	}()
	ctx, cancel := context.WithTimeout(ctx, mo.cfg.ProbeTimeout)
	defer cancel()
	out := map[int32]map[int64]time.Time{}
	pending := 0
	for _, offs := range want {
		pending += len(offs)
	}
	for pending > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("fanout: probe: %d records not read in %s", pending, mo.cfg.ProbeTimeout)
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			offs := want[p.Partition]
			for _, r := range p.Records {
				if !offs[r.Offset] {
					continue
				}
				ts := r.Timestamp
				if ev, err := UnmarshalEvent(r.Value); err == nil {
					ts = ev.SentAt
				}
				if out[p.Partition] == nil {
					out[p.Partition] = map[int64]time.Time{}
				}
				out[p.Partition][r.Offset] = ts
				delete(offs, r.Offset)
				pending--
			}
			// A wanted offset that no longer exists (records deleted) is
			// never returned: give up on it once the partition is read past it.
			if n := len(p.Records); n > 0 && p.Records[n-1].Offset >= hi[p.Partition] && len(offs) > 0 {
				pending -= len(offs)
				clear(offs)
			}
			if len(offs) == 0 {
				cl.PauseFetchPartitions(map[string][]int32{mo.cfg.Topic: {p.Partition}})
			}
		})
	}
	return out, nil
}

func (mo *Monitor) outbox(ctx context.Context, now time.Time, s *LagSnapshot) error {
	var n int64
	var oldest sql.NullTime
	if err := mo.db.QueryRowContext(ctx,
		`SELECT COUNT(*), MIN(created_at) FROM mq_outbox WHERE status = 0`).Scan(&n, &oldest); err != nil {
		return fmt.Errorf("fanout: outbox backlog: %w", err)
	}
	s.OutboxBacklog = n
	s.OutboxOldestAgeSeconds = 0
	if oldest.Valid {
		s.OutboxOldestAgeSeconds = max(0, now.Sub(oldest.Time).Seconds())
	}
	if err := mo.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM mq_outbox WHERE status = 1`).Scan(&s.OutboxUnconfirmed); err != nil {
		return fmt.Errorf("fanout: outbox unconfirmed: %w", err)
	}
	return nil
}
