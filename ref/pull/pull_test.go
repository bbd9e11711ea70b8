package pull_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/model"
	"imlab/ref/pull"
	"imlab/ref/rkeys"
)

// drain pages uid's inbox from cursor with limit until has_more is false and
// returns every seq seen, checking each page's shape.
func drain(t *testing.T, e *env, uid uint64, did string, cursor uint64, limit int) ([]uint64, uint64) {
	t.Helper()
	var got []uint64
	for {
		res, err := e.svc.Pull(context.Background(), uid, did, ptr(cursor), limit, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Msgs) > limit {
			t.Fatalf("page of %d > limit %d", len(res.Msgs), limit)
		}
		for _, m := range res.Msgs {
			if m.Seq <= cursor {
				t.Fatalf("seq %d not above cursor %d", m.Seq, cursor)
			}
			if m.Content == "" || m.ConvID == 0 || m.MsgID == 0 || m.CreatedAt.IsZero() || m.ConvSeq == 0 || m.UID != uid {
				t.Fatalf("incomplete entry from %s: %+v", res.Source, m)
			}
			got = append(got, m.Seq)
			cursor = m.Seq
		}
		if res.NextCursor != cursor {
			t.Fatalf("next_cursor %d, last seq %d", res.NextCursor, cursor)
		}
		if !res.HasMore {
			return got, cursor
		}
		if len(res.Msgs) == 0 {
			t.Fatal("empty page with has_more")
		}
	}
}

func TestHasMoreAndNextCursor(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	ents := e.w.send(t, 1, 7, 7, false)
	want := seqs(ents)
	// No cache yet: MySQL pages, then the tail page rebuilds the ZSet.
	var cursor uint64
	for i, size := range []int{3, 3, 1} {
		res, err := e.svc.Pull(ctx, 1, "d", ptr(cursor), 3, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(res.Msgs); !slices.Equal(got, want[i*3:i*3+size]) {
			t.Fatalf("page %d: %v, want %v", i, got, want[i*3:i*3+size])
		}
		if res.HasMore != (i < 2) || res.NextCursor != want[i*3+size-1] || res.Truncated {
			t.Fatalf("page %d: has_more=%v next=%d", i, res.HasMore, res.NextCursor)
		}
		cursor = res.NextCursor
	}
	// Empty page: next_cursor stays the cursor.
	res, err := e.svc.Pull(ctx, 1, "d", ptr(cursor), 3, false)
	if err != nil || len(res.Msgs) != 0 || res.HasMore || res.NextCursor != cursor {
		t.Fatalf("empty page %+v %v", res, err)
	}
	if res.Source != pull.SourceCache {
		t.Fatalf("after the tail page the cache should answer, got %s", res.Source)
	}
	// The cache answers the same pages the same way.
	// (the tail page's rebuild also loaded the rows at or below its cursor)
	res, err = e.svc.Pull(ctx, 1, "d", ptr(0), 3, false)
	if err != nil || res.Source != pull.SourceCache || !slices.Equal(seqs(res.Msgs), want[:3]) || !res.HasMore {
		t.Fatalf("cache page %+v %v", res, err)
	}
	if res.Msgs[0] != withoutPrev(ents[0]) {
		t.Fatalf("cache entry %+v\nwant %+v", res.Msgs[0], withoutPrev(ents[0]))
	}
	res, err = e.svc.Pull(ctx, 1, "d", ptr(want[3]), 500, false)
	if err != nil || res.Source != pull.SourceCache || !slices.Equal(seqs(res.Msgs), want[4:]) || res.HasMore {
		t.Fatalf("cache tail %+v %v", res, err)
	}
}

func withoutPrev(e model.InboxEntry) model.InboxEntry {
	e.PrevSeq = 0
	return e
}

func TestInvalidInput(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.svc.Pull(ctx, 1, "d", nil, 501, false)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "500") {
		t.Fatalf("limit 501: %v", err)
	}
	for _, c := range []struct {
		uid   uint64
		did   string
		limit int
	}{{0, "d", 1}, {1, "", 1}, {1, strings.Repeat("x", 65), 1}, {1, "d", -1}} {
		if _, err := e.svc.Pull(ctx, c.uid, c.did, nil, c.limit, false); !errors.Is(err, model.ErrInvalid) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	_, err = e.svc.ConvPull(ctx, 1, "d", 7, 0, 51)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "50") {
		t.Fatalf("conv limit 51: %v", err)
	}
	if _, err := e.svc.ConvPull(ctx, 1, "d", 0, 0, 5); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("conv 0: %v", err)
	}
	if _, err := pull.New(e.db, nil, pull.Config{}, nil); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("zero config: %v", err)
	}
}

// TestPagingWhileArriving: a device pages its inbox while messages keep
// arriving (hooks applied, sometimes lost, Redis wiped now and then); the
// union of its pages must be exactly the inbox, in order, once each.
func TestPagingWhileArriving(t *testing.T) {
	for _, limit := range []int{7, 50} {
		e := newEnv(t, func(_ *pull.Config, h *hotcache.Config) { h.InboxKeep = 40 })
		const uid = 11
		e.w.send(t, uid, 7, 300, false)
		var wg sync.WaitGroup
		// three writers: commits serialize on the fence row, their hooks race
		wg.Add(4)
		for w := range 3 {
			go func() {
				defer wg.Done()
				for i := range 50 {
					e.w.send(t, uid, 7+uint64(i%3), 1+(i+w)%4, (i+w)%37 == 0)
					time.Sleep(time.Duration(100*(w+1)) * time.Microsecond)
				}
			}()
		}
		go func() { // chaos: wipe this test's Redis keys
			defer wg.Done()
			for range 5 {
				time.Sleep(15 * time.Millisecond)
				if err := e.redis.Wipe(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
		writersDone := make(chan struct{})
		go func() { wg.Wait(); close(writersDone) }()
		var got []uint64
		var cursor uint64
		for finished := false; !finished; {
			// once the writers stopped, one more drain reaches the end
			select {
			case <-writersDone:
				finished = true
			default:
			}
			page, last := drain(t, e, uid, "d", cursor, limit)
			got = append(got, page...)
			cursor = last
		}
		want := allSeqs(t, e.db, uid)
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: pulled %d seqs, inbox has %d; first difference at %d", limit, len(got), len(want), firstDiff(got, want))
		}
		cache := testenv.Metric(t, e.reg, "imlab_pull_latency_seconds", map[string]string{"kind": "sync", "source": "cache"})
		mysql := testenv.Metric(t, e.reg, "imlab_pull_latency_seconds", map[string]string{"kind": "sync", "source": "mysql"})
		t.Logf("limit %d: %d seqs, %v pages from cache, %v from mysql, stale %v", limit, len(got), cache, mysql,
			testenv.Metric(t, e.reg, "imlab_cache_requests_total", map[string]string{"cache": "inbox", "result": "stale"}))
		if cache == 0 || mysql == 0 {
			t.Fatalf("both sources should have served: cache %v mysql %v", cache, mysql)
		}
	}
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestLostHookIsCaughtByFence: a commit whose hook never ran (crash after
// COMMIT) must still be pulled, although the ZSet covers the cursor.
func TestLostHookIsCaughtByFence(t *testing.T) {
	e := newEnv(t, func(p *pull.Config, _ *hotcache.Config) { p.FenceCheckInterval = 0 })
	ctx := context.Background()
	e.w.send(t, 2, 7, 5, false)
	got, cursor := drain(t, e, 2, "d", 0, 100) // rebuilds the set
	if len(got) != 5 {
		t.Fatalf("got %d", len(got))
	}
	lost := e.w.send(t, 2, 7, 1, true)
	res, err := e.svc.Pull(ctx, 2, "d", ptr(cursor), 100, false)
	if err != nil || len(res.Msgs) != 1 || res.Msgs[0].Seq != lost[0].Seq || res.Source != pull.SourceMySQL {
		t.Fatalf("lost hook: %+v %v", res, err)
	}
	// That MySQL page rebuilt the set: the cache answers again.
	res, err = e.svc.Pull(ctx, 2, "d", ptr(cursor), 100, false)
	if err != nil || len(res.Msgs) != 1 || res.Source != pull.SourceCache {
		t.Fatalf("after rebuild: %+v %v", res, err)
	}
	if v := testenv.Metric(t, e.reg, "imlab_cache_requests_total", map[string]string{"cache": "inbox", "result": "stale"}); v != 1 {
		t.Fatalf("stale count %v", v)
	}
	// A lost hook behind cached entries: the cache answers what it has with
	// has_more, and the next page (empty in the cache) goes to MySQL.
	before := cursor
	cached := e.w.send(t, 2, 7, 3, false)
	lost2 := e.w.send(t, 2, 7, 1, true)
	res, err = e.svc.Pull(ctx, 2, "d", ptr(lost[0].Seq), 100, false)
	if err != nil || res.Source != pull.SourceCache || !res.HasMore || !slices.Equal(seqs(res.Msgs), seqs(cached)) {
		t.Fatalf("partial: %+v %v", res, err)
	}
	res, err = e.svc.Pull(ctx, 2, "d", ptr(res.NextCursor), 100, false)
	if err != nil || res.Source != pull.SourceMySQL || res.HasMore || !slices.Equal(seqs(res.Msgs), seqs(lost2)) {
		t.Fatalf("after partial: %+v %v", res, err)
	}
	got, _ = drain(t, e, 2, "d", before, 2)
	if !slices.Equal(got, allSeqs(t, e.db, 2)[5:]) {
		t.Fatalf("drain %v", got)
	}
}

func TestCacheTrimsToKeep(t *testing.T) {
	e := newEnv(t, nil) // InboxKeep 200
	ctx := context.Background()
	const uid = 3
	e.w.send(t, uid, 7, 1, false)
	drain(t, e, uid, "d", 0, 10) // set exists from here on
	for range 30 {
		e.w.send(t, uid, 7, 10, false)
	}
	if n, _ := e.redis.Client.ZCard(ctx, e.redis.Keys.Inbox(uid)).Result(); n != 201 {
		t.Fatalf("zcard %d, want 200 messages + the floor member", n)
	}
	all := allSeqs(t, e.db, uid)
	res, err := e.svc.Pull(ctx, uid, "d", ptr(0), 50, false)
	if err != nil || res.Source != pull.SourceMySQL || !slices.Equal(seqs(res.Msgs), all[:50]) {
		t.Fatalf("below the floor: %s %v", res.Source, err)
	}
	floor := all[len(all)-201]
	res, err = e.svc.Pull(ctx, uid, "d", ptr(floor), 50, false)
	if err != nil || res.Source != pull.SourceCache || !slices.Equal(seqs(res.Msgs), all[len(all)-200:len(all)-150]) {
		t.Fatalf("at the floor: %s %v", res.Source, err)
	}
	res, err = e.svc.Pull(ctx, uid, "d", ptr(floor-1), 50, false)
	if err != nil || res.Source != pull.SourceMySQL || res.Msgs[0].Seq != floor {
		t.Fatalf("just below the floor: %s %v", res.Source, err)
	}
}

func TestStoredCursorAndAck(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	const uid = 4
	ents := e.w.send(t, uid, 7, 10, false)
	s := seqs(ents)

	// Nothing served yet: any positive ack is refused and changes nothing.
	if _, err := e.svc.Ack(ctx, uid, "phone", s[0]); !errors.Is(err, model.ErrCursorAhead) {
		t.Fatalf("ack before serve: %v", err)
	}
	res, err := e.svc.Pull(ctx, uid, "phone", nil, 4, false)
	if err != nil || !slices.Equal(seqs(res.Msgs), s[:4]) {
		t.Fatalf("first pull %v %v", seqs(res.Msgs), err)
	}
	if _, err := e.svc.Ack(ctx, uid, "phone", s[4]); !errors.Is(err, model.ErrCursorAhead) {
		t.Fatalf("ack past served: %v", err)
	}
	// Served is per device.
	if _, err := e.svc.Ack(ctx, uid, "laptop", s[1]); !errors.Is(err, model.ErrCursorAhead) {
		t.Fatalf("ack on another device: %v", err)
	}
	got, err := e.svc.Ack(ctx, uid, "phone", s[3])
	if err != nil || got != s[3] {
		t.Fatalf("ack %d: %d %v", s[3], got, err)
	}
	// A late, older ack returns the stored, higher cursor.
	got, err = e.svc.Ack(ctx, uid, "phone", s[1])
	if err != nil || got != s[3] {
		t.Fatalf("late ack: %d %v", got, err)
	}
	// Pull without cursor starts after the stored one: from the cache ...
	res, err = e.svc.Pull(ctx, uid, "phone", nil, 3, false)
	if err != nil || !slices.Equal(seqs(res.Msgs), s[4:7]) {
		t.Fatalf("stored cursor (cached): %v %v", seqs(res.Msgs), err)
	}
	// ... and from MySQL when Redis lost everything.
	if err := e.redis.Wipe(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = e.svc.Pull(ctx, uid, "phone", nil, 3, false)
	if err != nil || !slices.Equal(seqs(res.Msgs), s[4:7]) {
		t.Fatalf("stored cursor (mysql): %v %v", seqs(res.Msgs), err)
	}
	if c, err := e.svc.Cursor(ctx, uid, "phone"); err != nil || c != s[3] {
		t.Fatalf("cursor %d %v", c, err)
	}
	// A pushed seq: MarkServed first, then the ack is allowed.
	if err := e.svc.MarkServed(ctx, uid, "phone", s[9]); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.Ack(ctx, uid, "phone", s[9]); err != nil || got != s[9] {
		t.Fatalf("ack after MarkServed: %d %v", got, err)
	}
	if v, err := e.svc.Served(ctx, uid, "phone"); err != nil || v != s[9] {
		t.Fatalf("served %d %v", v, err)
	}
	// MarkServed never lowers.
	if err := e.svc.MarkServed(ctx, uid, "phone", s[2]); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.svc.Served(ctx, uid, "phone"); v != s[9] {
		t.Fatalf("served lowered to %d", v)
	}
	var dbCursor uint64
	if err := e.db.QueryRow(`SELECT pull_seq FROM sync_cursor WHERE uid = ? AND device_id = 'phone'`, uid).Scan(&dbCursor); err != nil || dbCursor != s[9] {
		t.Fatalf("sync_cursor %d %v", dbCursor, err)
	}
}

func TestConcurrentAcksAreMonotonic(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if err := e.svc.MarkServed(ctx, 5, "d", 1000); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				v := uint64((i*8 + g) * 4)
				got, err := e.svc.Ack(ctx, 5, "d", v)
				if err != nil || got < v {
					t.Errorf("ack %d -> %d %v", v, got, err)
				}
			}
		}()
	}
	wg.Wait()
	if c, err := e.svc.Cursor(ctx, 5, "d"); err != nil || c != 199*4 {
		t.Fatalf("cursor %d %v, want %d", c, err, 199*4)
	}
	if v, ok, _ := e.cache.GetCursor(ctx, 5, "d"); !ok || v != 199*4 {
		t.Fatalf("cached cursor %d %v", v, ok)
	}
}

func TestConvPull(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	const uid = 6
	var a, b []uint64
	for i := range 30 {
		ea := e.w.send(t, uid, 100, 1+i%3, false)
		eb := e.w.send(t, uid, 200, 1, false)
		a = append(a, seqs(ea)...)
		b = append(b, seqs(eb)...)
	}
	var got []uint64
	var cursor uint64
	for {
		res, err := e.svc.ConvPull(ctx, uid, "d", 100, cursor, 20)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Msgs {
			if m.ConvID != 100 || m.Content == "" {
				t.Fatalf("wrong entry %+v", m)
			}
		}
		got = append(got, seqs(res.Msgs)...)
		cursor = res.NextCursor
		if !res.HasMore {
			break
		}
	}
	if !slices.Equal(got, a) {
		t.Fatalf("conv 100: %v, want %v", got, a)
	}
	res, err := e.svc.ConvPull(ctx, uid, "d", 200, b[9], 0)
	if err != nil || !slices.Equal(seqs(res.Msgs), b[10:]) || res.HasMore {
		t.Fatalf("conv 200 from %d: %v %v", b[9], seqs(res.Msgs), err)
	}
	// A conversation page does not let the device ack past other conversations.
	if _, err := e.svc.Ack(ctx, uid, "d", b[len(b)-1]); !errors.Is(err, model.ErrCursorAhead) {
		t.Fatalf("ack after conv pull: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	// One pull a second: the refusals below hold while a pull takes up to
	// a second (a loaded machine under -race); at 5 a second, pulls slower
	// than 200 ms met a refilled limit.
	e := newEnv(t, func(p *pull.Config, _ *hotcache.Config) { p.RateLimit = 1; p.RateBurst = 2 })
	ctx := context.Background()
	for i := range 2 {
		if _, err := e.svc.Pull(ctx, 7, "d", ptr(0), 10, false); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
	_, err := e.svc.Pull(ctx, 7, "d", ptr(0), 10, false)
	var rl *model.RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, model.ErrRateLimited) || rl.RetryAfter <= 0 || rl.RetryAfter > time.Second {
		t.Fatalf("third pull: %v", err)
	}
	// Another uid is not affected; conv pulls share the uid's budget.
	if _, err := e.svc.Pull(ctx, 8, "d", ptr(0), 10, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ConvPull(ctx, 7, "d", 5, 0, 10); !errors.As(err, &rl) {
		t.Fatalf("conv pull: %v", err)
	}
	time.Sleep(rl.RetryAfter + 10*time.Millisecond)
	if _, err := e.svc.Pull(ctx, 7, "d", ptr(0), 10, false); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
	// The limit holds across processes: a second service on the same Redis.
	s2, err := pull.New(e.db, e.cache, func() pull.Config {
		c := pull.DefaultConfig()
		c.RateLimit, c.RateBurst = 1, 2
		return c
	}(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Pull(ctx, 7, "d", ptr(0), 10, false); !errors.Is(err, model.ErrRateLimited) {
		t.Fatalf("second process: %v", err)
	}
}

// TestRedisDownOnlySlows: with Redis unreachable every read is served from
// MySQL, acks work, and the rate limit falls back to the local limiter.
func TestRedisDownOnlySlows(t *testing.T) {
	m := testenv.NewMySQL(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	reg := prometheus.NewRegistry()
	c, err := hotcache.New(dead, testenv.NewRedis(t).Keys, hotcache.DefaultConfig(), reg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := pull.DefaultConfig()
	pcfg.RateLimit, pcfg.RateBurst = 1000, 1000
	s, err := pull.New(m.DB, c, pcfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: m.DB, cache: c, svc: s, reg: reg, w: newWriter(m.DB, c)}
	ents := e.w.send(t, 9, 7, 12, false)
	got, last := drain(t, e, 9, "d", 0, 5)
	if !slices.Equal(got, seqs(ents)) {
		t.Fatalf("got %v", got)
	}
	if v, err := s.Ack(context.Background(), 9, "d", last); err != nil || v != last {
		t.Fatalf("ack %d %v", v, err)
	}
	if v, err := s.Cursor(context.Background(), 9, "d"); err != nil || v != last {
		t.Fatalf("cursor %d %v", v, err)
	}
	if v := testenv.Metric(t, reg, "imlab_cache_requests_total", map[string]string{"cache": "ratelimit", "result": "fallback"}); v < 3 {
		t.Fatalf("fallbacks %v", v)
	}
	// The local limiter still limits.
	pcfg.RateLimit, pcfg.RateBurst = 1, 1
	s2, _ := pull.New(m.DB, c, pcfg, nil)
	_, _ = s2.Pull(context.Background(), 9, "d", ptr(0), 5, false)
	if _, err := s2.Pull(context.Background(), 9, "d", ptr(0), 5, false); !errors.Is(err, model.ErrRateLimited) {
		t.Fatalf("local limiter: %v", err)
	}
}

func TestTruncatedPastThreshold(t *testing.T) {
	e := newEnv(t, func(p *pull.Config, _ *hotcache.Config) {
		p.UnreadThreshold = 50
		p.TruncatedLatest = 20
	})
	ctx := context.Background()
	const uid = 10
	type span struct {
		n        uint64
		min, max uint64
	}
	want := map[uint64]*span{}
	var all []uint64
	for i := range 40 {
		conv := uint64(300 + i%3)
		if i%7 == 0 {
			conv = 1<<63 | 10<<31 | 77 // a 1:1 conversation
		}
		for _, en := range e.w.send(t, uid, conv, 1+i%5, false) {
			s := want[conv]
			if s == nil {
				s = &span{min: en.Seq}
				want[conv] = s
			}
			s.n++
			s.max = en.Seq
			all = append(all, en.Seq)
		}
	}
	if len(all) <= 50 {
		t.Fatalf("only %d messages", len(all))
	}
	// Make the cache cover everything: the truncation must still apply.
	drain(t, e, uid, "other", 0, 500)

	res, err := e.svc.Pull(ctx, uid, "d", ptr(0), 100, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.HasMore || !slices.Equal(seqs(res.Msgs), all[len(all)-20:]) || res.NextCursor != all[len(all)-1] {
		t.Fatalf("truncated answer: truncated=%v has_more=%v seqs=%v", res.Truncated, res.HasMore, seqs(res.Msgs))
	}
	if len(res.Summary) != len(want) {
		t.Fatalf("summary has %d conversations, want %d", len(res.Summary), len(want))
	}
	var total uint64
	for i, cs := range res.Summary {
		w := want[cs.ConvID]
		if w == nil || cs.Unread != w.n || cs.MinSeq != w.min || cs.MaxSeq != w.max {
			t.Fatalf("summary %+v, want %+v", cs, w)
		}
		if cs.ConvID&(1<<63) != 0 && cs.ConvType != model.ConvSingle || cs.ConvID&(1<<63) == 0 && cs.ConvType != model.ConvGroup {
			t.Fatalf("conv type %+v", cs)
		}
		if i > 0 && res.Summary[i-1].MaxSeq < cs.MaxSeq {
			t.Fatal("summary not newest first")
		}
		total += cs.Unread
	}
	if total != uint64(len(all)) {
		t.Fatalf("summary counts %d unread, want %d", total, len(all))
	}
	if v := testenv.Metric(t, e.reg, "imlab_pull_latency_seconds", map[string]string{"source": "truncated"}); v != 1 {
		t.Fatalf("truncated latency samples %v", v)
	}
	// The device was served the newest: it may ack it (explicitly skipping).
	if _, err := e.svc.Ack(ctx, uid, "d", res.NextCursor); err != nil {
		t.Fatal(err)
	}
	// Below the threshold: a normal page.
	res, err = e.svc.Pull(ctx, uid, "d2", ptr(all[len(all)-40]), 100, false)
	if err != nil || res.Truncated || len(res.Msgs) != 39 {
		t.Fatalf("under threshold: truncated=%v n=%d %v", res.Truncated, len(res.Msgs), err)
	}
	// full=true pages the whole backlog.
	e2 := *e
	got, _ := drain(t, &e2, uid, "d3", 0, 30)
	if !slices.Equal(got, all) {
		t.Fatalf("full drain got %d of %d", len(got), len(all))
	}
}

// TestFenceMemoBoundsStaleness: with a FenceCheckInterval, a lost hook may
// stay invisible to cache readers for at most that long, never longer.
func TestFenceMemoBoundsStaleness(t *testing.T) {
	e := newEnv(t, func(p *pull.Config, _ *hotcache.Config) { p.FenceCheckInterval = 300 * time.Millisecond })
	ctx := context.Background()
	e.w.send(t, 12, 7, 3, false)
	_, cursor := drain(t, e, 12, "d", 0, 10) // MySQL, rebuilds
	res, err := e.svc.Pull(ctx, 12, "d", ptr(cursor), 10, false)
	if err != nil || res.Source != pull.SourceCache || len(res.Msgs) != 0 {
		t.Fatalf("verify pull %+v %v", res, err)
	}
	verifiedAt := time.Now()
	lost := e.w.send(t, 12, 7, 1, true)
	for {
		res, err = e.svc.Pull(ctx, 12, "d", ptr(cursor), 10, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Msgs) == 1 && res.Msgs[0].Seq == lost[0].Seq {
			break
		}
		if len(res.Msgs) != 0 {
			t.Fatalf("unexpected page %v", seqs(res.Msgs))
		}
		if time.Since(verifiedAt) > 2*time.Second {
			t.Fatal("lost hook never became visible")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Since(verifiedAt) < 250*time.Millisecond {
		t.Fatalf("visible after %v: the memo was not used", time.Since(verifiedAt))
	}
}

// TestRateLimitOnMiniredis: the limiter's script runs on the embedded
// topology's Redis too.
func TestRateLimitOnMiniredis(t *testing.T) {
	m := testenv.NewMySQL(t)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	c, err := hotcache.New(rdb, rkeys.Keys{}, hotcache.DefaultConfig(), reg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := pull.DefaultConfig()
	pcfg.RateLimit, pcfg.RateBurst = 2, 2
	s, err := pull.New(m.DB, c, pcfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := s.Pull(ctx, 1, "d", ptr(0), 5, false); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Pull(ctx, 1, "d", ptr(0), 5, false)
	var rl *model.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > 500*time.Millisecond {
		t.Fatalf("third pull: %v", err)
	}
	if v := testenv.Metric(t, reg, "imlab_cache_requests_total", map[string]string{"cache": "ratelimit", "result": "fallback"}); v != 0 {
		t.Fatalf("fell back %v times", v)
	}
}

// TestCursorlessPullRoundTrips: a pull without a cursor sends its rate
// limit with the cursor cache read and the page's span at that cursor, so
// it costs the Redis round trips of the same pull given that cursor (whose
// limit rides with the span read), not one more; it still starts after the
// stored cursor, and one the limit refuses costs that one round trip.
func TestCursorlessPullRoundTrips(t *testing.T) {
	// 4 pulls a second: the refusal below holds while a pull takes up to
	// a quarter of a second (a loaded machine under -race); at 50 a second
	// pulls slower than 20 ms never met the limit.
	e := newEnv(t, func(p *pull.Config, _ *hotcache.Config) { p.RateLimit = 4; p.RateBurst = 4 })
	ctx := context.Background()
	const uid = 5
	s := seqs(e.w.send(t, uid, 9, 6, false))
	if _, err := e.svc.Pull(ctx, uid, "phone", nil, 2, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Ack(ctx, uid, "phone", s[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Cursor(ctx, uid, "phone"); err != nil { // the cursor cached
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the burst refilled
	rc := budget.CountRedis(e.redis.Client)
	trips := func(cursor *uint64) (int64, []uint64) {
		t.Helper()
		before := rc.Snapshot().RoundTrips
		res, err := e.svc.Pull(ctx, uid, "phone", cursor, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		return rc.Snapshot().RoundTrips - before, seqs(res.Msgs)
	}
	without, got := trips(nil)
	if !slices.Equal(got, s[2:4]) {
		t.Fatalf("pull without a cursor: %v, want %v", got, s[2:4])
	}
	with, got := trips(ptr(s[1]))
	if !slices.Equal(got, s[2:4]) {
		t.Fatalf("pull at the cursor: %v, want %v", got, s[2:4])
	}
	if without != with {
		t.Fatalf("round trips: %d without a cursor, %d with it: want as many", without, with)
	}
	// Past the burst: refused in one round trip.
	var refused error
	for i := 0; i < 10 && refused == nil; i++ {
		before := rc.Snapshot().RoundTrips
		_, refused = e.svc.Pull(ctx, uid, "phone", nil, 2, false)
		if refused != nil {
			if n := rc.Snapshot().RoundTrips - before; n != 1 {
				t.Fatalf("refused pull: %d round trips, want 1", n)
			}
		}
	}
	if !errors.Is(refused, model.ErrRateLimited) {
		t.Fatalf("no pull refused past the burst: %v", refused)
	}
}
