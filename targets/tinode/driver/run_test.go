package driver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"imlab/checker"
	"imlab/ledger"
	"imlab/targets/tinode"
	"imlab/targets/tinode/tinodefake"
)

const fakeKey = "fake-key"

// labRun is a small run of the lab against a Tinode through the driver:
// one online device per user receiving pushes, sends one at a time from
// a script, every device caught up at the end, the history witness, and
// the checker's verdict on the ledger written.
type labRun struct {
	t     *testing.T
	d     *Driver
	start time.Time
	led   *ledger.Ledger
	dir   string
	devs  []*Device
	pop   Population
	sendS *ledger.Shard // the sends' and the witness's shard (this goroutine's)
	stop  context.CancelFunc
	wg    sync.WaitGroup
	tick  uint64
}

func fakeServer(t *testing.T) *tinodefake.Server {
	t.Helper()
	srv, err := tinodefake.Start(tinodefake.Config{APIKey: fakeKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

func testConfig(url, key, hash string) Config {
	return Config{Wire: tinode.Config{URL: url, APIKey: key, RequestTimeout: 2 * time.Second}, RunHash: hash, TagPrefix: "run" + hash}
}

// newLabRun provisions users 1..n and group 100 of users 1..3, connects a
// device per user and starts its reader.
func newLabRun(t *testing.T, ctx context.Context, cfg Config, n int) *labRun {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	r := &labRun{t: t, d: d}
	for u := range n {
		r.pop.Users = append(r.pop.Users, uint64(u+1))
	}
	r.pop.Groups = []Group{{ID: 100, Members: []uint64{1, 2, 3}}}
	if err := d.Provision(ctx, r.pop); err != nil {
		t.Fatal(err)
	}
	r.start = time.Now()
	caps := Capabilities()
	r.dir = t.TempDir()
	if r.led, err = ledger.CreateWith(r.dir, ledger.Options{RunID: "drv", Start: r.start, Shards: n + 1, Target: &caps}); err != nil {
		t.Fatal(err)
	}
	r.sendS = r.led.Shard(n)
	if err := r.sendS.Group(ledger.Group{GroupID: 100, Members: r.pop.Groups[0].Members}); err != nil {
		t.Fatal(err)
	}
	devCtx, stop := context.WithCancel(ctx)
	r.stop = stop
	for i, uid := range r.pop.Users {
		dv, err := d.Device(uid, fmt.Sprint("dev", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := dv.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		r.devs = append(r.devs, dv)
		sh := r.led.Shard(i)
		sh.Device(ledger.Device{Dev: uint32(i), UID: uid, Kind: ledger.Online, DID: dv.did})
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				select {
				case p := <-dv.Pushes():
					if err := dv.Take(devCtx, p, r.record(sh, uint32(i))); err != nil && devCtx.Err() == nil {
						t.Errorf("device %d: %v", i, err)
						return
					}
				case <-dv.Done():
					return
				case <-devCtx.Done():
					return
				}
			}
		}()
	}
	return r
}

func (r *labRun) now() time.Duration { return time.Since(r.start) }

func (r *labRun) record(sh *ledger.Shard, dev uint32) func(Msg, bool) {
	return func(m Msg, pulled bool) {
		via := ledger.Push
		if pulled {
			via = ledger.Pull
		}
		sh.Delivery(ledger.Delivery{Dev: dev, Via: via, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: m.Tick, At: r.now()})
	}
}

// send sends one message from uid from (device from-1) and records it.
func (r *labRun) send(ctx context.Context, from uint64, convType uint8, target uint64) ledger.Attempt {
	r.tick++
	a := ledger.Attempt{Tick: r.tick, Dev: uint32(from - 1), ConvType: convType, Target: target, Started: r.now(), Tries: 1}
	a.Intended = a.Started
	ack, err := r.d.Send(ctx, SendReq{From: from, ConvType: convType, Target: target, Tag: fmt.Sprint(r.d.cfg.TagPrefix, "-", r.tick), Content: fmt.Sprint("m", r.tick)})
	a.Ended = r.now()
	switch se, _ := err.(*SendError); {
	case err == nil:
		a.Outcome, a.Status, a.MsgID, a.ConvID, a.ConvSeq = ledger.OK, 200, ack.MsgID, ack.ConvID, ack.ConvSeq
	case se != nil && se.Unknown:
		a.Outcome, a.ConvID = ledger.Unknown, se.Conv
	case se != nil:
		a.Outcome, a.Status, a.ConvID = ledger.Fail, uint16(se.Status), se.Conv
	default:
		r.t.Fatalf("send: %v", err)
	}
	r.sendS.Attempt(a)
	return a
}

// finish stops the readers, catches every device up, reads the witness
// and judges the ledger.
func (r *labRun) finish(ctx context.Context, opts checker.Options) *checker.Verdict {
	r.t.Helper()
	time.Sleep(50 * time.Millisecond) // let the last pushes arrive
	r.stop()
	r.wg.Wait()
	for i, dv := range r.devs {
		if dv.s == nil || isDone(dv.Done()) {
			if err := dv.Connect(ctx); err != nil {
				r.t.Fatal(err)
			}
		}
		if err := dv.CatchUp(ctx, r.record(r.led.Shard(i), uint32(i))); err != nil {
			r.t.Fatal(err)
		}
		dv.Close()
	}
	w := r.d.ReadWitness(ctx, r.now)
	if len(w.Failed) > 0 {
		r.t.Fatalf("witness failed: %v", w.Failed)
	}
	if err := w.Write(r.sendS); err != nil {
		r.t.Fatal(err)
	}
	if err := r.led.Close(); err != nil {
		r.t.Fatal(err)
	}
	v, err := checker.CheckSourcesWith([]checker.Source{{Dir: r.dir}}, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
