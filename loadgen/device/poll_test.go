package device

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"imlab/ledger"
	"imlab/targets"
	"imlab/targets/wspoll"
)

// pollSession is a device's session whose polled connection a goroutine of
// its own feeds (standing in for the poller's): every message 1..n of an
// inbox, some of them never pushed (a gap the device fills by pulling).
type pollSession struct {
	targets.Session // nil: only what the online device uses is here
	n               uint64
	skip            func(seq uint64) bool // a message not pushed
	wg              sync.WaitGroup
	mu              sync.Mutex
	acked           uint64
}

func (s *pollSession) msg(seq uint64) targets.Msg {
	return targets.Msg{Seq: seq, MsgID: seq, Content: strconv.FormatUint(seq, 10)}
}

func (s *pollSession) pull(o targets.PullOpts) targets.PullPage {
	var pg targets.PullPage
	from := o.Cursor
	for seq := from + 1; seq <= s.n && len(pg.Msgs) < o.Limit; seq++ {
		pg.Msgs = append(pg.Msgs, s.msg(seq))
	}
	pg.NextCursor = from + uint64(len(pg.Msgs))
	pg.HasMore = pg.NextCursor < s.n
	return pg
}

func (s *pollSession) Ack(_ context.Context, seq uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = max(s.acked, seq)
	return s.acked, nil
}

type pollConn struct{ s *pollSession }

func (c pollConn) Ack(seq uint64) error { _, err := c.s.Ack(context.Background(), seq); return err }
func (c pollConn) Close() error         { return nil }

func (s *pollSession) ConnectPolled(_ context.Context, _ *wspoll.Poller, h targets.PushHandler) (targets.PolledConn, error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for seq := uint64(1); seq <= s.n; seq++ {
			if s.skip(seq) {
				continue
			}
			p := targets.Push{Type: targets.PushMsg, PrevSeq: seq - 1, Msg: s.msg(seq)}
			h.Push(&p)
			if seq%7 == 0 {
				h.Push(&targets.Push{Type: "acked"})
				time.Sleep(time.Millisecond)
			}
		}
		h.Ended(wspoll.ErrClosed)
	}()
	return pollConn{s}, nil
}

// TestPolledDeviceInOrder: a device fed by a poller stores every message
// once, in chain order, whether the push was handled while it was parked
// or queued behind a gap it filled by pulling (run it under -race).
func TestPolledDeviceInOrder(t *testing.T) {
	if !wspoll.Supported {
		t.Skip("no poller here")
	}
	const n = 2000
	sess := &pollSession{n: n, skip: func(seq uint64) bool { return seq%97 == 0 || seq%250 < 3 }}
	var mu sync.Mutex
	var got []uint64
	env := Env{PullLimit: 50, AckEvery: time.Millisecond, Timeout: time.Second, PollReads: true,
		Caps:  targets.Capabilities{Inbox: true},
		Parse: func(c string) (uint64, time.Duration, bool) { v, _ := strconv.ParseUint(c, 10, 64); return v, 0, true },
		Delivered: func(_ uint32, tick uint64, _ time.Duration, _ bool) {
			mu.Lock()
			got = append(got, tick)
			mu.Unlock()
		},
		Pull: func(_ context.Context, s targets.Session, o targets.PullOpts) (targets.PullPage, error) {
			return s.(*pollSession).pull(o), nil
		},
		Fail: func(format string, args ...any) { t.Errorf(format, args...) },
	}
	led, err := ledger.Create(t.TempDir(), "polltest", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	f := NewFleet(env)
	d := f.New(0, 1, "d0", ledger.Online, sess, 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := make(chan struct{})
	var wg sync.WaitGroup
	f.Start(ctx, drain, led, time.Now(), []*Device{d}, &wg, func() {})
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(drain)
	wg.Wait() // the device and the poller's goroutine
	sess.wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) < n {
		t.Fatalf("%d messages stored, want %d", len(got), n)
	}
	for i := range n {
		if got[i] != uint64(i+1) {
			t.Fatalf("store %d is message %d: %v", i, got[i], fmt.Sprint(got[max(0, i-3):min(len(got), i+3)]))
		}
	}
	if d.Chain() != n {
		t.Fatalf("chain %d, want %d", d.Chain(), n)
	}
}
