package api

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Status codes whose request counter a route keeps resolved: every code
// HTTP defines (100..599). Others, which fasthttp never writes, are looked
// up by label each time.
const (
	minCachedStatus = 100
	maxCachedStatus = 599
)

// routeMetrics is one route's series of imlab_http_requests_total and
// imlab_http_request_duration_seconds, resolved on first use and kept,
// so that a request does not hash its labels again. A series still
// appears only once a request used it, as with WithLabelValues.
type routeMetrics struct {
	name     string
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	observer atomic.Pointer[prometheus.Observer]
	codes    [maxCachedStatus - minCachedStatus + 1]atomic.Pointer[prometheus.Counter]
}

func newRouteMetrics(name string, m *metrics) *routeMetrics {
	return &routeMetrics{name: name, requests: m.requests, latency: m.latency}
}

// count counts one request answered with status.
func (rm *routeMetrics) count(status int) {
	if status < minCachedStatus || status > maxCachedStatus {
		rm.requests.WithLabelValues(rm.name, strconv.Itoa(status)).Inc()
		return
	}
	slot := &rm.codes[status-minCachedStatus]
	if c := slot.Load(); c != nil {
		(*c).Inc()
		return
	}
	c := rm.requests.WithLabelValues(rm.name, strconv.Itoa(status))
	slot.Store(&c)
	c.Inc()
}

// observe records one request's latency in seconds.
func (rm *routeMetrics) observe(seconds float64) {
	if o := rm.observer.Load(); o != nil {
		(*o).Observe(seconds)
		return
	}
	o := rm.latency.WithLabelValues(rm.name)
	rm.observer.Store(&o)
	o.Observe(seconds)
}
