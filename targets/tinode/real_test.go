package tinode_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"imlab/targets/tinode"
)

// Environment naming a real Tinode for TestRealTinode and
// BenchmarkRealPublish; both are skipped without IMLAB_TINODE_URL.
const (
	envURL    = "IMLAB_TINODE_URL"    // ws://HOST:PORT/v0/channels
	envAPIKey = "IMLAB_TINODE_APIKEY" // an API key signed with the server's api_key_salt
)

func realConfig(tb testing.TB) tinode.Config {
	tb.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		tb.Skipf("%s is not set: no real Tinode to run against (set it to the server's WebSocket endpoint, "+
			"e.g. ws://127.0.0.1:6060/v0/channels, and %s to its API key)", envURL, envAPIKey)
	}
	return tinode.Config{URL: url, APIKey: os.Getenv(envAPIKey)}
}

// runPrefix makes this run's logins unique on a server that keeps them.
func runPrefix(tb testing.TB) string {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return "lab" + hex.EncodeToString(b)
}

type realUser struct {
	s     *tinode.Session
	login string
}

func newRealUser(tb testing.TB, ctx context.Context, cfg tinode.Config, login string) realUser {
	tb.Helper()
	s, err := tinode.Dial(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if _, err := s.CreateAccount(ctx, tinode.NewAccount{Login: login, Password: "secret-" + login, Name: login,
		Tags: []string{login}, Authenticate: true}); err != nil {
		tb.Fatal(err)
	}
	return realUser{s: s, login: login}
}

// session opens another session of u with cfg.
func (u realUser) session(tb testing.TB, ctx context.Context, cfg tinode.Config, topics ...string) *tinode.Session {
	tb.Helper()
	s, err := tinode.Dial(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if _, err := s.LoginBasic(ctx, u.login, "secret-"+u.login); err != nil {
		tb.Fatal(err)
	}
	for _, t := range topics {
		if _, err := s.Subscribe(ctx, t); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// realFixture is the state TestRealTinode's steps share: three users of
// this run and the topics they make.
type realFixture struct {
	cfg     tinode.Config
	ctx     context.Context
	p       string // this run's prefix
	a, b, c realUser
	pa, pb  string // the p2p topic of a and b, as each names it
	grp     string // a's group
}

// realHistory is the number of messages the history step publishes.
const realHistory = 250

// TestRealTinode drives a real Tinode through every call the driver makes
// and checks the answers against what the API document promises. Steps
// run in order and build on each other.
func TestRealTinode(t *testing.T) {
	cfg := realConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := runPrefix(t)
	f := &realFixture{cfg: cfg, ctx: ctx, p: p,
		a: newRealUser(t, ctx, cfg, p+"a"), b: newRealUser(t, ctx, cfg, p+"b"), c: newRealUser(t, ctx, cfg, p+"c")}
	h := f.a.s.Hello()
	t.Logf("server: ver %s build %s, max message %d bytes", h.Ver, h.Build, h.MaxMessageSize)
	if h.Ver == "" {
		t.Fatal("no version in the {hi} answer")
	}
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"auth errors", f.authErrors},
		{"p2p", f.p2p},
		{"group", f.group},
		{"history pages newest first", f.history},
		{"delete ranges", f.deleteRanges},
		{"notes", f.notes},
		{"leave", f.leave},
		{"late answer", f.lateAnswer},
		{"reconnect", f.reconnect},
	} {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %q failed; the later steps build on it", step.name)
		}
	}
}

func (f *realFixture) authErrors(t *testing.T) {
	s, err := tinode.Dial(f.ctx, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.LoginBasic(f.ctx, f.a.login, "not-the-password"); !tinode.IsCode(err, 401) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := s.CreateAccount(f.ctx, tinode.NewAccount{Login: f.a.login, Password: "secret123"}); !tinode.IsCode(err, 409) {
		t.Errorf("duplicate login: %v", err)
	}
	if _, err := s.LoginToken(f.ctx, f.a.s.Token()); err != nil {
		t.Errorf("token login: %v", err)
	}
}

func (f *realFixture) p2p(t *testing.T) {
	if _, err := f.a.s.Subscribe(f.ctx, f.b.s.UserID()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.s.Subscribe(f.ctx, f.a.s.UserID()); err != nil {
		t.Fatal(err)
	}
	f.pa, f.pb = f.b.s.UserID(), f.a.s.UserID()
	for i := range 3 {
		tag := fmt.Sprint(f.p, "-p2p-", i)
		ack, err := f.a.s.Publish(f.ctx, f.pa, tinode.Message{Tag: tag, Content: fmt.Sprint("hello ", i), NoEcho: true})
		if err != nil || ack.Seq != int64(i+1) {
			t.Fatalf("publish %d: %+v, %v", i, ack, err)
		}
		if d := nextData(t, f.b.s); d.Seq != ack.Seq || d.Tag != tag || d.Topic != f.pb || d.From != f.a.s.UserID() {
			t.Errorf("b got %+v", d)
		}
	}
}

func (f *realFixture) group(t *testing.T) {
	g, err := f.a.s.CreateGroup(f.ctx, tinode.NewGroup{Name: f.p + " room", Tags: []string{f.p + "grp"}})
	if err != nil {
		t.Fatal(err)
	}
	f.grp = g.Topic
	if err := f.a.s.Invite(f.ctx, f.grp, f.b.s.UserID(), "JRWPS"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []realUser{f.b, f.c} { // b was invited, c joins on the default access
		if _, err := u.s.Subscribe(f.ctx, f.grp); err != nil {
			t.Fatal(err)
		}
	}
	drain(f.a.s)
	drain(f.b.s)
	ack, err := f.c.s.Publish(f.ctx, f.grp, tinode.Message{Tag: f.p + "-grp", Content: "to all"})
	if err != nil || ack.Seq != 1 {
		t.Fatalf("publish: %+v, %v", ack, err)
	}
	for _, u := range []realUser{f.a, f.b, f.c} {
		if d := nextData(t, u.s); d.Seq != 1 || d.Tag != f.p+"-grp" || d.Topic != f.grp {
			t.Errorf("%s got %+v", u.login, d)
		}
	}
	ms, err := f.a.s.Members(f.ctx, f.grp)
	if err != nil || len(ms) != 3 {
		t.Errorf("members = %+v, %v", ms, err)
	}
}

func (f *realFixture) history(t *testing.T) {
	for i := range realHistory {
		if _, err := f.a.s.Publish(f.ctx, f.grp, tinode.Message{Tag: fmt.Sprint(f.p, "-h-", i), Content: i, NoEcho: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{0, 40} {
		cc := f.cfg
		cc.PageLimit = limit
		s := f.c.session(t, f.ctx, cc, f.grp)
		h, err := s.History(f.ctx, f.grp, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seqsOf(h.Messages), span(1, realHistory+2)) || h.Pages < 2 {
			t.Fatalf("limit %d: %d messages in %d pages: %v", limit, len(h.Messages), h.Pages, seqsOf(h.Messages))
		}
		for i, m := range h.Messages[1:] {
			if m.Tag != fmt.Sprint(f.p, "-h-", i) {
				t.Fatalf("message %d: tag %q", m.Seq, m.Tag)
			}
		}
		t.Logf("limit %d: %d messages in %d pages", limit, len(h.Messages), h.Pages)
	}
}

func (f *realFixture) deleteRanges(t *testing.T) {
	if _, err := f.a.s.DeleteMessages(f.ctx, f.grp, []tinode.SeqRange{{Low: 5, Hi: 8}, {Low: 10}}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.s.DeleteMessages(f.ctx, f.grp, []tinode.SeqRange{{Low: 20}, {Low: 22, Hi: 24}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.s.DeleteMessages(f.ctx, f.grp, []tinode.SeqRange{{Low: 30}}, false); err != nil {
		t.Fatal(err)
	}
	// Without the D permission a hard delete is answered as a success
	// and applied as a soft delete for the requester.
	if _, err := f.c.s.DeleteMessages(f.ctx, f.grp, []tinode.SeqRange{{Low: 1}}, true); err != nil {
		t.Errorf("hard delete without D: %v", err)
	}
	// Pages of 3 rows (well below the server's max_results) cut b's
	// first soft delete: [5-8, 10, 20] [20, 22-24, 30] [30].
	cc := f.cfg
	cc.MaxResults = 3
	s := f.b.session(t, f.ctx, cc, f.grp)
	lb, err := s.DelLog(f.ctx, f.grp)
	if err != nil {
		t.Fatal(err)
	}
	wantB := []tinode.SeqRange{{Low: 5, Hi: 8}, {Low: 10, Hi: 11}, {Low: 20, Hi: 21}, {Low: 22, Hi: 24}, {Low: 30, Hi: 31}}
	if !slices.Equal(lb.Ranges, wantB) {
		t.Errorf("b's delete log = %+v, want %+v", lb, wantB)
	}
	hb, err := s.History(f.ctx, f.grp, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= realHistory+1; seq++ {
		if lb.Deleted(seq) == slices.Contains(seqsOf(hb.Messages), seq) {
			t.Errorf("seq %d: deleted %v, in b's history %v", seq, lb.Deleted(seq), !lb.Deleted(seq))
		}
	}
	lc, err := f.c.s.DelLog(f.ctx, f.grp)
	if wantC := []tinode.SeqRange{{Low: 1, Hi: 2}, {Low: 5, Hi: 8}, {Low: 10, Hi: 11}}; err != nil || !slices.Equal(lc.Ranges, wantC) {
		t.Errorf("c's delete log = %+v, %v", lc, err)
	}
	if l, err := f.a.s.DelLog(f.ctx, f.pa); err != nil || len(l.Ranges) != 0 {
		t.Errorf("log of a topic without deletes: %+v, %v", l, err)
	}
}

func (f *realFixture) notes(t *testing.T) {
	if err := f.b.s.Note(f.ctx, f.grp, tinode.NoteRecv, 100); err != nil {
		t.Fatal(err)
	}
	if err := f.b.s.Note(f.ctx, f.grp, tinode.NoteRead, 50); err != nil {
		t.Fatal(err)
	}
	var d tinode.TopicDesc
	waitFor(t, func() bool {
		var err error
		d, err = f.b.s.Desc(f.ctx, f.grp)
		return err == nil && d.Recv == 100 && d.Read == 50
	})
	if d.Seq != realHistory+1 {
		t.Errorf("desc = %+v", d)
	}
}

func (f *realFixture) leave(t *testing.T) {
	if err := f.c.s.Leave(f.ctx, f.grp, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.s.Publish(f.ctx, f.grp, tinode.Message{Content: "x"}); !tinode.IsCode(err, 409) ||
		tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("publish after leave: %v", err)
	}
}

func (f *realFixture) lateAnswer(t *testing.T) {
	s := f.a.session(t, f.ctx, f.cfg, f.grp)
	// A wait far shorter than the server's answer: the request is sent,
	// its outcome unknown, and the answer comes later on Pushes.
	var ue *tinode.UnknownError
	for wait := 100 * time.Microsecond; ue == nil && wait < time.Second; wait *= 2 {
		wctx, cancel := context.WithTimeout(f.ctx, wait)
		_, err := s.Publish(wctx, f.grp, tinode.Message{Tag: f.p + "-late", Content: "late", NoEcho: true})
		cancel()
		switch {
		case errors.As(err, &ue):
			if tinode.OutcomeOf(err) != tinode.OutcomeUnknown || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("publish past its deadline: %v", err)
			}
		case err != nil && !errors.Is(err, tinode.ErrNotSent):
			t.Fatal(err)
		}
	}
	if ue == nil {
		t.Fatal("every publish was answered within its wait")
	}
	for pu := range s.Pushes() {
		if pu.Kind == tinode.PushLate {
			if pu.Ctrl.ID != ue.ID || pu.Ctrl.Code != tinode.CodeAccepted {
				t.Errorf("late answer %+v for request %s", pu.Ctrl, ue.ID)
			}
			return
		}
	}
	t.Error("no late answer")
}

func (f *realFixture) reconnect(t *testing.T) {
	before, err := f.a.s.Desc(f.ctx, f.grp)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := f.a.s.Reconnect(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if ns.UserID() != f.a.s.UserID() || !slices.Equal(ns.Attached(), f.a.s.Attached()) || ns.Token() == "" {
		t.Errorf("reconnected as %s attached %v (was %s %v)", ns.UserID(), ns.Attached(), f.a.s.UserID(), f.a.s.Attached())
	}
	ack, err := ns.Publish(f.ctx, f.grp, tinode.Message{Content: "after reconnect"})
	if err != nil || ack.Seq != before.Seq+1 {
		t.Errorf("publish after reconnect: %+v, %v (seq was %d)", ack, err, before.Seq)
	}
}

// BenchmarkRealPublish measures {pub} → {ctrl} 202 against a real Tinode:
// the ACK latency (p50, p99 of every send) and the rate, with 1 and 8
// publishers, each its own session and its own group (one member, so no
// fan-out), sending back to back (closed loop).
func BenchmarkRealPublish(b *testing.B) {
	cfg := realConfig(b)
	for _, pubs := range []int{1, 8} {
		b.Run(fmt.Sprint("publishers=", pubs), func(b *testing.B) {
			ctx := context.Background()
			p := runPrefix(b)
			sessions := make([]*tinode.Session, pubs)
			topics := make([]string, pubs)
			for i := range pubs {
				u := newRealUser(b, ctx, cfg, fmt.Sprint(p, i))
				g, err := u.s.CreateGroup(ctx, tinode.NewGroup{})
				if err != nil {
					b.Fatal(err)
				}
				sessions[i], topics[i] = u.s, g.Topic
			}
			lat := make([][]time.Duration, pubs)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := range pubs {
				share := b.N / pubs
				if i < b.N%pubs {
					share++
				}
				wg.Go(func() {
					for j := range share {
						t0 := time.Now()
						if _, err := sessions[i].Publish(ctx, topics[i], tinode.Message{Tag: fmt.Sprint(i, "-", j), Content: "bench", NoEcho: true}); err != nil {
							b.Error(err)
							return
						}
						lat[i] = append(lat[i], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			q := func(f float64) float64 { return float64(all[int(f*float64(len(all)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "msgs/s")
		})
	}
}
