package send

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/model"
)

type metrics struct {
	sends     *prometheus.CounterVec
	ackLat    *prometheus.HistogramVec
	batchSize prometheus.Histogram
	dedup     *prometheus.CounterVec
	rollbacks *prometheus.CounterVec
	lookups   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_send_total",
			Help: "Sends by ack policy and result (ok, duplicate, invalid, forbidden, not_found, too_large, unavailable, error).",
		}, []string{"policy", "result"}),
		ackLat: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "imlab_ack_latency_seconds",
			Help:    "Time from Send to its ACK (or error), by ack policy.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"policy"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "imlab_send_batch_size",
			Help:    "Messages per group-commit batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		dedup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_send_dedup_total",
			Help: "Duplicate sends answered, by where the first answer came from (recent: the process's recent-answer cache; inflight: the same send still queued or committing; store: msg_content looked up after a uk_sender_client collision).",
		}, []string{"source"}),
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_send_batch_rollbacks_total",
			Help: "Batch transaction attempts rolled back, by reason (duplicate, conv_behind, conv_stale, retryable, unavailable, error).",
		}, []string{"reason"}),
		lookups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imlab_send_dedupe_lookups_total",
			Help: "Batch attempts that looked stored (sender, client_msg_id) answers up first (after a rolled-back duplicate collision).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.dedup, err = register(reg, m.dedup); err != nil {
		return m, err
	}
	if m.rollbacks, err = register(reg, m.rollbacks); err != nil {
		return m, err
	}
	if m.lookups, err = register(reg, m.lookups); err != nil {
		return m, err
	}
	if m.sends, err = register(reg, m.sends); err != nil {
		return m, err
	}
	if m.ackLat, err = register(reg, m.ackLat); err != nil {
		return m, err
	}
	if m.batchSize, err = register(reg, m.batchSize); err != nil {
		return m, err
	}
	return m, nil
}

// register registers c, or returns the collector of the same name already
// registered (several services may share a process registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex, nil
			}
		}
		return c, fmt.Errorf("send: register metric: %w", err)
	}
	return c, nil
}

func resultLabel(res model.SendResult, err error) string {
	switch {
	case err == nil && res.Duplicate:
		return "duplicate"
	case err == nil:
		return "ok"
	case errors.Is(err, model.ErrInvalid):
		return "invalid"
	case errors.Is(err, model.ErrForbidden):
		return "forbidden"
	case errors.Is(err, model.ErrNotFound):
		return "not_found"
	case errors.Is(err, model.ErrTooLarge):
		return "too_large"
	case errors.Is(err, model.ErrUnavailable):
		return "unavailable"
	default:
		return "error"
	}
}

// sendObs is the per-send metrics of one policy, with the label lookups
// of the common outcomes done once (WithLabelValues hashes its labels on
// every call).
type sendObs struct {
	m       metrics
	policy  string
	ok, dup prometheus.Counter
	lat     prometheus.Observer
}

func (m metrics) forPolicy(policy string) sendObs {
	return sendObs{
		m: m, policy: policy,
		ok:  m.sends.WithLabelValues(policy, "ok"),
		dup: m.sends.WithLabelValues(policy, "duplicate"),
		lat: m.ackLat.WithLabelValues(policy),
	}
}

func (o sendObs) observe(start time.Time, res model.SendResult, err error) {
	switch {
	case err == nil && res.Duplicate:
		o.dup.Inc()
	case err == nil:
		o.ok.Inc()
	default:
		o.m.sends.WithLabelValues(o.policy, resultLabel(res, err)).Inc()
	}
	o.lat.Observe(time.Since(start).Seconds())
}
