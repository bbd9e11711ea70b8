package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"imlab/internal/testenv"
)

// eventually retries fn every 50ms until it succeeds or d passes (the
// client pools need a few tries to drop cut connections and redial).
func eventually(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mysqlAddr(t *testing.T) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQLBaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

func startProxies(t *testing.T, ups map[string]string) *Proxies {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := StartProxies(ctx, ups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close proxies: %v", err)
		}
	})
	return p
}

func TestProxyRedis(t *testing.T) {
	t.Parallel()
	testenv.NewRedis(t) // skips (or fails under CI) when Redis is not there
	p := startProxies(t, map[string]string{"redis": testenv.RedisAddr()})
	addr, err := p.Addr("redis")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := net.ResolveTCPAddr("tcp", addr); err != nil || !a.IP.IsLoopback() || a.Port == 0 {
		t.Fatalf("proxy listens on %q (%v), want a loopback port", addr, err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	ping := func() error { return c.Ping(ctx).Err() }
	if err := ping(); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}

	// Latency: every round trip takes at least the toxic's latency.
	if err := p.AddToxic(ctx, "redis", Toxic{Kind: KindLatency, Stream: StreamDownstream, Latency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		began := time.Now()
		if err := ping(); err != nil {
			t.Fatalf("PING under latency: %v", err)
		}
		if took := time.Since(began); took < 50*time.Millisecond {
			t.Fatalf("PING under 50ms latency took %v", took)
		}
	}
	if err := p.Heal(ctx, "redis"); err != nil {
		t.Fatal(err)
	}
	if names, _ := p.ToxicNames("redis"); len(names) != 0 {
		t.Fatalf("toxics left after Heal: %v", names)
	}

	// reset_peer: the client gets an error, and works again after Heal.
	if err := p.AddToxic(ctx, "redis", Toxic{Kind: KindResetPeer}); err != nil {
		t.Fatal(err)
	}
	if names, _ := p.ToxicNames("redis"); len(names) != 2 {
		t.Fatalf("a both-direction toxic should be two toxics, have %v", names)
	}
	for i := 0; i < 3; i++ {
		if err := ping(); err == nil {
			t.Fatal("PING through reset_peer succeeded")
		}
	}
	if err := p.Heal(ctx, "redis"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "PING after healing reset_peer", ping)

	// Down: connections cut and refused; Up: same address works again.
	if err := p.SetDown(ctx, "redis", true); err != nil {
		t.Fatal(err)
	}
	if on, _ := p.Enabled("redis"); on {
		t.Fatal("proxy still enabled after SetDown(true)")
	}
	if err := ping(); err == nil {
		t.Fatal("PING through a down proxy succeeded")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("a down proxy accepted a connection")
	}
	if err := p.SetDown(ctx, "redis", true); err != nil { // already down: no-op
		t.Fatal(err)
	}
	if err := p.Heal(ctx, "redis"); err != nil {
		t.Fatal(err)
	}
	if a2, _ := p.Addr("redis"); a2 != addr {
		t.Fatalf("proxy moved from %s to %s", addr, a2)
	}
	eventually(t, 5*time.Second, "PING after the proxy came back", ping)
	if err := p.SetDown(ctx, "redis", false); err != nil { // already up: no-op
		t.Fatal(err)
	}
}

func TestProxyMySQL(t *testing.T) {
	t.Parallel()
	my := testenv.NewMySQL(t) // skips (or fails under CI) when MariaDB is not there
	p := startProxies(t, map[string]string{"mysql": mysqlAddr(t), "redis": testenv.RedisAddr()})
	if got := p.Names(); !reflect.DeepEqual(got, []string{"mysql", "redis"}) {
		t.Fatalf("Names() = %v", got)
	}
	addr, err := p.Addr("mysql")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(my.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	cfg.Timeout = 2 * time.Second
	cfg.ReadTimeout = 2 * time.Second
	cfg.WriteTimeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(2)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	selectOne := func() error {
		qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
		defer qcancel()
		var n int
		if err := db.QueryRowContext(qctx, "SELECT 1").Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return errors.New("SELECT 1 returned something else")
		}
		return nil
	}
	if err := selectOne(); err != nil {
		t.Fatalf("SELECT 1 through the proxy: %v", err)
	}

	if err := p.AddToxic(ctx, "mysql", Toxic{Kind: KindLatency, Latency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := selectOne(); err != nil {
		t.Fatalf("SELECT 1 under latency: %v", err)
	}
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Fatalf("SELECT 1 under 50ms latency took %v", took)
	}
	if err := p.HealAll(ctx); err != nil {
		t.Fatal(err)
	}

	if err := p.AddToxic(ctx, "mysql", Toxic{Kind: KindResetPeer}); err != nil {
		t.Fatal(err)
	}
	if err := selectOne(); err == nil {
		t.Fatal("SELECT 1 through reset_peer succeeded")
	}
	if err := p.Heal(ctx, "mysql"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "SELECT 1 after healing reset_peer", selectOne)

	if err := p.SetDown(ctx, "mysql", true); err != nil {
		t.Fatal(err)
	}
	if err := selectOne(); err == nil {
		t.Fatal("SELECT 1 through a down proxy succeeded")
	}
	if err := p.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "SELECT 1 after the proxy came back", selectOne)
}

func TestProxyBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, ups := range []map[string]string{
		{"db": "10.1.2.3:3306"},
		{"db": "192.168.0.1:6379"},
		{"db": "example.com:6379"},
		{"db": "[2001:db8::1]:6379"},
		{"ok": "127.0.0.1:6379", "db": "8.8.8.8:53"},
	} {
		if p, err := StartProxies(ctx, ups); !errors.Is(err, ErrNotLoopback) {
			if p != nil {
				p.Close()
			}
			t.Fatalf("StartProxies(%v): want ErrNotLoopback, got %v", ups, err)
		}
	}
	for _, ups := range []map[string]string{
		nil,
		{"Bad": "127.0.0.1:6379"},
		{"": "127.0.0.1:6379"},
		{"a_very_long_name_that_is_over_32_chars": "127.0.0.1:6379"},
		{"db": "127.0.0.1"},
		{"db": "127.0.0.1:0"},
		{"db": "127.0.0.1:99999"},
	} {
		if p, err := StartProxies(ctx, ups); !errors.Is(err, ErrInvalid) {
			if p != nil {
				p.Close()
			}
			t.Fatalf("StartProxies(%v): want ErrInvalid, got %v", ups, err)
		}
	}

	tooMany := map[string]string{}
	for i := 0; i <= MaxProxies; i++ {
		tooMany[fmt.Sprintf("p%d", i)] = "127.0.0.1:6379"
	}
	if p, err := StartProxies(ctx, tooMany); !errors.Is(err, ErrInvalid) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("%d proxies: want ErrInvalid, got %v", len(tooMany), err)
	}

	p := startProxies(t, map[string]string{"redis": testenv.RedisAddr(), "ipv6": "[::1]:6379", "local": "localhost:6379"})
	if _, err := p.Addr("nope"); !errors.Is(err, ErrUnknownProxy) {
		t.Fatalf("Addr of an unknown proxy: %v", err)
	}
	if _, err := p.ToxicNames("nope"); !errors.Is(err, ErrUnknownProxy) {
		t.Fatalf("ToxicNames of an unknown proxy: %v", err)
	}
	good := Toxic{Kind: KindLatency, Latency: 10 * time.Millisecond}
	for _, err := range []error{
		p.AddToxic(ctx, "nope", good),
		p.SetDown(ctx, "nope", true),
		p.Heal(ctx, "nope"),
	} {
		if !errors.Is(err, ErrUnknownProxy) {
			t.Fatalf("unknown proxy: want ErrUnknownProxy, got %v", err)
		}
	}
	if err := p.AddToxic(ctx, "redis", good); err != nil {
		t.Fatal(err)
	}
	before, _ := p.ToxicNames("redis")
	for _, bad := range []Toxic{
		{Kind: KindLatency, Latency: -time.Millisecond},
		{Kind: "jam"},
		{Kind: KindLatency, Latency: time.Millisecond, Toxicity: 1.5},
		{Kind: KindLatency, Latency: time.Millisecond, Stream: "sideways"},
		{Kind: KindBandwidth},
	} {
		if err := p.AddToxic(ctx, "redis", bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("AddToxic(%+v): want ErrInvalid, got %v", bad, err)
		}
	}
	after, _ := p.ToxicNames("redis")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused toxic changed the proxy: %v -> %v", before, after)
	}

	// The per-proxy toxic limit is enforced and changes nothing.
	for i := 0; i+2 <= MaxToxicsPerProxy; i += 2 {
		if err := p.AddToxic(ctx, "local", good); err != nil {
			t.Fatalf("toxic %d: %v", i, err)
		}
	}
	full, _ := p.ToxicNames("local")
	if err := p.AddToxic(ctx, "local", good); !errors.Is(err, ErrInvalid) {
		t.Fatalf("toxic over the limit: want ErrInvalid, got %v", err)
	}
	if now, _ := p.ToxicNames("local"); !reflect.DeepEqual(now, full) {
		t.Fatalf("a refused toxic changed the proxy: %d -> %d toxics", len(full), len(now))
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.AddToxic(ctx, "redis", good); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddToxic after Close: %v", err)
	}
	if err := p.SetDown(ctx, "redis", false); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetDown after Close: %v", err)
	}
	addr, _ := p.Addr("redis")
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a closed proxy accepted a connection")
	}
}

func TestToxicValidate(t *testing.T) {
	t.Parallel()
	ok := []Toxic{
		{Kind: KindLatency, Latency: 50 * time.Millisecond},
		{Kind: KindLatency, Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Stream: StreamUpstream, Toxicity: 0.5},
		{Kind: KindTimeout},
		{Kind: KindTimeout, Timeout: time.Second},
		{Kind: KindResetPeer, Timeout: 100 * time.Millisecond},
		{Kind: KindBandwidth, RateKBps: 100},
		{Kind: KindSlowClose, Timeout: time.Second},
		{Kind: KindLimitData, Bytes: 0},
		{Kind: KindLimitData, Bytes: 4096, Toxicity: 1},
	}
	for _, tx := range ok {
		if err := tx.Validate(); err != nil {
			t.Errorf("%+v: %v", tx, err)
		}
	}
	bad := []Toxic{
		{},
		{Kind: "LATENCY", Latency: time.Millisecond},
		{Kind: KindLatency},
		{Kind: KindLatency, Latency: -time.Millisecond},
		{Kind: KindLatency, Latency: time.Millisecond, Jitter: -time.Millisecond},
		{Kind: KindLatency, Latency: 1500 * time.Microsecond},
		{Kind: KindLatency, Latency: 2 * MaxToxicDelay},
		{Kind: KindLatency, Latency: time.Millisecond, Toxicity: -0.1},
		{Kind: KindLatency, Latency: time.Millisecond, Toxicity: 1.01},
		{Kind: KindLatency, Latency: time.Millisecond, Timeout: time.Second},
		{Kind: KindTimeout, Timeout: -time.Second},
		{Kind: KindTimeout, Latency: time.Second},
		{Kind: KindBandwidth},
		{Kind: KindBandwidth, RateKBps: -1},
		{Kind: KindBandwidth, RateKBps: MaxRateKBps + 1},
		{Kind: KindBandwidth, RateKBps: 10, Bytes: 10},
		{Kind: KindLimitData, Bytes: -1},
		{Kind: KindLimitData, Bytes: MaxLimitBytes + 1},
		{Kind: KindResetPeer, RateKBps: 1},
	}
	for _, tx := range bad {
		if err := tx.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: want ErrInvalid, got %v", tx, err)
		}
	}
}

func TestLoopbackChecks(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"} {
		if err := checkLoopbackHost(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	for _, h := range []string{"10.0.0.1", "0.0.0.0", "", "kafka", "fe80::1", "::", "127.0.0.1.example.com"} {
		if err := checkLoopbackHost(h); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("%q: want ErrNotLoopback, got %v", h, err)
		}
	}
}

func TestProxyFaultsHealSeparately(t *testing.T) {
	t.Parallel()
	p := startProxies(t, map[string]string{"redis": testenv.RedisAddr()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lat := ProxyToxic(p, "redis", Toxic{Kind: KindLatency, Latency: 20 * time.Millisecond})
	bw := ProxyToxic(p, "redis", Toxic{Kind: KindBandwidth, RateKBps: 1000, Stream: StreamDownstream})
	down := ProxyDown(p, "redis")
	for f, want := range map[Fault]string{
		lat:  "latency(redis,20ms)",
		bw:   "bandwidth(redis,1000KB/s,downstream)",
		down: "down(redis)",
		ProxyToxic(p, "redis", Toxic{Kind: KindResetPeer, Toxicity: 0.25}): "reset_peer(redis,p=0.25)",
	} {
		if f.Name() != want {
			t.Errorf("Name() = %q, want %q", f.Name(), want)
		}
	}
	for _, f := range []Fault{lat, bw, down} {
		if err := f.Inject(ctx); err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
	}
	if n, _ := p.ToxicNames("redis"); len(n) != 3 {
		t.Fatalf("want 3 toxics (latency both ways + bandwidth), have %v", n)
	}
	if err := lat.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := p.ToxicNames("redis")
	if len(n) != 1 {
		t.Fatalf("after healing the latency, want the bandwidth toxic only, have %v", n)
	}
	if on, _ := p.Enabled("redis"); on {
		t.Fatal("healing a toxic brought a downed proxy back")
	}
	if err := lat.Heal(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := down.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if on, _ := p.Enabled("redis"); !on {
		t.Fatal("proxy still down after healing ProxyDown")
	}
	if err := p.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bw.Heal(ctx); err != nil { // its toxic is already gone: fine
		t.Fatal(err)
	}
	if err := ProxyToxic(p, "nope", Toxic{Kind: KindTimeout}).Inject(ctx); !errors.Is(err, ErrUnknownProxy) {
		t.Fatalf("fault on an unknown proxy: %v", err)
	}
	if err := ProxyToxic(nil, "redis", Toxic{Kind: KindTimeout}).Inject(ctx); !errors.Is(err, ErrInvalid) {
		t.Fatalf("fault on nil proxies: %v", err)
	}
}

// TestNoProxies: the empty set names no proxy, refuses every change of one
// with ErrUnknownProxy (so a fault built on it cannot pretend it was
// injected), and heals and closes as a no-op.
func TestNoProxies(t *testing.T) {
	t.Parallel()
	p := NoProxies()
	ctx := context.Background()
	if n := p.Names(); len(n) != 0 {
		t.Errorf("Names() = %v, want none", n)
	}
	if _, err := p.Addr("redis"); !errors.Is(err, ErrUnknownProxy) {
		t.Errorf("Addr: want ErrUnknownProxy, got %v", err)
	}
	if err := p.AddToxic(ctx, "redis", Toxic{Kind: KindLatency, Latency: time.Millisecond}); !errors.Is(err, ErrUnknownProxy) {
		t.Errorf("AddToxic: want ErrUnknownProxy, got %v", err)
	}
	if err := ProxyDown(p, "mysql").Inject(ctx); err == nil {
		t.Error("down on no proxy: injected")
	}
	if err := p.HealAll(ctx); err != nil {
		t.Errorf("HealAll: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := p.Close(); err != nil {
			t.Errorf("Close %d: %v", i, err)
		}
	}
}
