package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"imlab/internal/testenv"
	"imlab/ref/rkeys"
)

// countKeys counts the keys under a literal prefix.
func countKeys(t *testing.T, ctx context.Context, c *redis.Client, prefix string) int {
	t.Helper()
	n := 0
	iter := c.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRedisWipe(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := r.Client
	// The wiped instance's prefix holds a glob metacharacter: the wipe must
	// take it literally and leave base+"ab:" (which "a*:*" would match).
	victim := rkeys.Keys{Prefix: r.Keys.Prefix + "a*:"}
	bystander := rkeys.Keys{Prefix: r.Keys.Prefix + "ab:"}
	const n = 1234
	pipe := c.Pipeline()
	for i := uint64(1); i <= n; i++ {
		pipe.Set(ctx, victim.Msg(i), "body", time.Hour)
	}
	pipe.Set(ctx, victim.SeqCounter(7), 99, 0)
	pipe.ZAdd(ctx, victim.Inbox(7), redis.Z{Score: 1, Member: "m1"})
	pipe.Set(ctx, victim.Cursor(7, "pc"), 1, 0)
	pipe.Set(ctx, bystander.SeqCounter(7), 5, 0)
	pipe.Set(ctx, bystander.Msg(1), "keep", 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	f := RedisWipe(c, RedisWipeConfig{Prefix: victim.Prefix, Batch: 100})
	if f.Name() != "redis_wipe" {
		t.Fatalf("Name() = %q", f.Name())
	}
	if err := f.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if got := countKeys(t, ctx, c, victim.Prefix); got != 0 {
		t.Fatalf("%d keys left under the wiped prefix", got)
	}
	if got := f.(Impact).Affected(); got != n+3 {
		t.Fatalf("Affected() = %d, want %d", got, n+3)
	}
	if v, err := c.Get(ctx, bystander.SeqCounter(7)).Result(); err != nil || v != "5" {
		t.Fatalf("key under another prefix: %q, %v", v, err)
	}
	if got := countKeys(t, ctx, c, bystander.Prefix); got != 2 {
		t.Fatalf("%d keys under the other prefix, want 2", got)
	}
	if err := f.Heal(ctx); err != nil {
		t.Fatalf("Heal of a one-shot fault: %v", err)
	}
	if err := f.Inject(ctx); err != nil || f.(Impact).Affected() != 0 {
		t.Fatalf("wiping an empty prefix: %v, affected %d", err, f.(Impact).Affected())
	}

	// Refused inputs change nothing.
	for _, cfg := range []RedisWipeConfig{{}, {Prefix: "", Batch: 10}, {Prefix: "x:", Batch: -1}, {Prefix: "x:", Batch: MaxBatch + 1}} {
		if err := RedisWipe(c, cfg).Inject(ctx); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: want ErrInvalid, got %v", cfg, err)
		}
	}
	if RedisWipe(c, RedisWipeConfig{AllowFlushAll: true}).Name() != "redis_flushall" {
		t.Fatal("a whole-server wipe must say so in its name")
	}
	if err := DefaultRedisWipeConfig().Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("the default config must not wipe the server: %v", err)
	}
	if err := RedisWipe(nil, RedisWipeConfig{Prefix: "x:"}).Inject(ctx); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil client: %v", err)
	}
	remote := redis.NewClient(&redis.Options{Addr: "10.255.255.1:6379"})
	defer remote.Close()
	if err := RedisWipe(remote, RedisWipeConfig{Prefix: "x:"}).Inject(ctx); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("non-loopback Redis: %v", err)
	}
	if got := countKeys(t, ctx, c, bystander.Prefix); got != 2 {
		t.Fatalf("refused wipes changed keys: %d under the other prefix", got)
	}
}

func TestAllocatorRollback(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := r.Client
	lab := rkeys.Keys{Prefix: r.Keys.Prefix + "lab:"}
	other := rkeys.Keys{Prefix: r.Keys.Prefix + "other:"}
	const many = 250 // several script batches
	set := func(k string, v any, ttl time.Duration) {
		t.Helper()
		if err := c.Set(ctx, k, v, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	get := func(k string) string {
		t.Helper()
		v, err := c.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			return "<nil>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	set(lab.SeqCounter(1), 100, 0)
	set(lab.SeqCounter(2), 5, 0)
	set(lab.SeqCounter(3), 0, 0)
	set(lab.SeqCounter(4), 50, time.Hour)
	for uid := uint64(1000); uid < 1000+many; uid++ {
		set(lab.SeqCounter(uid), 1000+uid, 0)
	}
	set(lab.SeqCounter(1)+":x", 77, 0) // not a counter (not a uid after the base)
	if err := c.ZAdd(ctx, lab.Inbox(1), redis.Z{Score: 100, Member: "m"}).Err(); err != nil {
		t.Fatal(err)
	}
	set(other.SeqCounter(1), 100, 0)

	f := AllocatorRollback(c, RollbackConfig{Prefix: lab.Prefix, By: 10, Batch: 64})
	if f.Name() != "allocator_rollback(10)" {
		t.Fatalf("Name() = %q", f.Name())
	}
	if err := f.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		lab.SeqCounter(1):        "90",
		lab.SeqCounter(2):        "0", // floor 0
		lab.SeqCounter(3):        "0",
		lab.SeqCounter(4):        "40",
		lab.SeqCounter(1000):     "1990",
		lab.SeqCounter(1249):     "2239",
		lab.SeqCounter(1) + ":x": "77",
		other.SeqCounter(1):      "100",
	} {
		if got := get(k); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	if got := f.(Impact).Affected(); got != 3+many {
		t.Fatalf("Affected() = %d, want %d (counters above 0)", got, 3+many)
	}
	if ttl, err := c.TTL(ctx, lab.SeqCounter(4)).Result(); err != nil || ttl <= 0 {
		t.Fatalf("rollback dropped the counter's TTL: %v, %v", ttl, err)
	}
	if n, err := c.ZCard(ctx, lab.Inbox(1)).Result(); err != nil || n != 1 {
		t.Fatalf("inbox touched: %d, %v", n, err)
	}

	// A value that is not an integer fails its batch without changing it.
	bad := rkeys.Keys{Prefix: r.Keys.Prefix + "bad:"}
	for uid := uint64(1); uid <= 40; uid++ {
		set(bad.SeqCounter(uid), 30, 0)
	}
	set(bad.SeqCounter(41), "abc", 0)
	if err := c.ZAdd(ctx, bad.SeqCounter(42), redis.Z{Score: 1, Member: "x"}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 7, 0} {
		err := AllocatorRollback(c, RollbackConfig{Prefix: bad.Prefix, By: 10, Batch: batch}).Inject(ctx)
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("rollback over a non-integer counter: want ErrInvalid, got %v", err)
		}
	}
	for uid := uint64(1); uid <= 40; uid++ {
		if got := get(bad.SeqCounter(uid)); got != "30" {
			t.Fatalf("a refused rollback changed counter %d: %s", uid, got)
		}
	}

	// By <= 0 resets: the counters are deleted, nothing else.
	reset := AllocatorRollback(c, RollbackConfig{Prefix: lab.Prefix})
	if reset.Name() != "allocator_reset" {
		t.Fatalf("Name() = %q", reset.Name())
	}
	if err := reset.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if got := reset.(Impact).Affected(); got != 4+many {
		t.Fatalf("reset Affected() = %d, want %d", got, 4+many)
	}
	for _, uid := range []uint64{1, 2, 3, 4, 1000} {
		if got := get(lab.SeqCounter(uid)); got != "<nil>" {
			t.Errorf("counter %d survived the reset: %s", uid, got)
		}
	}
	if get(lab.SeqCounter(1)+":x") != "77" || get(other.SeqCounter(1)) != "100" {
		t.Fatal("reset touched keys that are not the prefix's counters")
	}
	if err := AllocatorRollback(c, RollbackConfig{Prefix: lab.Prefix, Batch: -5}).Inject(ctx); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad batch: %v", err)
	}
}

// TestDirectFaultsInSchedule runs the Redis faults from a schedule: the
// inject events carry how much they changed. The wipe comes three seconds
// after the rollback (100 ms, then 1 s, were once not enough on a loaded
// machine: the wipe ran first and the rollback found nothing, then the
// rollback's inject outlasted a second, so its heal came after the wipe's
// inject). Each fault's heal follows its own inject; across the faults
// only the injects' order is the schedule's.
func TestDirectFaultsInSchedule(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lab := rkeys.Keys{Prefix: r.Keys.Prefix + "sched:"}
	for uid := uint64(1); uid <= 5; uid++ {
		if err := r.Client.Set(ctx, lab.SeqCounter(uid), strconv.FormatUint(uid*10, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := RunSchedule(ctx, time.Now(), []Step{
		{At: 0, Fault: AllocatorRollback(r.Client, RollbackConfig{Prefix: lab.Prefix, By: 1})},
		{At: 3 * time.Second, Fault: RedisWipe(r.Client, RedisWipeConfig{Prefix: lab.Prefix})},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var injects []string
	for _, e := range evs {
		if e.Err != "" {
			t.Fatalf("%+v", e)
		}
		got[e.Fault] += fmt.Sprintf("%s:%d ", e.Action, e.Affected)
		if e.Action == ActionInject {
			injects = append(injects, e.Fault)
		}
	}
	for _, f := range []string{"allocator_rollback(1)", "redis_wipe"} {
		if got[f] != "inject:5 heal:0 " {
			t.Errorf("%s: events %q, want inject:5 heal:0", f, got[f])
		}
	}
	if strings.Join(injects, " ") != "allocator_rollback(1) redis_wipe" {
		t.Errorf("injects in order %v, want the rollback's first", injects)
	}
}
