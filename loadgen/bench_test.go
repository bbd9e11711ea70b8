package loadgen

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"imlab/loadgen/schedule"
	"imlab/targets"
	"imlab/targets/ref/client"
)

// The comparison with vegeta: the same no-op fasthttp endpoint, the same
// request (a send body with a bearer token), the same worker and connection
// counts, in the same run. Run with:
//
//	go test -run '^$' -bench BenchmarkVsVegeta -benchtime 1x ./loadgen/
//
// The endpoint runs in a child process (this test binary again, see
// main_test.go), as a real target would: sharing the generators' Go
// scheduler and collector, its handler's batches held up their pacers.
// Every case runs twice: procs_N with GOMAXPROCS = NumCPU and with
// DefaultProcs (imlab load's --procs default), for both generators.
//
// Each sub-benchmark runs one bounded trial (benchTrial, 2 s; a trial is
// longer than the default benchtime, so b.N stays 1 and the whole benchmark
// takes about 40 s) and reports:
//
//   - max_rate/{loadgen,loadgen_ws,loadgen_pipelined,vegeta}: req/s
//     answered 200 as fast as 64 workers on 64 connections can go
//     (loadgen_ws: 64 WebSockets, the --send-via ws path;
//     loadgen_pipelined: 1,024 workers on 2 connections pipelining up to
//     512 requests each, batched for up to 200 µs: --conns 2 --pipeline
//     512 --pipeline-delay 200us);
//   - rate_10k/, rate_50k/{loadgen,vegeta}: a constant-rate trial; req/s,
//     and the scheduling error (actual start - intended start) as
//     sched_p50_µs, sched_p99_µs (the target: < 1000 at 50k/s) and
//     sched_max_µs; loadgen also reports late (> 1 ms) and missed sends,
//     the pool size it grew to (workers) and the sends a finishing worker
//     took itself (direct), vegeta the ticks it never started (unsent).
//     Both start with 64 workers on 64 connections and may grow their
//     worker pool to benchMaxWorkers (1,024, 16 per connection; the pacer's
//     MaxWorkers, vegeta's MaxWorkers). Workers beyond 64 only wait for a
//     connection inside the send, after their start was recorded; letting
//     both grow to 20,000 made the pool run away after a stall (thousands
//     of goroutines queued on 64 connections) and starved both pacers.
//     rate_*/loadgen_pipelined is loadgen on the pipelined pool. Each
//     constant-rate trial also reports the generator's CPU per send
//     started (cpu_µs/send: this process's user + system time over the
//     trial, the endpoint being another process), vegeta's beside it.
//
// Every trial starts on a warm pool (loadgen: client.Warm, as imlab load
// does before its schedule starts; vegeta: a 100 ms attack on the same
// transport first) after a collection, and the process runs with the
// garbage collector at benchGOGC, imlab load's default (--gogc), for both
// generators.
const (
	benchTrial      = 2 * time.Second
	benchWorkers    = 64
	benchConns      = 64
	benchMaxWorkers = 1024
	benchRate       = 50000
	benchPipeConns  = 2
	benchPipeline   = 512
	benchPipeDelay  = 200 * time.Microsecond
	benchGOGC       = 400
)

// benchContent is every benchmark message's body (64 bytes, as vegeta's).
var benchContent = ceilingContent

func benchSetup(b *testing.B) (string, *client.Client, string, []byte) {
	srv := startNoopProcess(b)
	cl := benchClient(b, srv, benchConns, 0, 0)
	tok, err := cl.Token(1, "bench")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"client_msg_id":"c-1","conv_type":1,"to_uid":2,"content":"` + benchContent + `"}`)
	return srv, cl, tok, body
}

// benchClient is a warm client of srv.
func benchClient(b *testing.B, srv string, conns, pipeline int, delay time.Duration) *client.Client {
	cc := client.DefaultConfig()
	cc.Target, cc.Secret, cc.MaxConns, cc.Pipeline, cc.PipelineDelay = srv, testSecret, conns, pipeline, delay
	cl, err := client.New(cc)
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Warm(context.Background(), conns); err != nil {
		b.Fatal(err)
	}
	return cl
}

// vegetaAttacker returns an attacker whose connections were opened by a
// 100 ms attack first (an attacker runs one attack: the warm one and the
// returned one share an http.Transport, built as vegeta builds its own).
func vegetaAttacker(maxWorkers uint64, tr vegeta.Targeter) *vegeta.Attacker {
	hc := &http.Client{Transport: &http.Transport{
		Proxy:       http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
	}}
	mk := func(maxWorkers uint64) *vegeta.Attacker {
		return vegeta.NewAttacker(vegeta.Client(hc), vegeta.Workers(benchWorkers), vegeta.MaxWorkers(maxWorkers), vegeta.Connections(benchConns),
			vegeta.MaxConnections(benchConns), vegeta.KeepAlive(true), vegeta.HTTP2(false), vegeta.Timeout(5*time.Second))
	}
	for range mk(benchWorkers).Attack(tr, vegeta.Rate{Freq: 0}, 100*time.Millisecond, "warm") {
	}
	return mk(maxWorkers)
}

func vegetaTargeter(url, tok string, body []byte) vegeta.Targeter {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	h.Set("Content-Type", "application/json")
	return vegeta.NewStaticTargeter(vegeta.Target{Method: "POST", URL: url + "/v1/msg/send", Body: body, Header: h})
}

type errs []time.Duration

func (e errs) report(b *testing.B, n int, el time.Duration) {
	b.ReportMetric(float64(n)/el.Seconds(), "req/s")
	if len(e) == 0 {
		return
	}
	sort.Slice(e, func(i, j int) bool { return e[i] < e[j] })
	b.ReportMetric(float64(e[len(e)/2].Microseconds()), "sched_p50_µs")
	b.ReportMetric(float64(e[len(e)*99/100].Microseconds()), "sched_p99_µs")
	b.ReportMetric(float64(e[len(e)-1].Microseconds()), "sched_max_µs")
}

func BenchmarkVsVegeta(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(benchGOGC))
	srv, cl, tok, body := benchSetup(b)
	defer cl.Close()
	pcl := benchClient(b, srv, benchPipeConns, benchPipeline, benchPipeDelay)
	defer pcl.Close()

	for _, procs := range []int{runtime.NumCPU(), DefaultProcs()} {
		b.Run("procs_"+strconv.Itoa(procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			benchMaxRate(b, "max_rate/loadgen", cl, tok, benchWorkers)
			benchMaxRate(b, "max_rate/loadgen_pipelined", pcl, tok, benchMaxWorkers)

			b.Run("max_rate/loadgen_ws", func(b *testing.B) {
				for range b.N {
					runtime.GC() // the previous trial's garbage is not this one's
					senders := make([]*client.Sender, benchConns)
					for i := range senders {
						s, err := cl.DialSender(context.Background(), tok)
						if err != nil {
							b.Fatal(err)
						}
						senders[i] = s
					}
					maxRateTrial(b, benchWorkers, func(w int, req *client.SendReq) error {
						_, err := senders[w%len(senders)].Send(req, 5*time.Second)
						return err
					})
					for _, s := range senders {
						s.Close()
					}
				}
			})

			b.Run("max_rate/vegeta", func(b *testing.B) {
				for range b.N {
					runtime.GC() // the previous trial's garbage is not this one's
					atk := vegetaAttacker(benchWorkers, vegetaTargeter(srv, tok, body))
					n := 0
					start := time.Now()
					for res := range atk.Attack(vegetaTargeter(srv, tok, body), vegeta.Rate{Freq: 0}, benchTrial, "max") {
						if res.Code == 200 {
							n++
						}
					}
					errs(nil).report(b, n, time.Since(start))
				}
			})

			for _, rate := range []int{10000, benchRate} {
				benchFixedRate(b, srv, cl, pcl, tok, body, rate)
			}
		})
	}
}

// benchMaxRate: workers send back to back through cl for benchTrial.
func benchMaxRate(b *testing.B, name string, cl *client.Client, tok string, workers int) {
	b.Run(name, func(b *testing.B) {
		for range b.N {
			runtime.GC() // the previous trial's garbage is not this one's
			maxRateTrial(b, workers, func(_ int, req *client.SendReq) error {
				_, err := cl.Send(tok, req)
				return err
			})
		}
	})
}

// maxRateTrial: workers call send back to back for benchTrial (closedLoop,
// the loop of MeasureCeiling); it reports the rate of sends that succeeded.
func maxRateTrial(b *testing.B, workers int, send func(w int, req *client.SendReq) error) {
	n, took := closedLoop(context.Background(), workers, benchTrial, func(w int, r *targets.SendReq) error {
		req := client.SendReq{ClientMsgID: r.ClientMsgID, ConvType: r.ConvType, ToUID: r.ToUID, GroupID: r.GroupID, Content: r.Content}
		return send(w, &req)
	})
	errs(nil).report(b, int(n), took)
}

func benchFixedRate(b *testing.B, srv string, cl, pcl *client.Client, tok string, body []byte, rate int) {
	name := "rate_" + strconv.Itoa(rate/1000) + "k/"
	benchScheduled(b, name+"loadgen", cl, tok, rate)
	benchScheduled(b, name+"loadgen_pipelined", pcl, tok, rate)
	b.Run(name+"vegeta", func(b *testing.B) {
		for range b.N {
			runtime.GC() // the previous trial's garbage is not this one's
			atk := vegetaAttacker(benchMaxWorkers, vegetaTargeter(srv, tok, body))
			e := make(errs, 0, rate*3)
			n := 0
			interval := time.Second / time.Duration(rate)
			cpu0 := processCPU()
			start := time.Now()
			for res := range atk.Attack(vegetaTargeter(srv, tok, body), vegeta.Rate{Freq: rate, Per: time.Second}, benchTrial, "rate") {
				if res.Code == 200 {
					n++
				}
				d := res.Timestamp.Sub(start.Add(time.Duration(res.Seq) * interval))
				e = append(e, max(d, 0))
			}
			reportCPU(b, processCPU()-cpu0, len(e))
			e.report(b, n, time.Since(start))
			// vegeta stops at the duration: ticks it could not start are not sent and not reported.
			b.ReportMetric(float64(int(benchTrial.Seconds())*rate-len(e)), "unsent")
		}
	})
}

// benchScheduled: the pacer at a constant rate, sending through cl.
func benchScheduled(b *testing.B, name string, cl *client.Client, tok string, rate int) {
	b.Run(name, func(b *testing.B) {
		for range b.N {
			runtime.GC() // the previous trial's garbage is not this one's
			cfg := schedule.DefaultConfig()
			cfg.Workers, cfg.MaxWorkers = benchWorkers, benchMaxWorkers
			var mu sync.Mutex
			e := make(errs, 0, rate*3)
			n := 0
			cpu0 := processCPU()
			start := time.Now()
			st, err := schedule.Run(context.Background(), cfg, schedule.NewIter(schedule.Constant{PerSec: float64(rate)}, benchTrial), start, nil,
				func(_ int, t schedule.Tick, started time.Duration) {
					req := client.SendReq{ClientMsgID: "c-" + strconv.FormatUint(t.Idx, 10), ConvType: 1, ToUID: 2, Content: benchContent}
					_, err := cl.Send(tok, &req)
					mu.Lock()
					e = append(e, started-t.Intended)
					if err == nil {
						n++
					}
					mu.Unlock()
				})
			if err != nil {
				b.Fatal(err)
			}
			reportCPU(b, processCPU()-cpu0, int(st.Started))
			e.report(b, n, time.Since(start))
			b.ReportMetric(float64(st.Late), "late")
			b.ReportMetric(float64(st.Workers), "workers")
			b.ReportMetric(float64(st.Direct), "direct")
			b.ReportMetric(float64(st.Missed), "missed")
		}
	})
}

// BenchmarkBurstGenerator: what the generator itself spends to offer a
// 50,000 sends/s burst (2 s) to a server that answers 7,000/s on 512
// connections (a child process that queues requests), so that ~90,000
// sends are in flight at its end, as in scenarios/full/burst-50k.yaml:
//
//	go test -run '^$' -bench BenchmarkBurstGenerator -benchtime 1x ./loadgen/
//
// goroutine_per_send is the pacer's pool mode (a goroutine per send in
// flight, up to 300,000); queued is the queued mode (512 senders fed by
// the pacer's queue), queued_no_spin the same with a pacer on the
// runtime's timers only, without its kernel sleep for the last 2 ms
// (load.spin_window: 0s). Each reports the generator's CPU per started send
// (cpu_µs/send, this process's user+system time over the trial: the
// server is another process), the start delay p99 (sched_p99_µs) and
// the goroutines at the end of the burst. It waits for every answer.
func BenchmarkBurstGenerator(b *testing.B) {
	const burst, conns, served = 2 * time.Second, 512, 7000
	srv := startSlowProcess(b, served)
	for _, mode := range []struct {
		name string
		cfg  func(*schedule.Config)
	}{
		{"goroutine_per_send", func(c *schedule.Config) { c.MaxWorkers = 300_000 }},
		{"queued", func(c *schedule.Config) { c.Senders, c.MaxQueued = conns, 1_000_000 }},
		{"queued_no_spin", func(c *schedule.Config) { c.Senders, c.MaxQueued, c.SpinWindow = conns, 1_000_000, 0 }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			cc := client.DefaultConfig()
			cc.Target, cc.Secret, cc.MaxConns, cc.Timeout = srv, testSecret, conns, time.Minute // the last answer comes ~14 s after its send
			cl, err := client.New(cc)
			if err != nil {
				b.Fatal(err)
			}
			if err := cl.Warm(context.Background(), conns); err != nil {
				b.Fatal(err)
			}
			tok, err := cl.Token(1, "bench")
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				pc := schedule.DefaultConfig()
				mode.cfg(&pc)
				runtime.GC()
				var mu sync.Mutex
				var delays errs
				var peakG atomic.Int64
				cpu0 := processCPU()
				start := time.Now().Add(50 * time.Millisecond)
				var live schedule.Live
				go func() { // samples the goroutines at the burst's end
					time.Sleep(time.Until(start.Add(burst)))
					peakG.Store(int64(runtime.NumGoroutine()))
				}()
				st, err := schedule.Run(context.Background(), pc, schedule.NewIter(schedule.Constant{PerSec: benchRate}, burst), start, &live,
					func(w int, t schedule.Tick, started time.Duration) {
						req := client.SendReq{ClientMsgID: "b-" + strconv.FormatUint(t.Idx, 10), ConvType: 1, ToUID: 2, Content: benchContent}
						mu.Lock()
						delays = append(delays, started-t.Intended)
						mu.Unlock()
						if _, err := cl.Send(tok, &req); err != nil {
							b.Error(err)
						}
					})
				if err != nil {
					b.Fatal(err)
				}
				cpu := processCPU() - cpu0
				b.ReportMetric(float64(cpu.Microseconds())/float64(st.Started), "cpu_µs/send")
				b.ReportMetric(float64(peakG.Load()), "goroutines")
				delays.report(b, int(st.Started), burst) // req/s: started per second of the burst
			}
		})
	}
}

// reportCPU reports cpu, this process's CPU time over a trial, per send
// started in it (cpu_µs/send); the endpoint is another process, so this is
// the generator's own cost. A trial that started nothing reports nothing.
func reportCPU(b *testing.B, cpu time.Duration, sends int) {
	if sends > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(sends), "cpu_µs/send")
	}
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
