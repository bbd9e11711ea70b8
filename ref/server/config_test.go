package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"imlab/ref/model"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Auth.Secret = "0123456789abcdef"
	if err := ok.Validate(); err != nil {
		t.Fatalf("default with secret: %v", err)
	}
	if err := DefaultConfig().Validate(); err == nil {
		t.Fatal("config without secret accepted")
	}
	for name, mut := range map[string]func(*Config){
		"no listen":      func(c *Config) { c.Listen = "" },
		"no roles":       func(c *Config) { c.Roles = nil },
		"allocator":      func(c *Config) { c.Allocator = "zookeeper" },
		"pool":           func(c *Config) { c.MySQL.MaxOpenConns = 0 },
		"idle > open":    func(c *Config) { c.MySQL.MaxIdleConns = c.MySQL.MaxOpenConns + 1 },
		"starved send":   func(c *Config) { c.MySQL.MaxOpenConns, c.MySQL.MaxIdleConns = 2, 2 },
		"redis pool":     func(c *Config) { c.Redis.PoolSize = 0 },
		"shutdown":       func(c *Config) { c.ShutdownTimeout = 0 },
		"send policy":    func(c *Config) { c.Send.Policy = "nope" },
		"pull limit":     func(c *Config) { c.Pull.MaxLimit = 0 },
		"api timeout":    func(c *Config) { c.API.RequestTimeout = 0 },
		"push queue":     func(c *Config) { c.Push.QueueSize = 0 },
		"segment size":   func(c *Config) { c.Segment.Size = 0 },
		"hotcache keep":  func(c *Config) { c.HotCache.InboxKeep = 0 },
		"inbox maxitems": func(c *Config) { c.Inbox.MaxItems = 0 },
		"reconcile overlap within a send transaction": func(c *Config) { c.Reconcile.Overlap = c.Send.TxTimeout },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRolesResolve(t *testing.T) {
	noop := func(context.Context, *Process) (func(context.Context) error, error) { return nil, nil }
	reg := Roles{{Name: "api", Start: noop}, {Name: "relay", Start: noop, Needs: []string{NeedKafka}},
		{Name: "consumer", Start: noop, Needs: []string{NeedKafka}}, {Name: "history", Start: noop, Needs: []string{NeedKafka, NeedMongo}}}
	full := Backends{KafkaBrokers: []string{"k:9092"}, MongoURI: "mongodb://m"}
	for _, tc := range []struct {
		in   []string
		b    Backends
		want string
		left int
	}{
		{[]string{"all"}, full, "api,relay,consumer,history", 0},
		{[]string{"consumer", "api"}, full, "api,consumer", 0},
		{[]string{"relay", "relay"}, full, "relay", 0},
		{[]string{"all", "api"}, full, "api,relay,consumer,history", 0},
		{[]string{"all"}, Backends{}, "api", 3},
		{[]string{"all"}, Backends{KafkaBrokers: []string{"k:9092"}}, "api,relay,consumer", 1},
	} {
		got, left, err := reg.resolve(tc.in, tc.b)
		if err != nil || strings.Join(got.Names(), ",") != tc.want || len(left) != tc.left {
			t.Errorf("%v %+v: %v %v %v, want %s", tc.in, tc.b, got.Names(), left, err, tc.want)
		}
	}
	if _, _, err := reg.resolve([]string{"reconciler"}, full); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "known: api, relay, consumer, history") {
		t.Fatalf("unknown role: %v", err)
	}
	if _, _, err := reg.resolve([]string{"history"}, Backends{KafkaBrokers: []string{"k:9092"}}); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "mongo") {
		t.Fatalf("history without mongo: %v", err)
	}
	if _, _, err := reg.resolve([]string{"relay"}, Backends{}); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("relay without kafka: %v", err)
	}
	if _, _, err := (Roles{{Name: "api", Start: noop}, {Name: "api", Start: noop}}).resolve([]string{"api"}, full); err == nil {
		t.Fatal("repeated registry entry accepted")
	}
}

func TestMySQLDSN(t *testing.T) {
	got, err := MySQLDSN("root@tcp(127.0.0.1:3306)/imlab")
	if err != nil {
		t.Fatal(err)
	}
	c, err := mysql.ParseDSN(got)
	if err != nil {
		t.Fatal(err)
	}
	if !c.ParseTime || c.Loc != time.UTC || !c.InterpolateParams || c.DBName != "imlab" {
		t.Errorf("normalized %s: %+v", got, c)
	}
	if c, _ := mysql.ParseDSN(mustDSN(t, "root@tcp(127.0.0.1:3306)/imlab?loc=Local&parseTime=false")); c.Loc != time.UTC || !c.ParseTime {
		t.Errorf("loc/parseTime not forced: %+v", c)
	}
	if _, err := MySQLDSN("root@tcp(127.0.0.1:3306)/"); err == nil {
		t.Error("DSN without database accepted")
	}
	if _, err := MySQLDSN("::bad"); err == nil {
		t.Error("bad DSN accepted")
	}
}

func mustDSN(t *testing.T, dsn string) string {
	t.Helper()
	s, err := MySQLDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStartRefusesAndCleansUp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Auth.Secret = "0123456789abcdef"
	cfg.Listen = "127.0.0.1:0"
	cfg.Roles = []string{"api"}
	if _, err := Start(context.Background(), cfg, Backends{}, DefaultRoles()); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("no backends: %v", err)
	}
	cfg.MySQL.PingTimeout = 500 * time.Millisecond
	_, err := Start(context.Background(), cfg, Backends{MySQLDSN: "root@tcp(127.0.0.1:1)/imlab", RedisAddr: "127.0.0.1:1"}, DefaultRoles())
	if !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("unreachable mysql: %v", err)
	}
}
