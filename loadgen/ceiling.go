package loadgen

import (
	"context"
	"math"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"imlab/loadgen/summary"
	"imlab/targets"
	"imlab/targets/drivers"
	"imlab/targets/ref/noop"
)

// CeilingConfig is what MeasureCeiling measures: the run's own transport.
type CeilingConfig struct {
	Secret        string
	Via           string // ViaHTTP (default) or ViaWS
	Conns         int
	Pipeline      int           // targets.SendPool.Pipeline (HTTP only)
	PipelineDelay time.Duration // targets.SendPool.PipelineDelay
	Workers       int
	For           time.Duration
}

// MeasureCeiling runs the generator's send path (over c.Via, with c.Conns
// connections, c.Pipeline) as fast as c.Workers can go against an
// in-process no-op endpoint for c.For and returns the rate it reached.
// Over WebSocket, the connections are shared by the workers.
func MeasureCeiling(ctx context.Context, c CeilingConfig) (summary.Ceiling, error) {
	via, conns, workers, d := c.Via, c.Conns, c.Workers, c.For
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		return summary.Ceiling{}, err
	}
	defer srv.Close()
	tc := targets.Config{Target: srv.URL(), Driver: targets.DriverRef, Secret: c.Secret, Conns: conns, Timeout: 5 * time.Second}
	if via != ViaWS && c.Pipeline > 0 {
		tc.SendPool = targets.SendPool{Own: true, Conns: conns, Pipeline: c.Pipeline, PipelineDelay: c.PipelineDelay}
	}
	drv, err := drivers.Open(tc)
	if err != nil {
		return summary.Ceiling{}, err
	}
	defer drv.Close()
	sess, err := drv.Session(ctx, 1, "ceiling")
	if err != nil {
		return summary.Ceiling{}, err
	}
	var senders []targets.Sender
	if via == ViaWS {
		for range min(conns, workers) {
			s, err := sess.DialSender(ctx)
			if err != nil {
				return summary.Ceiling{}, err
			}
			defer s.Close()
			senders = append(senders, s)
		}
	}
	n, took := closedLoop(ctx, workers, d, func(w int, req *targets.SendReq) error {
		var err error
		if senders != nil {
			_, err = senders[w%len(senders)].Send(ctx, req, tc.Timeout)
		} else {
			_, err = sess.Send(ctx, req)
		}
		return err
	})
	el := took.Seconds()
	if via == "" {
		via = ViaHTTP
	}
	return summary.Ceiling{PerSec: float64(n) / el, Requests: n, Seconds: el, Via: via, Conns: conns, Pipeline: tc.SendPool.Pipeline, Workers: workers}, ctx.Err()
}

// ceilingContent is the body of the sends that measure the generator (64
// bytes).
var ceilingContent = strings.Repeat("x", 64)

// closedLoop runs workers that call send back to back (worker w with a
// request of its own, a fresh client_msg_id each time) until d has passed
// or ctx ends, and returns how many sends succeeded and how long it took.
func closedLoop(ctx context.Context, workers int, d time.Duration, send func(w int, req *targets.SendReq) error) (uint64, time.Duration) {
	var n uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := targets.SendReq{ConvType: 1, ToUID: 2, Content: ceilingContent}
			var mine uint64
			for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
				req.ClientMsgID = "c-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if send(w, &req) == nil {
					mine++
				}
			}
			mu.Lock()
			n += mine
			mu.Unlock()
		}()
	}
	wg.Wait()
	return n, time.Since(start)
}

// gcPercent reads the collector's target percentage (-1: off) without
// setting it.
func gcPercent() int {
	sample := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(sample)
	if sample[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	v := sample[0].Value.Uint64()
	if v == math.MaxUint64 { // GOGC=off
		return -1
	}
	return int(v)
}
