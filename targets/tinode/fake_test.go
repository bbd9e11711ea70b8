package tinode_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"imlab/targets/tinode"
	"imlab/targets/tinode/tinodefake"
)

const fakeKey = "fake-api-key"

type env struct {
	t   *testing.T
	srv *tinodefake.Server
	cfg tinode.Config
	n   int
}

func newEnv(t *testing.T, fc tinodefake.Config, cc tinode.Config) *env {
	t.Helper()
	fc.APIKey = fakeKey
	srv, err := tinodefake.Start(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	cc.URL, cc.APIKey = srv.URL(), fakeKey
	return &env{t: t, srv: srv, cfg: cc}
}

// user creates an account on a new session, logged in.
func (e *env) user(ctx context.Context) (*tinode.Session, tinode.Auth) {
	e.t.Helper()
	e.n++
	s, err := tinode.Dial(ctx, e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	a, err := s.CreateAccount(ctx, tinode.NewAccount{Login: fmt.Sprintf("user%d", e.n), Password: "secret123",
		Name: fmt.Sprintf("User %d", e.n), Tags: []string{"lab"}, Authenticate: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return s, a
}

// p2p attaches a and b to their p2p topic; it returns each one's name of it.
func p2p(t *testing.T, ctx context.Context, a *tinode.Session, b *tinode.Session) (aName, bName string) {
	t.Helper()
	if _, err := a.Subscribe(ctx, b.UserID()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe(ctx, a.UserID()); err != nil {
		t.Fatal(err)
	}
	return b.UserID(), a.UserID()
}

func nextData(t *testing.T, s *tinode.Session) tinode.Data {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p, ok := <-s.Pushes():
			if !ok {
				t.Fatal("session ended while waiting for data")
			}
			if p.Kind == tinode.PushData {
				return *p.Data
			}
		case <-timeout:
			t.Fatal("no data within 5s")
		}
	}
}

// drain empties s's queued pushes.
func drain(s *tinode.Session) {
	for len(s.Pushes()) > 0 {
		<-s.Pushes()
	}
}

func publishN(t *testing.T, ctx context.Context, s *tinode.Session, topic string, n int) []int64 {
	t.Helper()
	var seqs []int64
	for i := range n {
		ack, err := s.Publish(ctx, topic, tinode.Message{Tag: fmt.Sprintf("t-%s-%d", topic, i), Content: fmt.Sprintf("m%d", i), NoEcho: true})
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		seqs = append(seqs, ack.Seq)
	}
	return seqs
}

func seqsOf(ms []tinode.Data) []int64 {
	out := make([]int64, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Seq)
	}
	return out
}

func span(lo, hi int64) []int64 { // [lo, hi)
	var out []int64
	for s := lo; s < hi; s++ {
		out = append(out, s)
	}
	return out
}

func TestAccountsAndLogin(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{})
	a, auth := e.user(ctx)
	if !tinode.IsUserID(auth.UserID) || auth.Token == "" || a.UserID() != auth.UserID || a.Token() != auth.Token {
		t.Fatalf("auth = %+v, session user %q", auth, a.UserID())
	}
	// A second session: basic login, token login, wrong password, duplicate login.
	s2, err := tinode.Dial(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.LoginBasic(ctx, "user1", "wrong-password"); !tinode.IsCode(err, 401) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("wrong password: %v", err)
	}
	if got, err := s2.LoginBasic(ctx, "user1", "secret123"); err != nil || got.UserID != auth.UserID {
		t.Errorf("basic login: %+v, %v", got, err)
	}
	if _, err := s2.LoginBasic(ctx, "user1", "secret123"); !tinode.IsCode(err, 409) {
		t.Errorf("second login on a session: %v", err)
	}
	s3, err := tinode.Dial(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if got, err := s3.LoginToken(ctx, auth.Token); err != nil || got.UserID != auth.UserID {
		t.Errorf("token login: %+v, %v", got, err)
	}
	if _, err := s3.CreateAccount(ctx, tinode.NewAccount{Login: "user1", Password: "secret123"}); !tinode.IsCode(err, 409) ||
		!errors.Is(err, tinode.ErrRejected) {
		t.Errorf("duplicate login: %v", err)
	}
	if _, err := s3.CreateAccount(ctx, tinode.NewAccount{Login: "a:b", Password: "x"}); !errors.Is(err, tinode.ErrInvalid) {
		t.Errorf("login with a colon: %v", err)
	}
	// Without the API key the upgrade is refused: nothing was sent.
	bad := e.cfg
	bad.APIKey = "wrong"
	if _, err := tinode.Dial(ctx, bad); !errors.Is(err, tinode.ErrDial) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("wrong api key: %v", err)
	}
}

func TestP2PPublishAndPush(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, tb := p2p(t, ctx, a, b)
	if tinode.ConvKey(a.UserID(), ta) != tinode.ConvKey(b.UserID(), tb) {
		t.Errorf("conv keys differ: %q %q", tinode.ConvKey(a.UserID(), ta), tinode.ConvKey(b.UserID(), tb))
	}
	for i := range 3 {
		ack, err := a.Publish(ctx, ta, tinode.Message{Tag: fmt.Sprint("tag-", i), Content: map[string]any{"n": i}})
		if err != nil || ack.Seq != int64(i+1) {
			t.Fatalf("publish %d: %+v, %v", i, ack, err)
		}
		got := nextData(t, b)
		if got.Topic != tb || got.From != a.UserID() || got.Seq != ack.Seq || got.Tag != fmt.Sprint("tag-", i) {
			t.Errorf("b got %+v", got)
		}
		if echo := nextData(t, a); echo.Seq != ack.Seq || echo.Topic != ta {
			t.Errorf("echo %+v", echo)
		}
	}
	// noecho: the publisher's session gets no copy; the peer does.
	ack, err := b.Publish(ctx, tb, tinode.Message{Content: "quiet", NoEcho: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := nextData(t, a); got.Seq != ack.Seq {
		t.Errorf("a got %+v", got)
	}
	select {
	case p := <-b.Pushes():
		t.Errorf("noecho publisher got %+v", p)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestGroupCreateInviteJoin(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{})
	owner, _ := e.user(ctx)
	b, _ := e.user(ctx)
	c, _ := e.user(ctx)
	g, err := owner.CreateGroup(ctx, tinode.NewGroup{Name: "room", Tags: []string{"lab"}})
	if err != nil || !tinode.IsGroup(g.Topic) || g.Mode == "" {
		t.Fatalf("create group: %+v, %v", g, err)
	}
	if err := owner.Invite(ctx, g.Topic, b.UserID(), "JRWPS"); err != nil {
		t.Fatal(err)
	}
	if err := b.Invite(ctx, g.Topic, c.UserID(), ""); !tinode.IsCode(err, 403) {
		t.Errorf("invite by a non-admin: %v", err)
	}
	if _, err := b.Subscribe(ctx, g.Topic); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, g.Topic); err != nil { // joins on the topic's default access
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, g.Topic); err != nil { // already attached: still fine
		t.Fatal(err)
	}
	ack, err := c.Publish(ctx, g.Topic, tinode.Message{Tag: "g1", Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*tinode.Session{owner, b, c} {
		if d := nextData(t, s); d.Seq != ack.Seq || d.Tag != "g1" || d.Topic != g.Topic {
			t.Errorf("got %+v", d)
		}
	}
	ms, err := owner.Members(ctx, g.Topic)
	if err != nil || len(ms) != 3 {
		t.Fatalf("members = %+v, %v", ms, err)
	}
	for _, m := range ms {
		if m.User == c.UserID() && (m.Read != ack.Seq || m.Recv != ack.Seq) {
			t.Errorf("publisher's marks = %+v, want %d", m, ack.Seq)
		}
	}
	// c has no D permission: its hard delete is a soft one, for c only.
	if _, err := c.DeleteMessages(ctx, g.Topic, []tinode.SeqRange{{Low: ack.Seq}}, true); err != nil {
		t.Fatal(err)
	}
	if l, err := c.DelLog(ctx, g.Topic); err != nil || !l.Deleted(ack.Seq) {
		t.Errorf("c's log = %+v, %v", l, err)
	}
	if l, err := owner.DelLog(ctx, g.Topic); err != nil || len(l.Ranges) != 0 {
		t.Errorf("owner's log = %+v, %v", l, err)
	}
	if _, err := owner.Publish(ctx, g.Topic, tinode.Message{Content: strings.Repeat("x", tinodefake.MaxMessageSize)}); !tinode.IsCode(err, 413) ||
		tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("message over the server's size limit: %v", err)
	}
	if _, err := c.Subscribe(ctx, "grpNoSuchTopic"); !tinode.IsCode(err, 404) {
		t.Errorf("unknown group: %v", err)
	}
	if err := c.Leave(ctx, g.Topic, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, g.Topic, tinode.Message{Content: "x"}); !tinode.IsCode(err, 409) ||
		tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("publish after leave: %v", err)
	}
	if got := c.Attached(); len(got) != 0 {
		t.Errorf("attached after leave = %v", got)
	}
}

// TestHistoryPaging: the fake answers newest first with pages capped below
// the history's length; History reassembles all of it in ascending order.
func TestHistoryPaging(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{MaxMessageResults: 7}, tinode.Config{})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, tb := p2p(t, ctx, a, b)
	publishN(t, ctx, a, ta, 50)

	h, err := b.History(ctx, tb, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqsOf(h.Messages), span(1, 51)) {
		t.Fatalf("history = %v", seqsOf(h.Messages))
	}
	if h.Pages != 8 || h.Since != 1 || h.Before != 51 { // 7 pages of 7, one of 1 reaching since
		t.Errorf("pages = %d, range [%d,%d)", h.Pages, h.Since, h.Before)
	}
	for i, m := range h.Messages {
		if m.Tag != fmt.Sprintf("t-%s-%d", ta, i) || string(m.Content) != fmt.Sprintf(`"m%d"`, i) {
			t.Fatalf("message %d = %+v", i, m)
		}
	}
	// A window inside the history; a page limit below the server's cap.
	small := e.cfg
	small.PageLimit = 3
	s3, err := tinode.Dial(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if _, err := s3.LoginBasic(ctx, "user2", "secret123"); err != nil {
		t.Fatal(err)
	}
	if _, err := s3.Subscribe(ctx, a.UserID()); err != nil {
		t.Fatal(err)
	}
	h, err = s3.History(ctx, tb, 10, 30)
	if err != nil || !slices.Equal(seqsOf(h.Messages), span(10, 30)) || h.Pages != 7 {
		t.Fatalf("window: %v pages %d, %v", seqsOf(h.Messages), h.Pages, err)
	}
	// An empty range, a range past the end.
	if h, err := b.History(ctx, tb, 60, 70); err != nil || len(h.Messages) != 0 || h.Pages != 1 {
		t.Errorf("past the end: %+v, %v", h, err)
	}
	limited := e.cfg
	limited.MaxHistory = 20
	s4, err := tinode.Dial(ctx, limited)
	if err != nil {
		t.Fatal(err)
	}
	defer s4.Close()
	if _, err := s4.LoginBasic(ctx, "user2", "secret123"); err != nil {
		t.Fatal(err)
	}
	if _, err := s4.Subscribe(ctx, a.UserID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s4.History(ctx, tb, 0, 0); !errors.Is(err, tinode.ErrTruncated) {
		t.Errorf("past MaxHistory: %v", err)
	}
}

// TestHistoryWithLivePushes: messages published while History pages are
// read land on Pushes, not in the history, and the history stays exact.
func TestHistoryWithLivePushes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{MaxMessageResults: 5}, tinode.Config{})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, tb := p2p(t, ctx, a, b)
	publishN(t, ctx, a, ta, 40)
	waitFor(t, func() bool { return b.Stats().Pushes == 40 })
	drain(b)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 30 {
			if _, err := a.Publish(ctx, ta, tinode.Message{Content: i, NoEcho: true}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 5 {
		h, err := b.History(ctx, tb, 1, 41)
		if err != nil || !slices.Equal(seqsOf(h.Messages), span(1, 41)) {
			t.Fatalf("history during live traffic: %v, %v", seqsOf(h.Messages), err)
		}
	}
	wg.Wait()
	var live []int64
	for len(live) < 30 {
		live = append(live, nextData(t, b).Seq)
	}
	if !slices.Equal(live, span(41, 71)) {
		t.Errorf("live pushes = %v", live)
	}
}

// TestDeleteRanges: soft deletes hide messages from their user only, hard
// deletes from everyone; DelLog reads every range through pages that cut
// transactions, and explains exactly the seqs History lacks.
func TestDeleteRanges(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{MaxResults: 3}, tinode.Config{MaxResults: 3})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, tb := p2p(t, ctx, a, b)
	publishN(t, ctx, a, ta, 30)
	// a: soft {2}; soft {3}; hard {5,6,7} + {10}; soft {12} + {14}. Pages of
	// 3 rows cut the hard delete after {5,6,7} and the last after {12}.
	mustDel := func(s *tinode.Session, topic string, hard bool, rs ...tinode.SeqRange) int64 {
		t.Helper()
		id, err := s.DeleteMessages(ctx, topic, rs, hard)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	mustDel(a, ta, false, tinode.SeqRange{Low: 2})
	mustDel(a, ta, false, tinode.SeqRange{Low: 3})
	mustDel(a, ta, true, tinode.SeqRange{Low: 5, Hi: 8}, tinode.SeqRange{Low: 10})
	last := mustDel(a, ta, false, tinode.SeqRange{Low: 12}, tinode.SeqRange{Low: 14})
	mustDel(b, tb, false, tinode.SeqRange{Low: 20, Hi: 23})

	la, err := a.DelLog(ctx, ta)
	if err != nil {
		t.Fatal(err)
	}
	want := []tinode.SeqRange{{Low: 2, Hi: 4}, {Low: 5, Hi: 8}, {Low: 10, Hi: 11}, {Low: 12, Hi: 13}, {Low: 14, Hi: 15}}
	if !slices.Equal(la.Ranges, want) || la.Clear != last {
		t.Errorf("a's log = %+v, want %+v clear %d", la, want, last)
	}
	ha, err := a.History(ctx, ta, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 30; seq++ {
		if la.Deleted(seq) == slices.Contains(seqsOf(ha.Messages), seq) {
			t.Errorf("seq %d: deleted %v, in history %v", seq, la.Deleted(seq), !la.Deleted(seq))
		}
	}
	lb, err := b.DelLog(ctx, tb)
	if err != nil {
		t.Fatal(err)
	}
	if wantB := []tinode.SeqRange{{Low: 5, Hi: 8}, {Low: 10, Hi: 11}, {Low: 20, Hi: 23}}; !slices.Equal(lb.Ranges, wantB) {
		t.Errorf("b's log = %+v, want %+v", lb.Ranges, wantB)
	}
	d, err := b.Desc(ctx, tb)
	if err != nil || d.Seq != 30 || d.Clear != lb.Clear {
		t.Errorf("desc = %+v, %v (log clear %d)", d, err, lb.Clear)
	}
	// A topic with no deletes; a transaction too large for one page.
	c, _ := e.user(ctx)
	tc, _ := p2p(t, ctx, c, b)
	if l, err := c.DelLog(ctx, tc); err != nil || l.Clear != 0 || len(l.Ranges) != 0 {
		t.Errorf("empty log: %+v, %v", l, err)
	}
	publishN(t, ctx, c, tc, 10)
	mustDel(c, tc, false, tinode.SeqRange{Low: 1}, tinode.SeqRange{Low: 3}, tinode.SeqRange{Low: 5})
	if _, err := c.DelLog(ctx, tc); !errors.Is(err, tinode.ErrTruncated) {
		t.Errorf("transaction of MaxResults ranges: %v", err)
	}
	if _, err := c.DeleteMessages(ctx, tc, []tinode.SeqRange{{Low: 9, Hi: 20}}, false); !tinode.IsCode(err, 400) {
		t.Errorf("range past the topic's seq: %v", err)
	}
	if _, err := c.DeleteMessages(ctx, tc, []tinode.SeqRange{{Low: 3, Hi: 2}}, false); !errors.Is(err, tinode.ErrInvalid) {
		t.Errorf("inverted range: %v", err)
	}
}

func TestNotesMoveMarks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, tb := p2p(t, ctx, a, b)
	publishN(t, ctx, a, ta, 5)
	if err := b.Note(ctx, tb, tinode.NoteRecv, 4); err != nil {
		t.Fatal(err)
	}
	if err := b.Note(ctx, tb, tinode.NoteRead, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Note(ctx, tb, tinode.NoteRead, 99); err != nil { // past the seq: dropped by the server
		t.Fatal(err)
	}
	d, err := b.Desc(ctx, tb) // same connection: the notes were handled before
	if err != nil || d.Recv != 4 || d.Read != 2 || d.Seq != 5 {
		t.Errorf("desc = %+v, %v", d, err)
	}
	if err := b.Note(ctx, tb, "kp", 1); !errors.Is(err, tinode.ErrInvalid) {
		t.Errorf("note kind kp: %v", err)
	}
}

// TestReconnect: the server drops every connection; a request in flight
// ends unknown; Reconnect logs in with the token and re-attaches, and the
// conversation goes on where it was.
func TestReconnect(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, _ := p2p(t, ctx, a, b)
	g, err := a.CreateGroup(ctx, tinode.NewGroup{})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, ctx, a, ta, 3)
	e.srv.DelayAnswer("", 1, time.Hour)
	errc := make(chan error, 1)
	go func() {
		_, err := a.Publish(ctx, ta, tinode.Message{Content: "in flight"})
		errc <- err
	}()
	waitFor(t, func() bool { return e.srv.TopicSeq(tinodefake.P2PID(a.UserID(), b.UserID())) == 4 })
	e.srv.DropSessions()
	if err := <-errc; tinode.OutcomeOf(err) != tinode.OutcomeUnknown {
		t.Errorf("publish in flight when the connection dropped: %v", err)
	}
	<-a.Done()
	if a.Err() == nil {
		t.Error("ended session has no error")
	}
	e.srv.Heal("")
	n, err := a.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.UserID() != a.UserID() || !slices.Equal(n.Attached(), a.Attached()) || len(n.Attached()) != 2 {
		t.Fatalf("reconnected as %q attached %v (was %q %v)", n.UserID(), n.Attached(), a.UserID(), a.Attached())
	}
	ack, err := n.Publish(ctx, ta, tinode.Message{Content: "after"})
	if err != nil || ack.Seq != 5 {
		t.Fatalf("publish after reconnect: %+v, %v", ack, err)
	}
	if _, err := n.Publish(ctx, g.Topic, tinode.Message{Content: "group after"}); err != nil {
		t.Fatal(err)
	}
	// The reconnected session can reconnect again (its own token).
	n2, err := n.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n2.Close()
}

// TestFaultsAsSeenByTheClient: each injected behaviour reaches the caller
// with the outcome the lab must record.
func TestFaultsAsSeenByTheClient(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{RequestTimeout: 300 * time.Millisecond})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, tb := p2p(t, ctx, a, b)
	id := tinodefake.P2PID(a.UserID(), b.UserID())
	msg := tinode.Message{Content: "x", NoEcho: true}
	publishN(t, ctx, a, ta, 2)

	t.Run("hole", func(t *testing.T) {
		e.srv.HoleNext(id, 1, tinodefake.ReplyError)
		if _, err := a.Publish(ctx, ta, msg); !errors.Is(err, tinode.ErrServerFailure) {
			t.Fatalf("hole: %v", err)
		}
		ack, err := a.Publish(ctx, ta, msg)
		if err != nil || ack.Seq != 4 {
			t.Fatalf("after the hole: %+v, %v", ack, err)
		}
		h, err := b.History(ctx, tb, 0, 0)
		l, lerr := b.DelLog(ctx, tb)
		if err != nil || lerr != nil || !slices.Equal(seqsOf(h.Messages), []int64{1, 2, 4}) || l.Deleted(3) {
			t.Errorf("history %v, del log %+v: %v %v", seqsOf(h.Messages), l, err, lerr)
		}
	})
	t.Run("error but stored", func(t *testing.T) {
		drain(b)
		e.srv.ErrorButStore(id, 1)
		_, err := a.Publish(ctx, ta, tinode.Message{Tag: "failed-but-stored", Content: "y"})
		if tinode.OutcomeOf(err) != tinode.OutcomeFailed || !tinode.IsCode(err, 500) {
			t.Fatalf("error but stored: %v", err)
		}
		if d := nextData(t, b); d.Tag != "failed-but-stored" || d.Seq != 5 {
			t.Errorf("delivered anyway: %+v", d)
		}
	})
	t.Run("commit timeout then refusals", func(t *testing.T) {
		e.srv.CommitTimeout(id)
		for i := range 3 {
			_, err := a.Publish(ctx, ta, msg)
			if !tinode.IsCode(err, 500) {
				t.Fatalf("publish %d after the commit timeout: %v", i, err)
			}
		}
		if got := e.srv.StoredSeqs(id); !slices.Equal(got, []int64{1, 2, 4, 5, 6}) {
			t.Errorf("stored = %v", got)
		}
		drain(a)
		e.srv.Unload(id)
		p := <-a.Pushes()
		if p.Kind != tinode.PushNotice || p.Ctrl.Code != tinode.CodeResetContent || p.Ctrl.Topic != ta {
			t.Fatalf("unload notice = %+v", p)
		}
		if _, err := a.Publish(ctx, ta, msg); !tinode.IsCode(err, 409) {
			t.Errorf("publish while detached: %v", err)
		}
		if _, err := a.Subscribe(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if ack, err := a.Publish(ctx, ta, msg); err != nil || ack.Seq != 7 {
			t.Errorf("after unload: %+v, %v", ack, err)
		}
	})
	t.Run("late answer", func(t *testing.T) {
		e.srv.DelayAnswer(id, 1, 600*time.Millisecond)
		_, err := a.Publish(ctx, ta, msg)
		var ue *tinode.UnknownError
		if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) || tinode.OutcomeOf(err) != tinode.OutcomeUnknown {
			t.Fatalf("delayed answer: %v", err)
		}
		for {
			p := <-a.Pushes()
			if p.Kind == tinode.PushLate {
				if p.Ctrl.ID != ue.ID || p.Ctrl.Code != 202 {
					t.Errorf("late answer %+v for request %s", p.Ctrl, ue.ID)
				}
				break
			}
		}
		if a.Stats().Late != 1 {
			t.Errorf("stats = %+v", a.Stats())
		}
	})
	t.Run("cancelled before sending", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := a.Publish(cctx, ta, msg); !errors.Is(err, tinode.ErrNotSent) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
			t.Errorf("cancelled context: %v", err)
		}
	})
}

// TestDropMidPublish: the connection is lost after the server received a
// publish and before it answered: the outcome is unknown whether or not
// the message was stored, never a failure.
func TestDropMidPublish(t *testing.T) {
	ctx := context.Background()
	for _, stored := range []bool{true, false} {
		t.Run(fmt.Sprint("stored=", stored), func(t *testing.T) {
			e := newEnv(t, tinodefake.Config{}, tinode.Config{})
			a, _ := e.user(ctx)
			b, _ := e.user(ctx)
			ta, _ := p2p(t, ctx, a, b)
			id := tinodefake.P2PID(a.UserID(), b.UserID())
			e.srv.DropOnPublish(id, 1, stored)
			_, err := a.Publish(ctx, ta, tinode.Message{Content: "lost answer"})
			var ue *tinode.UnknownError
			if !errors.As(err, &ue) || tinode.OutcomeOf(err) != tinode.OutcomeUnknown {
				t.Fatalf("publish: %v", err)
			}
			if got := len(e.srv.StoredSeqs(id)); got != map[bool]int{true: 1, false: 0}[stored] {
				t.Errorf("stored %d messages", got)
			}
			<-a.Done()
			if _, err := a.Publish(ctx, ta, tinode.Message{Content: "x"}); !errors.Is(err, tinode.ErrClosed) {
				t.Errorf("publish on the ended session: %v", err)
			}
		})
	}
}

func TestBoundedQueues(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tinodefake.Config{}, tinode.Config{PushQueue: 2, MaxPending: 1})
	a, _ := e.user(ctx)
	b, _ := e.user(ctx)
	ta, _ := p2p(t, ctx, a, b)
	publishN(t, ctx, a, ta, 5)
	waitFor(t, func() bool { return b.Stats().Pushes+b.Stats().PushesDropped == 5 })
	if st := b.Stats(); st.Pushes != 2 || st.PushesDropped != 3 {
		t.Errorf("b's stats = %+v, want 2 queued, 3 dropped", st)
	}
	e.srv.DelayAnswer("", 1, 300*time.Millisecond)
	errc := make(chan error, 1)
	go func() {
		_, err := a.Publish(ctx, ta, tinode.Message{Content: "slow", NoEcho: true})
		errc <- err
	}()
	waitFor(t, func() bool { return a.Stats().Requests == 9 }) // hi, acc, sub, 5 publishes, this one
	if _, err := a.Publish(ctx, ta, tinode.Message{Content: "second"}); !errors.Is(err, tinode.ErrTooManyPending) ||
		tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("second request past MaxPending 1: %v", err)
	}
	if err := <-errc; err != nil {
		t.Error(err)
	}
}
