package pushbus

import (
	"context"
	"errors"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"imlab/internal/testenv"
	"imlab/ref/model"
	"imlab/ref/rkeys"
)

func entries() []model.InboxEntry {
	return []model.InboxEntry{
		{UID: 7, Seq: 12, PrevSeq: 11, MsgID: 1<<60 + 3, ConvID: 99, ConvType: 1, ConvSeq: 5, SenderUID: 8,
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Content: "héllo \"x\""},
		{UID: 23, Seq: 1, MsgID: 4, ConvID: 3, ConvType: 2, ConvSeq: 1, SenderUID: 7, Missing: true},
	}
}

func TestEncodeDecode(t *testing.T) {
	in := entries()
	origin, out, err := Decode([]byte(Encode(42, in)))
	if err != nil || origin != 42 || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %d %+v %v", origin, out, err)
	}
	enc := []byte(Encode(42, in))
	for _, bad := range [][]byte{nil, {2}, enc[:len(enc)-1], append(append([]byte(nil), enc...), 0), {magic, 0, 0, 0, 0, 0, 0, 0, 0, 0xff}} {
		if _, _, err := Decode(bad); !errors.Is(err, model.ErrInvalid) {
			t.Fatalf("decode %x: %v", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(*Config){
		func(c *Config) { c.Mode = "kafka" },
		func(c *Config) { c.Shards = 0 },
		func(c *Config) { c.Shards = MaxShards + 1 },
		func(c *Config) { c.PublishQueue = 0 },
		func(c *Config) { c.SubscribeBuffer = 0 },
		func(c *Config) { c.PublishTimeout = 0 },
	} {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); !errors.Is(err, model.ErrInvalid) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
}

type sink struct {
	mu sync.Mutex
	es []model.InboxEntry
	ch chan struct{}
}

func (s *sink) Committed(_ context.Context, es []model.InboxEntry) {
	s.mu.Lock()
	s.es = append(s.es, es...)
	s.mu.Unlock()
	s.ch <- struct{}{}
}

func redisCfg() Config {
	c := DefaultConfig()
	c.Mode = ModeRedis
	c.Shards = 4
	return c
}

// TestBusRedis: a batch published by one bus reaches the other bus's sink
// (grouped by shard, PrevSeq intact) and not the publisher's own sink.
func TestBusRedis(t *testing.T) {
	rd := testenv.NewRedis(t)
	ctx := context.Background()
	regA := prometheus.NewRegistry()
	a, err := New(rd.Client, rd.Keys, redisCfg(), regA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(rd.Client, rd.Keys, redisCfg(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := &sink{ch: make(chan struct{}, 16)}, &sink{ch: make(chan struct{}, 16)}
	if err := a.Subscribe(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := b.Subscribe(ctx, sb); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("second subscribe: %v", err)
	}
	in := entries() // uids 7 and 23: shards 3 and 3 of 4 -> one message
	in = append(in, model.InboxEntry{UID: 8, Seq: 2, PrevSeq: 1, MsgID: 5, ConvType: 1, Content: "x"})
	a.Committed(ctx, in)
	for i := 0; i < 2; i++ {
		select {
		case <-sb.ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no message on the other bus")
		}
	}
	sb.mu.Lock()
	got := map[uint64]model.InboxEntry{}
	for _, e := range sb.es {
		got[e.UID] = e
	}
	sb.mu.Unlock()
	for _, e := range in {
		if !reflect.DeepEqual(got[e.UID], e) {
			t.Fatalf("uid %d: got %+v want %+v", e.UID, got[e.UID], e)
		}
	}
	select {
	case <-sa.ch:
		t.Fatal("the publisher's own sink got its message")
	case <-time.After(200 * time.Millisecond):
	}
	if v := value(t, a.published); v != 2 {
		t.Fatalf("published %v", v)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Committed(ctx, in)
	if v := value(t, a.dropCounter(DropClosed)); v != 1 {
		t.Fatalf("dropped after close %v", v)
	}
}

// TestBusQueueFull: a publisher stuck on an unresponsive server never
// blocks Committed; past the queue the batches are dropped and counted.
func TestBusQueueFull(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	cfg := redisCfg()
	cfg.PublishQueue = 2
	cfg.PublishTimeout = 300 * time.Millisecond
	bus, err := New(rdb, rkeys.Keys{Prefix: "imlab_t_qf:"}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 10; i++ {
		bus.Committed(context.Background(), entries())
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Committed blocked %v", d)
	}
	if v := value(t, bus.dropCounter(DropQueueFull)); v < 7 || v > 8 {
		t.Fatalf("queue_full drops %v, want 7 or 8 of 10 with a queue of 2", v)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if v := value(t, bus.dropCounter(DropPublish)); v < 2 {
		t.Fatalf("publish errors %v", v)
	}
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
