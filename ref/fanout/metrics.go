package fanout

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the queue-side series of one process (ARCHITECTURE.md). A nil
// *Metrics is valid and records nothing.
type Metrics struct {
	LagSeconds    *prometheus.GaugeVec // imlab_consumer_lag_seconds{group,topic,partition}
	LagRecords    *prometheus.GaugeVec // imlab_consumer_lag_records{group,topic,partition}
	OutboxBacklog prometheus.Gauge     // imlab_outbox_backlog
	OutboxOldest  prometheus.Gauge     // imlab_outbox_oldest_age_seconds
	DLQRecords    prometheus.Gauge     // imlab_dlq_records_total: records in the dead-letter topic
	Records       *prometheus.CounterVec
	Relay         *prometheus.CounterVec
	Publish       *prometheus.CounterVec
}

// NewMetrics registers the series on reg (one registry per process).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		LagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "imlab_consumer_lag_seconds",
			Help: "Age in seconds of the oldest unprocessed message, per consumer group (tier), topic and partition."}, []string{"group", "topic", "partition"}),
		LagRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "imlab_consumer_lag_records",
			Help: "End offset minus committed offset, per consumer group (tier), topic and partition."}, []string{"group", "topic", "partition"}),
		OutboxBacklog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "imlab_outbox_backlog",
			Help: "mq_outbox rows not yet published (status 0)."}),
		OutboxOldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "imlab_outbox_oldest_age_seconds",
			Help: "Age in seconds of the oldest unpublished mq_outbox row."}),
		DLQRecords: prometheus.NewGauge(prometheus.GaugeOpts{Name: "imlab_dlq_records_total",
			Help: "Records in the dead-letter topic (end minus start offsets, all partitions)."}),
		Records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imlab_consumer_records_total",
			Help: "Deliveries by tier and outcome (ok, dead_letter, batch_failed)."}, []string{"tier", "result"}),
		Relay: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imlab_relay_rows_total",
			Help: "Outbox relay rows by action (published, failed, confirmed, republished, deleted)."}, []string{"action"}),
		Publish: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imlab_fanout_publish_total",
			Help: "Fan-out publishes by ack policy and result."}, []string{"policy", "result"}),
	}
	// Several roles of one process share the registry: a series already
	// registered is reused.
	var err error
	reuse := func(c prometheus.Collector) prometheus.Collector {
		if err != nil {
			return c
		}
		if rerr := reg.Register(c); rerr != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(rerr, &are) {
				return are.ExistingCollector
			}
			err = rerr
		}
		return c
	}
	gv := func(c *prometheus.GaugeVec) *prometheus.GaugeVec {
		x, ok := reuse(c).(*prometheus.GaugeVec)
		if !ok && err == nil {
			err = fmt.Errorf("fanout: metric registered with another type")
		}
		return x
	}
	g := func(c prometheus.Gauge) prometheus.Gauge {
		x, ok := reuse(c).(prometheus.Gauge)
		if !ok && err == nil {
			err = fmt.Errorf("fanout: metric registered with another type")
		}
		return x
	}
	cv := func(c *prometheus.CounterVec) *prometheus.CounterVec {
		x, ok := reuse(c).(*prometheus.CounterVec)
		if !ok && err == nil {
			err = fmt.Errorf("fanout: metric registered with another type")
		}
		return x
	}
	m.LagSeconds, m.LagRecords = gv(m.LagSeconds), gv(m.LagRecords)
	m.OutboxBacklog, m.OutboxOldest, m.DLQRecords = g(m.OutboxBacklog), g(m.OutboxOldest), g(m.DLQRecords)
	m.Records, m.Relay, m.Publish = cv(m.Records), cv(m.Relay), cv(m.Publish)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) processed(tier string, n int) {
	if m != nil {
		m.Records.WithLabelValues(tier, "ok").Add(float64(n))
	}
}

func (m *Metrics) deadLettered(tier string) {
	if m != nil {
		m.Records.WithLabelValues(tier, "dead_letter").Inc()
	}
}

func (m *Metrics) handleFailed(tier, what string) {
	if m != nil {
		m.Records.WithLabelValues(tier, what+"_failed").Inc()
	}
}

func (m *Metrics) relay(action string, n int) {
	if m != nil && n > 0 {
		m.Relay.WithLabelValues(action).Add(float64(n))
	}
}

func (m *Metrics) publish(policy, result string, n int) {
	if m != nil && n > 0 {
		m.Publish.WithLabelValues(policy, result).Add(float64(n))
	}
}

func (m *Metrics) setLag(group, topic string, partition int32, seconds float64, records int64) {
	if m != nil {
		p := strconv.Itoa(int(partition))
		m.LagSeconds.WithLabelValues(group, topic, p).Set(seconds)
		m.LagRecords.WithLabelValues(group, topic, p).Set(float64(records))
	}
}
