package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/bson"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

type fakeMembers map[uint64]map[uint64]bool

func (f fakeMembers) IsMember(_ context.Context, convID, uid uint64) (bool, error) {
	return f[convID][uid], nil
}

func groupOf(conv uint64, uids ...uint64) fakeMembers {
	m := map[uint64]bool{}
	for _, u := range uids {
		m[u] = true
	}
	return fakeMembers{conv: m}
}

type fixedSeqs uint64

func (f fixedSeqs) MaxConvSeq(context.Context, uint64) (uint64, error) { return uint64(f), nil }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	store *Store
	svc   *Service
	redis *testenv.Redis
	clock *clock
	cc    *cmdCounter
}

// newFixture: a Store on a fresh FerretDB database, a Service with the
// real Redis under a private prefix (cache on), and a settable clock.
func newFixture(t *testing.T, members Membership, mut func(*Config), deps func(*Deps)) *fixture {
	t.Helper()
	cc := &cmdCounter{}
	st := newStore(t, newDB(t, cc.monitor()), mut)
	r := testenv.NewRedis(t)
	c := &clock{t: time.Now()}
	d := Deps{Redis: r.Client, Keys: r.Keys, Members: members, Now: c.now}
	if deps != nil {
		deps(&d)
	}
	svc, err := NewService(st, d)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{store: st, svc: svc, redis: r, clock: c, cc: cc}
}

func (f *fixture) write(t *testing.T, msgs []model.Message) {
	t.Helper()
	if err := f.store.WriteBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) history(t *testing.T, uid, conv, from, to uint64) []HistoryItem {
	t.Helper()
	items, err := f.svc.History(context.Background(), uid, conv, from, to)
	if err != nil {
		t.Fatalf("History(uid %d, %d..%d): %v", uid, from, to, err)
	}
	return items
}

// describe renders items compactly: "1 2:T 3:R 4" (T tombstone, R revoked).
func describe(items []HistoryItem) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d", it.ConvSeq)
		switch {
		case it.Tombstone:
			b.WriteString(":T")
		case it.Revoked:
			b.WriteString(":R")
		}
	}
	return b.String()
}

func TestHistoryProjectionGroup(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1, 2, 3), nil, nil)
	msgs := msgsFor(conv, 1, 10, 1, 2)
	f.write(t, append(msgs[:4:4], msgs[5:]...)) // seq 5 is a hole
	if err := f.svc.Delete(ctx, 3, conv, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 3); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ { // pass 1 is served from the cache
		got := f.history(t, 3, conv, 1, 20)
		if d := describe(got); d != "1 2:T 3:R 4 5:T 6 7 8 9 10" {
			t.Errorf("pass %d uid 3 sees %q", pass, d)
		}
		for _, it := range got {
			if it.IsRead != nil {
				t.Errorf("group item %d carries is_read", it.ConvSeq)
			}
			switch {
			case it.Tombstone:
				if it.MsgID != 0 || it.Content != "" {
					t.Errorf("tombstone %d leaks %+v", it.ConvSeq, it)
				}
			case it.Revoked:
				if it.Content != "" || it.MsgID != msgs[2].MsgID || it.SenderUID != 1 {
					t.Errorf("revoke notice %+v", it)
				}
			default:
				m := msgs[it.ConvSeq-1]
				if it.Content != m.Content || it.MsgID != m.MsgID || it.SenderUID != m.SenderUID || it.CreatedAt != m.CreatedAt.UnixMilli() {
					t.Errorf("item %+v != message %+v", it, m)
				}
			}
		}
		if d := describe(f.history(t, 2, conv, 1, 20)); d != "1 2 3:R 4 5:T 6 7 8 9 10" {
			t.Errorf("pass %d uid 2 sees %q", pass, d)
		}
	}
	if d := describe(f.history(t, 1, conv, 4, 6)); d != "4 5:T 6" {
		t.Errorf("sub-range: %q", d)
	}
	// Beyond what is written: nothing yet, not tombstones.
	if got := f.history(t, 1, conv, 11, 30); len(got) != 0 {
		t.Errorf("unwritten range returned %s", describe(got))
	}
	for name, call := range map[string]func() error{
		"non-member": func() error { _, err := f.svc.History(ctx, 9, conv, 1, 5); return err },
	} {
		if err := call(); !errors.Is(err, model.ErrForbidden) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, r := range map[string][2]uint64{"from0": {0, 5}, "reversed": {5, 4}, "toolong": {1, 101}} {
		if _, err := f.svc.History(ctx, 1, conv, r[0], r[1]); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := f.history(t, 1, conv, 1, 100); len(got) != 10 {
		t.Errorf("limit-sized range: %d items", len(got))
	}
	if _, err := f.svc.History(ctx, 1, 0, 1, 5); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("conv 0: %v", err)
	}
}

func TestHistoryOneToOneIsRead(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	f := newFixture(t, fakeMembers{}, nil, nil)
	f.write(t, msgsFor(conv, 1, 4, 1, 2)) // odd seqs from 1, even from 2
	got := f.history(t, 1, conv, 1, 4)
	for _, it := range got {
		if it.IsRead == nil || *it.IsRead {
			t.Fatalf("before MarkRead: %+v", it)
		}
	}
	if err := f.svc.MarkRead(ctx, 2, conv, 1, 4); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.MarkRead(ctx, 2, conv, 1, 4); err != nil { // idempotent
		t.Fatal(err)
	}
	for _, uid := range []uint64{1, 2} {
		for _, it := range f.history(t, uid, conv, 1, 4) {
			want := it.ConvSeq%2 == 1 // what 1 sent, 2 has read
			if it.IsRead == nil || *it.IsRead != want {
				t.Errorf("uid %d seq %d is_read %v, want %v", uid, it.ConvSeq, it.IsRead, want)
			}
		}
	}
	if _, err := f.svc.History(ctx, 3, conv, 1, 4); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("third party: %v", err)
	}
	if err := f.svc.MarkRead(ctx, 3, conv, 1, 4); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("third party MarkRead: %v", err)
	}
	g := newFixture(t, groupOf(testGroup, 1), nil, nil)
	if err := g.svc.MarkRead(ctx, 1, testGroup, 1, 4); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("group MarkRead: %v", err)
	}
}

func TestRevokeRules(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1, 2), func(c *Config) { c.RevokeWindow = time.Minute }, nil)
	f.clock.t = time.Now()
	f.write(t, msgsFor(conv, 1, 4, 1, 2)) // created a second ago
	if err := f.svc.Revoke(ctx, 2, conv, 1); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("non-sender revoke: %v", err)
	}
	if err := f.svc.Revoke(ctx, 9, conv, 1); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("non-member revoke: %v", err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 99); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("revoke of nothing: %v", err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 0); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("revoke seq 0: %v", err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 1); err != nil {
		t.Fatal(err)
	}
	f.clock.add(2 * time.Minute)
	if err := f.svc.Revoke(ctx, 1, conv, 1); err != nil { // already revoked: no-op even past the window
		t.Errorf("repeat revoke: %v", err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 3); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("revoke past the window: %v", err)
	}
	sl, err := f.store.loadSlot(ctx, conv, 1)
	if err != nil || sl.Revoke == nil || sl.Revoke.UserID != 1 || sl.Version != 1 {
		t.Errorf("stored revoke: %+v %v", sl, err)
	}
	if d := describe(f.history(t, 2, conv, 1, 4)); d != "1:R 2 3 4" {
		t.Errorf("after revokes: %q", d)
	}
}

func TestCacheFollowsRevokeAndDelete(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1, 2), nil, nil)
	f.write(t, msgsFor(conv, 1, 20, 1, 2))
	f.history(t, 2, conv, 1, 20) // fills the cache
	key := f.redis.Keys.HistoryMsg(conv, 5)
	ttl, err := f.redis.Client.PTTL(ctx, key).Result()
	if err != nil || ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("cache key %s ttl %s, %v", key, ttl, err)
	}
	// A cached read touches MongoDB only for the watermark.
	f.cc.reset()
	f.history(t, 2, conv, 1, 20)
	if n, a := f.cc.get("find"), f.cc.get("aggregate"); n != 1 || a != 0 {
		t.Errorf("cached read: %d finds, %d aggregates; want 1 and 0", n, a)
	}
	stale, err := f.store.loadSlot(ctx, conv, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 5); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(ctx, 2, conv, 6); err != nil {
		t.Fatal(err)
	}
	// A reader that fetched seq 5 before the revoke now tries to cache it:
	// the lower version must not win.
	if err := f.svc.cache.put(ctx, conv, []Slot{stale}); err != nil {
		t.Fatal(err)
	}
	val, err := f.redis.Client.Get(ctx, key).Result()
	if err != nil || !strings.HasPrefix(val, "1|") {
		t.Errorf("cache after revoke = %q, %v", val, err)
	}
	f.cc.reset()
	got := f.history(t, 2, conv, 1, 20)
	if d := describe(got[4:6]); d != "5:R 6:T" {
		t.Errorf("after revoke and delete, uid 2 sees %q", d)
	}
	if n := f.cc.get("find"); n != 1 {
		t.Errorf("read after mutations went to MongoDB (%d finds): the cache was not refreshed", n)
	}
	if d := describe(f.history(t, 1, conv, 5, 6)); d != "5:R 6" {
		t.Errorf("uid 1 sees %q", d)
	}
	// An unreadable cache value is a miss, not an error.
	if err := f.redis.Client.Set(ctx, f.redis.Keys.HistoryMsg(conv, 7), "garbage", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if d := describe(f.history(t, 1, conv, 7, 7)); d != "7" {
		t.Errorf("garbage cache value: %q", d)
	}
}

func TestDeleteBoundAndOverflow(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	uids := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	f := newFixture(t, groupOf(conv, uids...), func(c *Config) { c.DelListMax = 3 }, nil)
	f.write(t, msgsFor(conv, 1, 3, 1, 2))
	for _, uid := range uids[:6] {
		if err := f.svc.Delete(ctx, uid, conv, 1); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Delete(ctx, uid, conv, 1); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	sl, err := f.store.loadSlot(ctx, conv, 1)
	if err != nil || len(sl.DelList) != 3 {
		t.Fatalf("del_list = %v, %v; want the bound of 3", sl.DelList, err)
	}
	recs, err := f.store.deletionRecords(ctx, conv, 5, []uint64{1})
	if err != nil || !recs[1] {
		t.Errorf("uid 5 has no deletion record: %v %v", recs, err)
	}
	for _, uid := range uids[:6] {
		if d := describe(f.history(t, uid, conv, 1, 1)); d != "1:T" {
			t.Errorf("uid %d still sees seq 1: %q", uid, d)
		}
	}
	if d := describe(f.history(t, 7, conv, 1, 1)); d != "1" {
		t.Errorf("uid 7 lost seq 1: %q", d)
	}
	// Concurrent deleters of one message: the list stays bounded and
	// everyone's delete holds.
	var wg sync.WaitGroup
	errs := make([]error, len(uids))
	for i, uid := range uids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.svc.Delete(ctx, uid, conv, 2)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	sl, err = f.store.loadSlot(ctx, conv, 2)
	if err != nil || len(sl.DelList) != 3 {
		t.Errorf("concurrent: del_list = %v, %v", sl.DelList, err)
	}
	for _, uid := range uids {
		if d := describe(f.history(t, uid, conv, 2, 3)); d != "2:T 3" {
			t.Errorf("concurrent: uid %d sees %q", uid, d)
		}
	}
	if err := f.svc.Delete(ctx, 1, conv, 50); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("delete of nothing: %v", err)
	}
	if err := f.svc.Delete(ctx, 99, conv, 1); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("non-member delete: %v", err)
	}
}

func TestClearWatermark(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1, 2), nil, nil)
	f.write(t, msgsFor(conv, 1, 30, 1, 2))
	f.cc.reset()
	min, err := f.svc.Clear(ctx, 1, conv)
	if err != nil || min != 30 {
		t.Fatalf("Clear = %d, %v", min, err)
	}
	if n := f.cc.get("findAndModify") + f.cc.get("update"); n != 1 {
		t.Errorf("clear took %d writes", n)
	}
	if got := f.history(t, 1, conv, 1, 40); len(got) != 0 {
		t.Errorf("after clear uid 1 sees %s", describe(got))
	}
	f.write(t, msgsFor(conv, 31, 35, 1, 2))
	if d := describe(f.history(t, 1, conv, 1, 40)); d != "31 32 33 34 35" {
		t.Errorf("after clear and new messages: %q", d)
	}
	if got := f.history(t, 2, conv, 1, 40); len(got) != 35 {
		t.Errorf("uid 2 affected by uid 1's clear: %d items", len(got))
	}
	// With the send path's counter as the source; the watermark never
	// goes down.
	low := newFixtureSharing(t, f, fixedSeqs(10))
	if min, err := low.Clear(ctx, 1, conv); err != nil || min != 30 {
		t.Errorf("lower clear = %d, %v; want 30 kept", min, err)
	}
	high := newFixtureSharing(t, f, fixedSeqs(33))
	if min, err := high.Clear(ctx, 1, conv); err != nil || min != 33 {
		t.Errorf("higher clear = %d, %v", min, err)
	}
	if d := describe(f.history(t, 1, conv, 1, 40)); d != "34 35" {
		t.Errorf("after raise: %q", d)
	}
	if _, err := f.svc.Clear(ctx, 9, conv); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("non-member clear: %v", err)
	}
}

func newFixtureSharing(t *testing.T, f *fixture, seqs ConvSeqSource) *Service {
	t.Helper()
	svc, err := NewService(f.store, Deps{Redis: f.redis.Client, Keys: f.redis.Keys, Members: f.svc.members, ConvSeqs: seqs, Now: f.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestPhysicalDelete(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1, 2), func(c *Config) { c.DelListMax = 1 }, nil)
	msgs := msgsFor(conv, 1, 5, 1, 2)
	f.write(t, msgs)
	if err := f.svc.Delete(ctx, 1, conv, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(ctx, 2, conv, 3); err != nil { // past the bound of 1: a record
		t.Fatal(err)
	}
	f.history(t, 2, conv, 1, 5) // cache filled
	if err := f.svc.PhysicalDelete(ctx, conv, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.PhysicalDelete(ctx, conv, 3); err != nil { // idempotent
		t.Fatal(err)
	}
	f.write(t, msgs) // a replay must not bring it back
	for _, uid := range []uint64{1, 2} {
		if d := describe(f.history(t, uid, conv, 1, 5)); d != "1 2 3:T 4 5" {
			t.Errorf("uid %d after purge: %q", uid, d)
		}
	}
	if err := f.redis.Wipe(ctx); err != nil { // and straight from MongoDB
		t.Fatal(err)
	}
	if d := describe(f.history(t, 1, conv, 1, 5)); d != "1 2 3:T 4 5" {
		t.Errorf("uncached after purge: %q", d)
	}
	if recs, _ := f.store.deletionRecords(ctx, conv, 2, []uint64{3}); recs[3] {
		t.Error("deletion record survived the purge")
	}
	if err := f.svc.Delete(ctx, 1, conv, 3); err != nil {
		t.Errorf("delete of a purged message: %v", err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 3); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("revoke of a purged message: %v", err)
	}
	if err := f.svc.PhysicalDelete(ctx, conv, 0); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("purge seq 0: %v", err)
	}
}

func TestTombstonesForHoles(t *testing.T) {
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1), nil, nil)
	f.write(t, msgsFor(conv, 1, 5, 1, 2))
	f.write(t, msgsFor(conv, 8, 10, 1, 2))
	if d := describe(f.history(t, 1, conv, 1, 12)); d != "1 2 3 4 5 6:T 7:T 8 9 10" {
		t.Errorf("holes: %q", d)
	}
	// Bucket 1 (101..200) never written, bucket 2 exists: the whole of
	// bucket 1 is settled and comes back as tombstones.
	if got := f.history(t, 1, conv, 150, 160); len(got) != 0 {
		t.Errorf("before bucket 2 exists: %s", describe(got))
	}
	f.write(t, msgsFor(conv, 201, 203, 1, 2))
	got := f.history(t, 1, conv, 150, 160)
	if len(got) != 11 {
		t.Fatalf("after bucket 2: %s", describe(got))
	}
	for _, it := range got {
		if !it.Tombstone {
			t.Errorf("seq %d not a tombstone", it.ConvSeq)
		}
	}
	if d := describe(f.history(t, 1, conv, 195, 205)); d != "195:T 196:T 197:T 198:T 199:T 200:T 201 202 203" {
		t.Errorf("across buckets: %q", d)
	}
}

func TestServiceWithoutCache(t *testing.T) {
	conv := testGroup
	st := newStore(t, newDB(t, nil), nil)
	svc, err := NewService(st, Deps{Members: groupOf(conv, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteBatch(context.Background(), msgsFor(conv, 1, 3, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := svc.Revoke(context.Background(), 1, conv, 1); err != nil {
		t.Fatal(err)
	}
	items, err := svc.History(context.Background(), 1, conv, 1, 3)
	if err != nil || describe(items) != "1:R 2 3" {
		t.Errorf("no cache: %q %v", describe(items), err)
	}
	if _, err := NewService(st, Deps{}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("no membership accepted: %v", err)
	}
}

func TestMarkReadAroundPurgeAndCacheMetrics(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imlab_cache_requests_total"}, []string{"cache", "result"})
	f := newFixture(t, fakeMembers{}, nil, func(d *Deps) { d.CacheRequests = vec })
	f.write(t, msgsFor(conv, 1, 6, 1, 2))
	// Fill the cache, then purge seq 3 through the store (not the Service,
	// so its cache entry stays stale on purpose): MarkRead must still mark
	// the other slots of the bucket.
	f.history(t, 2, conv, 1, 6)
	if err := f.store.purge(ctx, conv, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.MarkRead(ctx, 2, conv, 1, 6); err != nil {
		t.Fatal(err)
	}
	for _, it := range f.history(t, 1, conv, 1, 6) {
		if it.ConvSeq == 3 {
			continue // stale cache: purge went around the Service on purpose
		}
		want := it.ConvSeq%2 == 1
		if it.IsRead == nil || *it.IsRead != want {
			t.Errorf("seq %d is_read %v, want %v", it.ConvSeq, it.IsRead, want)
		}
	}
	hit, miss := counterValue(t, vec, "hit"), counterValue(t, vec, "miss")
	if miss != 6 || hit != 6 {
		t.Errorf("cache metrics hit %v miss %v; want 6 and 6", hit, miss)
	}
}

// updateSlot-level check: a multi-slot is_read update that meets a purged
// slot falls back to slot-by-slot.
func TestMarkReadUpdateMeetsPurgedSlot(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	f := newFixture(t, fakeMembers{}, nil, nil)
	f.write(t, msgsFor(conv, 1, 6, 1, 2))
	purgedOnce := false
	f.store.beforeUpdate = func(docID string) {
		if purgedOnce {
			return
		}
		purgedOnce = true
		f.store.beforeUpdate = nil
		if err := f.store.purge(ctx, conv, 3); err != nil {
			t.Errorf("purge: %v", err)
		}
	}
	if err := f.svc.MarkRead(ctx, 2, conv, 1, 6); err != nil {
		t.Fatal(err)
	}
	if !purgedOnce {
		t.Fatal("hook did not run")
	}
	rr, err := f.store.ReadSlots(ctx, conv, []uint64{1, 3, 5})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Slots[1].IsRead || !rr.Slots[5].IsRead || rr.Slots[3].State != SlotPurged {
		t.Errorf("after MarkRead around a purge: %+v", rr.Slots)
	}
}

func counterValue(t *testing.T, vec *prometheus.CounterVec, result string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(vec); err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister(vec)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cache"] == "history" && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A mark-read whose update landed after its caller gave up never
// refreshed the cache; the next mark-read finds the slot marked in the
// store and must still make the cache show it, or pages served from the
// cache show a mark-read answered ok as unread.
func TestMarkReadRefreshesACacheAnEarlierMarkLeftStale(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	f := newFixture(t, fakeMembers{}, nil, nil)
	f.write(t, msgsFor(conv, 1, 4, 1, 2))
	f.history(t, 2, conv, 1, 4) // the cache holds seq 1 unread
	docID, _ := f.store.layout.DocID(conv, 1)
	if _, err := f.store.updateSlot(ctx, docID, bson.D{
		{Key: "$set", Value: bson.D{{Key: slotPath(0, "is_read"), Value: true}}},
		{Key: "$inc", Value: bson.D{{Key: slotPath(0, "v"), Value: int64(1)}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.MarkRead(ctx, 2, conv, 1, 4); err != nil {
		t.Fatal(err)
	}
	for _, it := range f.history(t, 2, conv, 1, 4) {
		if it.ConvSeq%2 == 1 && (it.IsRead == nil || !*it.IsRead) {
			t.Errorf("seq %d is_read %v after a mark-read answered ok", it.ConvSeq, it.IsRead)
		}
	}
}
