package send_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

type env struct {
	db  *sql.DB
	rdb *testenv.Redis
}

func newEnv(t *testing.T) *env {
	return &env{db: testenv.NewMySQL(t).DB, rdb: testenv.NewRedis(t)}
}

// service starts a strict Service; node must differ per "process".
func (e *env) service(t *testing.T, node uint16, mut func(*send.Config), hooks ...send.CommitHook) *send.Service {
	t.Helper()
	return e.serviceReg(t, node, prometheus.NewRegistry(), mut, hooks...)
}

// serviceReg is service with the caller's registry (to read the metrics).
func (e *env) serviceReg(t *testing.T, node uint16, reg *prometheus.Registry, mut func(*send.Config), hooks ...send.CommitHook) *send.Service {
	t.Helper()
	w, err := inbox.NewWriter(seqalloc.NewRedis(e.rdb.Client, e.rdb.Keys), inbox.DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := send.DefaultConfig()
	cfg.Node = node
	if mut != nil {
		mut(&cfg)
	}
	s, err := send.New(context.Background(), cfg, e.db, w, reg, hooks...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func one(from, to uint64, cid string) model.SendRequest {
	return model.SendRequest{SenderUID: from, DeviceID: "d", ClientMsgID: cid, ConvType: model.ConvSingle, ToUID: to, Content: "hi " + cid}
}

func grp(from, gid uint64, cid string) model.SendRequest {
	return model.SendRequest{SenderUID: from, DeviceID: "d", ClientMsgID: cid, ConvType: model.ConvGroup, GroupID: gid, Content: "g " + cid}
}

// sendAll sends n requests at once, request i (made by req) from a
// goroutine of its own, and returns each one's error once all are answered.
func sendAll(ctx context.Context, s *send.Service, n int, req func(i int) model.SendRequest) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Send(ctx, req(i))
		}()
	}
	wg.Wait()
	return errs
}

// inboxOf maps msg_id -> seq for uid.
func inboxOf(t *testing.T, db *sql.DB, uid uint64) map[uint64]uint64 {
	t.Helper()
	rows, err := db.Query(`SELECT msg_id, seq FROM offline_msg WHERE uid = ?`, uid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uint64]uint64{}
	for rows.Next() {
		var id, seq uint64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		out[id] = seq
	}
	return out
}

func TestSendStrict1to1(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var hooked []model.InboxEntry
	s := e.service(t, 1, nil, send.HookFunc(func(_ context.Context, es []model.InboxEntry) {
		mu.Lock()
		hooked = append(hooked, es...)
		mu.Unlock()
	}))
	ctx := context.Background()
	r1, err := s.Send(ctx, one(1, 2, "a"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Send(ctx, one(2, 1, "a")) // other sender, same client id: a different message
	if err != nil {
		t.Fatal(err)
	}
	conv, _ := model.SingleConvID(1, 2)
	if r1.ConvID != conv || r2.ConvID != conv || r1.ConvSeq != 1 || r2.ConvSeq != 2 || r1.Duplicate || r2.Duplicate {
		t.Fatalf("results %+v %+v", r1, r2)
	}
	if n, err := s.MaxConvSeq(ctx, conv); err != nil || n != 2 {
		t.Fatalf("MaxConvSeq = %d, %v; want 2", n, err)
	}
	if n, err := s.MaxConvSeq(ctx, conv+1); err != nil || n != 0 {
		t.Fatalf("MaxConvSeq of an empty conversation = %d, %v", n, err)
	}
	if r1.MsgID == r2.MsgID || r1.ServerTime.IsZero() {
		t.Fatalf("msg ids %d %d, time %v", r1.MsgID, r2.MsgID, r1.ServerTime)
	}
	// Both inboxes (the sender's own too) hold both messages, seq 1 then 2.
	for _, uid := range []uint64{1, 2} {
		in := inboxOf(t, e.db, uid)
		if in[r1.MsgID] != 1 || in[r2.MsgID] != 2 || len(in) != 2 {
			t.Fatalf("inbox of %d = %v", uid, in)
		}
	}
	var content string
	var convSeq uint64
	if err := e.db.QueryRow(`SELECT content, conv_seq FROM msg_content WHERE msg_id = ?`, r2.MsgID).Scan(&content, &convSeq); err != nil || content != "hi a" || convSeq != 2 {
		t.Fatalf("msg_content = %q %d, %v", content, convSeq, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 4 {
		t.Fatalf("hook saw %d entries, want 4", len(hooked))
	}
	for _, h := range hooked {
		if h.Seq != h.PrevSeq+1 || h.Content == "" {
			t.Fatalf("hook entry %+v", h)
		}
	}
	// Bad input changes nothing.
	if _, err := s.Send(ctx, one(1, 1, "self")); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("self send: %v", err)
	}
	big := one(1, 2, "big")
	big.Content = string(make([]byte, model.MaxContentLen+1))
	if _, err := s.Send(ctx, big); !errors.Is(err, model.ErrTooLarge) {
		t.Fatalf("big send: %v", err)
	}
}

// Retries and concurrent duplicates, in one process and across two, get the
// first answer; exactly one message and one inbox row per recipient exist.
func TestIdempotentSend(t *testing.T) {
	e := newEnv(t)
	procs := []*send.Service{e.service(t, 1, nil), e.service(t, 2, nil)}
	ctx := context.Background()
	first, err := procs[0].Send(ctx, one(5, 6, "x"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := procs[1].Send(ctx, one(5, 6, "x"))
	if err != nil || !again.Duplicate || again.MsgID != first.MsgID || again.ConvSeq != first.ConvSeq || !again.ServerTime.Equal(first.ServerTime) {
		t.Fatalf("retry = %+v, %v; first %+v", again, err, first)
	}

	const keys, copies = 20, 6
	res := make([][]model.SendResult, keys)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for k := 0; k < keys; k++ {
		res[k] = make([]model.SendResult, copies)
		for c := 0; c < copies; c++ {
			wg.Add(1)
			go func(k, c int) {
				defer wg.Done()
				r, err := procs[c%2].Send(ctx, one(7, uint64(8+k%3), fmt.Sprint("k", k)))
				if err != nil {
					t.Errorf("send k%d copy %d: %v", k, c, err)
				}
				mu.Lock()
				res[k][c] = r
				mu.Unlock()
			}(k, c)
		}
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		fresh := 0
		for c := 0; c < copies; c++ {
			if res[k][c].MsgID != res[k][0].MsgID || res[k][c].ConvSeq != res[k][0].ConvSeq || !res[k][c].ServerTime.Equal(res[k][0].ServerTime) {
				t.Errorf("k%d: answers differ: %+v vs %+v", k, res[k][c], res[k][0])
			}
			if !res[k][c].Duplicate {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("k%d: %d answers not marked duplicate, want 1", k, fresh)
		}
	}
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM msg_content WHERE sender_uid = 7`).Scan(&n); err != nil || n != keys {
		t.Fatalf("msg_content rows = %d, %v; want %d", n, err, keys)
	}
	if got := len(inboxOf(t, e.db, 7)); got != keys {
		t.Fatalf("sender inbox rows = %d, want %d", got, keys)
	}
}

// conv_seq is dense per conversation under concurrency from two processes,
// and every ACKed message has an inbox row for every recipient.
func TestConvSeqDenseAndAckedRows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	procs := []*send.Service{
		e.service(t, 1, func(c *send.Config) { c.Shards = 3; c.MaxBatch = 16 }),
		e.service(t, 2, func(c *send.Config) { c.Shards = 2; c.MaxWait = 0 }),
	}
	if err := procs[0].CreateGroup(ctx, 900, []uint64{100, 101, 102, 103}); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		req model.SendRequest
		res model.SendResult
	}
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				var req model.SendRequest
				cid := fmt.Sprintf("w%d-%d", w, i)
				switch i % 3 {
				case 0:
					req = grp(uint64(100+w%4), 900, cid)
				default:
					req = one(uint64(100+w%4), uint64(104+i%2), cid)
				}
				r, err := procs[w%2].Send(ctx, req)
				if err != nil {
					t.Errorf("send %s: %v", cid, err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{req, r})
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	perConv := map[uint64][]uint64{}
	inboxes := map[uint64]map[uint64]uint64{}
	for _, a := range acks {
		perConv[a.res.ConvID] = append(perConv[a.res.ConvID], a.res.ConvSeq)
		var rcpt []uint64
		if a.req.ConvType == model.ConvGroup {
			rcpt = []uint64{100, 101, 102, 103}
		} else {
			rcpt = []uint64{a.req.SenderUID, a.req.ToUID}
		}
		for _, u := range rcpt {
			if inboxes[u] == nil {
				inboxes[u] = inboxOf(t, e.db, u)
			}
			if _, ok := inboxes[u][a.res.MsgID]; !ok {
				t.Errorf("ACKed msg %d has no inbox row for uid %d", a.res.MsgID, u)
			}
		}
	}
	for conv, seqs := range perConv {
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("conv %d: conv_seqs %v not dense 1..%d", conv, seqs, len(seqs))
			}
		}
		var max uint64
		if err := e.db.QueryRow(`SELECT max_seq FROM conv_counter WHERE conv_id = ?`, conv).Scan(&max); err != nil || max != uint64(len(seqs)) {
			t.Fatalf("conv %d counter %d, %v; want %d", conv, max, err, len(seqs))
		}
	}
	// Per-uid seqs are unique (the primary key says so) and fenced.
	for u, in := range inboxes {
		var fence, top uint64
		if err := e.db.QueryRow(`SELECT f.max_seq, (SELECT MAX(seq) FROM offline_msg WHERE uid = f.uid) FROM seq_fence f WHERE f.uid = ?`, u).Scan(&fence, &top); err != nil || fence != top {
			t.Fatalf("uid %d fence %d top %d (%d rows), %v", u, fence, top, len(in), err)
		}
	}
}

func TestGroups(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, 1, nil)
	ctx := context.Background()
	many := make([]uint64, model.MaxGroupMembers+1)
	for i := range many {
		many[i] = uint64(i + 1)
	}
	bad := []struct {
		gid     uint64
		members []uint64
	}{{0, []uint64{1}}, {1 << 62, []uint64{1}}, {5, nil}, {5, many}, {5, []uint64{1, 0}}, {5, []uint64{1, 2, 1}}, {5, []uint64{model.MaxUID + 1}}}
	for _, b := range bad {
		if err := s.CreateGroup(ctx, b.gid, b.members); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("CreateGroup(%d, %d members) = %v, want ErrInvalid", b.gid, len(b.members), err)
		}
	}
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM im_group`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("bad input created %d groups (%v)", n, err)
	}
	if err := s.CreateGroup(ctx, 5, many[:model.MaxGroupMembers]); err != nil {
		t.Fatalf("500 members: %v", err)
	}
	if err := s.CreateGroup(ctx, 7, []uint64{3, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateGroup(ctx, 7, []uint64{2, 3, 1}); err != nil {
		t.Fatalf("same set again: %v", err)
	}
	if err := s.CreateGroup(ctx, 7, []uint64{1, 2}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("other set: %v, want ErrConflict", err)
	}
	m, err := s.Members(ctx, 7)
	if err != nil || fmt.Sprint(m) != "[1 2 3]" {
		t.Fatalf("members = %v, %v", m, err)
	}
	if _, err := s.Members(ctx, 8); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("members of missing group: %v", err)
	}
	if _, err := s.Send(ctx, grp(1, 8, "nf")); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("send to missing group: %v", err)
	}
	if _, err := s.Send(ctx, grp(9, 7, "forb")); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("send by non-member: %v", err)
	}
	r, err := s.Send(ctx, grp(2, 7, "ok"))
	if err != nil || r.ConvID != 7 || r.ConvSeq != 1 {
		t.Fatalf("group send = %+v, %v", r, err)
	}
	for _, u := range []uint64{1, 2, 3} {
		if _, ok := inboxOf(t, e.db, u)[r.MsgID]; !ok {
			t.Fatalf("member %d has no row", u)
		}
	}
	// A 500-member group message writes 500 rows.
	r, err = s.Send(ctx, grp(250, 5, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM offline_msg WHERE msg_id = ?`, r.MsgID).Scan(&n); err != nil || n != 500 {
		t.Fatalf("rows for 500-member message = %d, %v", n, err)
	}
	conv12, _ := model.SingleConvID(1, 2)
	for _, c := range []struct {
		conv, uid uint64
		want      bool
	}{{7, 1, true}, {7, 9, false}, {8, 1, false}, {conv12, 1, true}, {conv12, 2, true}, {conv12, 3, false}} {
		got, err := s.IsMember(ctx, c.conv, c.uid)
		if err != nil || got != c.want {
			t.Errorf("IsMember(%d, %d) = %v, %v; want %v", c.conv, c.uid, got, err, c.want)
		}
	}
	if _, err := s.IsMember(ctx, 0, 1); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("IsMember(conv 0): %v", err)
	}
}

// poison is a strict policy that refuses any batch holding a "poison" message.
type poison struct{ *send.Strict }

func (p poison) InTx(ctx context.Context, tx *sql.Tx, batch []*send.Pending) ([]model.InboxEntry, error) {
	for _, b := range batch {
		if b.Msg.Content == "poison" {
			return nil, fmt.Errorf("%w: poisoned message", model.ErrInvalid)
		}
	}
	return p.Strict.InTx(ctx, tx, batch)
}

func (poison) Name() string { return "poison" }

func TestBadItemFailsAlone(t *testing.T) {
	e := newEnv(t)
	w, err := inbox.NewWriter(seqalloc.NewRedis(e.rdb.Client, e.rdb.Keys), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := send.NewStrict(w)
	if err != nil {
		t.Fatal(err)
	}
	cfg := send.DefaultConfig()
	cfg.Policy, cfg.Policies = "poison", []send.Policy{poison{st}}
	cfg.Shards, cfg.MaxWait = 1, 100*time.Millisecond
	reg := prometheus.NewRegistry()
	s, err := send.New(context.Background(), cfg, e.db, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	errs := sendAll(context.Background(), s, 8, func(i int) model.SendRequest {
		req := one(uint64(20+i), 40, fmt.Sprint("p", i))
		if i == 3 {
			req.Content = "poison"
		}
		return req
	})
	for i, err := range errs {
		if (i == 3) != (err != nil) {
			t.Errorf("send %d: %v", i, err)
		}
	}
	if !errors.Is(errs[3], model.ErrInvalid) {
		t.Errorf("poison error %v, want ErrInvalid", errs[3])
	}
	if batches := testenv.Metric(t, reg, "imlab_send_batch_size", nil); batches == 0 || batches > 4 {
		t.Errorf("batch count %g: the sends were not batched together", batches)
	}
	// The conversation of the failed batch has no hole: 7 messages, conv_seq 1..7 across convs.
	var holes int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM conv_counter c WHERE c.max_seq <> (SELECT COUNT(*) FROM msg_content m WHERE m.conv_id = c.conv_id)`).Scan(&holes); err != nil || holes != 0 {
		t.Fatalf("conv_counter ahead of msg_content in %d convs (%v)", holes, err)
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, 1, func(c *send.Config) { c.Shards = 1; c.MaxWait = 20 * time.Millisecond })
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = s.Send(ctx, one(uint64(60+i), 99, "c"))
		}(i)
	}
	time.Sleep(5 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, model.ErrUnavailable) {
			t.Errorf("send during close: %v", err)
		}
	}
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM msg_content`).Scan(&n); err != nil || n != ok {
		t.Fatalf("%d ACKed but %d stored (%v)", ok, n, err)
	}
	if _, err := s.Send(ctx, one(1, 2, "late")); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("send after close: %v", err)
	}
}

func TestQueueFullIsUnavailable(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	hook := send.HookFunc(func(context.Context, []model.InboxEntry) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	})
	s := e.service(t, 1, func(c *send.Config) { c.Shards = 1; c.QueueSize = 1; c.MaxWait = 0 }, hook)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = s.Send(ctx, one(1, 2, "first")) }()
	<-entered // the committer is held in the hook
	go func() { defer wg.Done(); _, _ = s.Send(ctx, one(1, 2, "queued")) }()
	time.Sleep(50 * time.Millisecond) // the queue (size 1) is now full
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := s.Send(short, one(1, 2, "refused")); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("send into a full queue: %v, want ErrUnavailable", err)
	}
	close(release)
	wg.Wait()
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM msg_content WHERE client_msg_id = 'refused'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused send stored %d rows (%v)", n, err)
	}
}

func TestCreateGroupConcurrent(t *testing.T) {
	e := newEnv(t)
	procs := []*send.Service{e.service(t, 1, nil), e.service(t, 2, nil)}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			members := []uint64{4, 5, 6}
			if i == 7 {
				members = []uint64{4, 5}
			}
			errs[i] = procs[i%2].CreateGroup(ctx, 33, members)
		}(i)
	}
	wg.Wait()
	ok, conflict := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, model.ErrConflict):
			conflict++
		default:
			t.Errorf("create: %v", err)
		}
	}
	// Either the 3-member set won (7 ok, 1 conflict) or the 2-member one did (1 ok, 7 conflicts).
	if !(ok == 7 && conflict == 1) && !(ok == 1 && conflict == 7) {
		t.Fatalf("ok %d conflict %d", ok, conflict)
	}
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM group_member WHERE group_id = 33`).Scan(&n); err != nil || (n != 3 && n != 2) {
		t.Fatalf("members stored %d (%v)", n, err)
	}
}

// Two processes, one on the Redis allocator and one on segments, send to the
// same users at once: every ACKed message is in every recipient's inbox, and
// each uid's entries form one PrevSeq chain (strictly increasing in commit
// order, no seq reused).
func TestTwoProcessesTwoAllocators(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var entries []model.InboxEntry
	hook := send.HookFunc(func(_ context.Context, es []model.InboxEntry) {
		mu.Lock()
		entries = append(entries, es...)
		mu.Unlock()
	})
	wr, err := inbox.NewWriter(seqalloc.NewRedis(e.rdb.Client, e.rdb.Keys), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := inbox.NewWriter(seqalloc.NewSegment(e.db, seqalloc.DefaultSegmentConfig()), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var procs []*send.Service
	for i, w := range []*inbox.Writer{wr, ws} {
		cfg := send.DefaultConfig()
		cfg.Node = uint16(i + 1)
		s, err := send.New(ctx, cfg, e.db, w, nil, hook)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		procs = append(procs, s)
	}
	var wg sync.WaitGroup
	acked := map[uint64]int{} // uid -> messages
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				from, to := uint64(1+g%3), uint64(1+(g+1+i)%3)
				if from == to {
					to = from%3 + 1
				}
				if _, err := procs[g%2].Send(ctx, one(from, to, fmt.Sprintf("g%d-%d", g, i))); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				mu.Lock()
				acked[from]++
				acked[to]++
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	byUID := map[uint64][]model.InboxEntry{}
	for _, en := range entries {
		byUID[en.UID] = append(byUID[en.UID], en)
	}
	for uid, n := range acked {
		if got := len(inboxOf(t, e.db, uid)); got != n {
			t.Errorf("uid %d: %d rows, %d ACKed", uid, got, n)
		}
		es := byUID[uid]
		sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
		for i := 1; i < len(es); i++ {
			if es[i].PrevSeq != es[i-1].Seq {
				t.Fatalf("uid %d: seq %d has PrevSeq %d, want %d", uid, es[i].Seq, es[i].PrevSeq, es[i-1].Seq)
			}
		}
		if len(es) != n {
			t.Errorf("uid %d: hooks saw %d entries, want %d", uid, len(es), n)
		}
	}
}

// With the allocator's Redis down, sends fail with ErrUnavailable, leave no
// rows behind, and the batch is not retried message by message.
func TestAllocatorDownIsUnavailable(t *testing.T) {
	e := newEnv(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	w, err := inbox.NewWriter(seqalloc.NewRedis(dead, e.rdb.Keys), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := send.DefaultConfig()
	cfg.Shards, cfg.MaxWait, cfg.MaxAttempts = 1, 50*time.Millisecond, 2
	s, err := send.New(context.Background(), cfg, e.db, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	errs := sendAll(context.Background(), s, 10, func(i int) model.SendRequest { return one(uint64(70+i), 90, "down") })
	for i, err := range errs {
		if !errors.Is(err, model.ErrUnavailable) {
			t.Errorf("send %d: %v, want ErrUnavailable", i, err)
		}
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("failing took %s: the batch was retried message by message", el)
	}
	var n int
	if err := e.db.QueryRow(`SELECT (SELECT COUNT(*) FROM msg_content) + (SELECT COUNT(*) FROM offline_msg) + (SELECT COALESCE(SUM(max_seq),0) FROM conv_counter)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed sends left %d rows/counts (%v)", n, err)
	}
}

// A conv_counter set back behind msg_content (restore) is repaired from
// MAX(conv_seq): the sends succeed and conv_seq goes on densely.
func TestConvCounterSetBack(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, 1, nil)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := s.Send(ctx, one(1, 2, fmt.Sprint("a", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.Exec(`UPDATE conv_counter SET max_seq = 2`); err != nil {
		t.Fatal(err)
	}
	r, err := s.Send(ctx, one(2, 1, "after"))
	if err != nil {
		t.Fatalf("send after counter set back: %v", err)
	}
	if r.ConvSeq != 6 {
		t.Fatalf("conv_seq %d, want 6", r.ConvSeq)
	}
}

// A batch that hits a lock wait timeout (1205) is retried and ACKed.
func TestBatchRetriesLockWaitTimeout(t *testing.T) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	short := m.ShortLockWait(t)
	w, err := inbox.NewWriter(seqalloc.NewRedis(r.Client, r.Keys), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := send.New(ctx, send.DefaultConfig(), short, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Send(ctx, one(1, 2, "before")); err != nil {
		t.Fatal(err)
	}
	m.HoldRowLock(t, `SELECT max_seq FROM seq_fence WHERE uid = 2 FOR UPDATE`, 1500*time.Millisecond)
	start := time.Now()
	res, err := s.Send(ctx, one(1, 2, "blocked"))
	if err != nil {
		t.Fatalf("send behind a held fence row: %v", err)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("send finished in %s: it never waited on the lock", el)
	}
	if res.ConvSeq != 2 {
		t.Fatalf("conv_seq %d, want 2 (the timed-out attempt must leave no hole)", res.ConvSeq)
	}
}

// Content and client_msg_id are written into the batch statement as
// literals (quoted, or hexadecimal when a byte could be an escape): every
// byte is stored as sent, and a retry of an odd client_msg_id is still
// recognised by uk_sender_client.
func TestContentBytesStoredExactly(t *testing.T) {
	e := newEnv(t)
	s := e.service(t, 1, func(c *send.Config) { c.DedupCacheSize = 0 })
	ctx := context.Background()
	cases := []struct{ cid, content string }{
		{"plain-1", "plain text, no escapes: ~!@#$%^&*()"},
		{"it's", `quote ' and backslash \ and \' and \\`},
		{`back\slash`, "nul \x00 newline \n tab \t ctrl-z \x1a"},
		{"é-ü", "utf-8 é 中文 😀"},
		{"bin", "\xff\xfe\x80 not utf-8"},
		{"empty", ""},
	}
	ids := map[string]uint64{}
	for _, c := range cases {
		req := one(7, 8, c.cid)
		req.Content = c.content
		r, err := s.Send(ctx, req)
		if err != nil {
			t.Fatalf("send %q: %v", c.cid, err)
		}
		ids[c.cid] = r.MsgID
	}
	for _, c := range cases {
		var cid string
		var content []byte
		if err := e.db.QueryRow(`SELECT client_msg_id, content FROM msg_content WHERE msg_id = ?`, ids[c.cid]).Scan(&cid, &content); err != nil {
			t.Fatal(err)
		}
		if cid != c.cid || string(content) != c.content {
			t.Fatalf("stored %q / %q, sent %q / %q", cid, content, c.cid, c.content)
		}
		// A retry (no recent-answer cache here) is found by uk_sender_client.
		req := one(7, 8, c.cid)
		req.Content = c.content
		r, err := s.Send(ctx, req)
		if err != nil || !r.Duplicate || r.MsgID != ids[c.cid] {
			t.Fatalf("retry of %q: %+v, %v", c.cid, r, err)
		}
	}
}
