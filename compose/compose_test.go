package compose

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"imlab/internal/testenv"
	"imlab/ref/schema"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", DefaultConfig(), true},
		{"embedded", mod(func(c *Config) { c.Mode = ModeEmbedded }), true},
		{"bad mode", mod(func(c *Config) { c.Mode = "docker" }), false},
		{"empty mode", mod(func(c *Config) { c.Mode = "" }), false},
		{"external missing all", mod(func(c *Config) { c.Mode = ModeExternal }), false},
		{"external missing kafka", mod(func(c *Config) {
			c.Mode = ModeExternal
			c.MySQLDSN, c.RedisAddr, c.MongoURI = "root@tcp(127.0.0.1:3306)/", "127.0.0.1:6379", "mongodb://127.0.0.1:27017/"
		}), false},
		{"external without kafka and mongo", mod(func(c *Config) {
			c.Mode = ModeExternal
			c.MySQLDSN, c.RedisAddr = "root@tcp(127.0.0.1:3306)/", "127.0.0.1:6379"
			c.WithKafka, c.WithMongo = false, false
		}), true},
		{"local with dsn", mod(func(c *Config) { c.Mode = ModeLocal; c.MySQLDSN = "root@tcp(127.0.0.1:3306)/" }), false},
		{"embedded with redis", mod(func(c *Config) { c.Mode = ModeEmbedded; c.RedisAddr = "127.0.0.1:6379" }), false},
		{"unix socket dsn", mod(func(c *Config) { c.MySQLDSN = "root@unix(/run/mysqld.sock)/" }), false},
		{"garbage dsn", mod(func(c *Config) { c.MySQLDSN = "not a dsn" }), false},
		{"redis no port", mod(func(c *Config) { c.RedisAddr = "localhost" }), false},
		{"broker no port", mod(func(c *Config) { c.KafkaBrokers = []string{"kafka"} }), false},
		{"mongo scheme", mod(func(c *Config) { c.MongoURI = "http://x" }), false},
		{"zero partitions", mod(func(c *Config) { c.KafkaPartitions = 0 }), false},
		{"too many partitions", mod(func(c *Config) { c.KafkaPartitions = MaxKafkaPartitions + 1 }), false},
		{"empty topic", mod(func(c *Config) { c.KafkaTopics = []string{""} }), false},
		{"missing data dir", mod(func(c *Config) { c.DataDir = filepath.Join(dir, "nope") }), false},
		{"data dir is file", mod(func(c *Config) { c.DataDir = file }), false},
		{"data dir", mod(func(c *Config) { c.DataDir = dir }), true},
		{"zero start timeout", mod(func(c *Config) { c.StartTimeout = 0 }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.ok && err != nil {
				t.Fatalf("want ok, got %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrConfig) {
				t.Fatalf("want ErrConfig, got %v", err)
			}
		})
	}
}

func TestStartRejectsBadConfigAndStartsNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeExternal
	b, stop, err := Start(context.Background(), cfg)
	if !errors.Is(err, ErrConfig) || b != nil || stop != nil {
		t.Fatalf("Start = %v, %v, %v; want nil, nil, ErrConfig", b, stop != nil, err)
	}
}

func TestApplyEnv(t *testing.T) {
	env := map[string]string{
		EnvBackends:     "external",
		EnvMySQLDSN:     "u@tcp(db:3306)/x",
		EnvRedisAddr:    "r:6379",
		EnvKafkaBrokers: " k1:9092, ,k2:9092 ",
		EnvMongoURI:     "mongodb://m:27017/",
		EnvDataDir:      "/var/tmp",
	}
	cfg := DefaultConfig()
	if err := cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != "external" || cfg.MySQLDSN != env[EnvMySQLDSN] || cfg.RedisAddr != "r:6379" ||
		strings.Join(cfg.KafkaBrokers, "|") != "k1:9092|k2:9092" || cfg.MongoURI != env[EnvMongoURI] || cfg.DataDir != "/var/tmp" {
		t.Fatalf("ApplyEnv gave %+v", cfg)
	}
	if cfg.KafkaPartitions != DefaultKafkaPartitions {
		t.Fatalf("partitions changed without env: %d", cfg.KafkaPartitions)
	}
	env[EnvKafkaPartitions] = "x"
	if err := cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad partitions: got %v", err)
	}
}

func TestResolveFallsBackToEmbeddedWithoutBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // redis-server is not in an sbin directory
	if _, err := lookBinary("redis-server"); err == nil {
		t.Skip("redis-server is in an sbin directory on this machine")
	}
	r := &run{cfg: DefaultConfig(), log: discardLogger(), b: &Backends{Kinds: map[string]string{}}}
	if m := r.resolveRedis(); m != ModeEmbedded {
		t.Fatalf("resolveRedis = %s, want embedded", m)
	}
	if len(r.b.Warnings) != 1 || !strings.Contains(r.b.Warnings[0], "miniredis") {
		t.Fatalf("warnings = %q", r.b.Warnings)
	}
	r.cfg.RedisAddr = "127.0.0.1:6379"
	if m := r.resolveRedis(); m != ModeExternal {
		t.Fatalf("resolveRedis with address = %s, want external", m)
	}
}

// testConfig is a config for tests: data under a test temp dir, bounded
// start, fast stop.
func testConfig(t *testing.T, mode string) Config {
	cfg := DefaultConfig()
	cfg.Mode = mode
	cfg.DataDir = t.TempDir()
	cfg.StartTimeout = 45 * time.Second
	cfg.StopTimeout = 20 * time.Second
	return cfg
}

func startT(t *testing.T, cfg Config) (*Backends, func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, stop, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Mode, err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stop(context.Background())
		}
	})
	return b, func(ctx context.Context) error { stopped = true; return stop(ctx) }
}

func pingSQL(t *testing.T, dsn string, migrate bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if c.DBName == "" || !c.ParseTime || c.Loc != time.UTC || !c.InterpolateParams || c.Net != "tcp" {
		t.Fatalf("DSN %s lacks database/parseTime/loc/interpolateParams/tcp", dsn)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS compose_ping (id BIGINT UNSIGNED NOT NULL, at DATETIME(3) NOT NULL, PRIMARY KEY (id))"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := db.ExecContext(ctx, "INSERT INTO compose_ping (id, at) VALUES (?, ?)", 7, now); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var at time.Time
	if err := db.QueryRowContext(ctx, "SELECT at FROM compose_ping WHERE id = ?", 7).Scan(&at); err != nil {
		t.Fatalf("select: %v", err)
	}
	if !at.Equal(now) {
		t.Fatalf("read back %v, wrote %v", at, now)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE compose_ping"); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if migrate {
		applied, err := schema.Migrate(ctx, db)
		if err != nil {
			t.Fatalf("schema.Migrate: %v", err)
		}
		if len(applied) == 0 {
			t.Fatal("schema.Migrate applied nothing on a fresh database")
		}
		t.Logf("schema.Migrate applied %v", applied)
	}
}

// incrScript is the shape of script the hot cache relies on: read, compare,
// write, atomically.
const incrScript = `local v = redis.call('INCR', KEYS[1]); if v > tonumber(ARGV[1]) then return -1 end; return v`

func pingRedis(t *testing.T, addr, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis PING: %v", err)
	}
	key := prefix + "compose:eval"
	defer c.Del(context.Background(), key)
	for want := int64(1); want <= 2; want++ {
		got, err := c.Eval(ctx, incrScript, []string{key}, 5).Int64()
		if err != nil {
			t.Fatalf("redis EVAL: %v", err)
		}
		if got != want {
			t.Fatalf("EVAL = %d, want %d", got, want)
		}
	}
}

func pingKafkaRoundTrip(t *testing.T, brokers []string, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	val := testenv.RandomName("v-")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(val)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: %v", ctx.Err())
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume: %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == val {
				found = true
			}
		})
		if found {
			return
		}
	}
}

// connectMongo is a client of uri (the caller disconnects it).
func connectMongo(t *testing.T, ctx context.Context, uri string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(ctx, options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func pingMongo(t *testing.T, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := connectMongo(t, ctx, uri)
	defer cl.Disconnect(context.Background())
	dbName := testenv.RandomName("imlab_t_")
	coll := cl.Database(dbName).Collection("ping")
	defer cl.Database(dbName).Drop(context.Background())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "doc1"}, {Key: "n", Value: 42}}); err != nil {
		t.Fatalf("mongo insert: %v", err)
	}
	var got struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "doc1"}}).Decode(&got); err != nil {
		t.Fatalf("mongo find: %v", err)
	}
	if got.N != 42 {
		t.Fatalf("mongo find n = %d", got.N)
	}
}

// addrsOf lists the host:port addresses of b.
func addrsOf(t *testing.T, b *Backends) []string {
	t.Helper()
	c, err := mysql.ParseDSN(b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{c.Addr, b.RedisAddr}
	out = append(out, b.KafkaBrokers...)
	if b.MongoURI != "" {
		cs, err := url2host(b.MongoURI)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cs)
	}
	return out
}

func url2host(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		return "", errors.New("not a mongodb:// uri: " + uri)
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	return rest, nil
}

// assertReleased checks that each loopback address can be bound again and
// the run's temporary directory is gone.
func assertReleased(t *testing.T, b *Backends, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("backend address %s is not on 127.0.0.1", a)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("port %s still in use after stop: %v", a, err)
		}
		l.Close()
	}
	if b.root != "" {
		if _, err := os.Stat(b.root); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temp dir %s still there after stop (%v)", b.root, err)
		}
	}
}

func TestEmbedded(t *testing.T) {
	cfg := testConfig(t, ModeEmbedded)
	cfg.KafkaTopics = []string{"compose.ping"}
	cfg.KafkaPartitions = 4
	var logged testenv.LockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	b, stop := startT(t, cfg)
	// Warnings are returned for the caller to print, not also logged.
	for _, w := range b.Warnings {
		if strings.Contains(logged.String(), w) {
			t.Errorf("warning %q was also logged:\n%s", w, logged.String())
		}
	}
	if b.Mode != ModeEmbedded {
		t.Fatalf("Mode = %s", b.Mode)
	}
	for part, want := range map[string]string{
		PartMySQL: "embedded go-mysql-server", PartRedis: "embedded miniredis",
		PartKafka: "embedded kfake", PartMongo: "embedded ferretdb",
	} {
		if !strings.HasPrefix(b.Kinds[part], want) {
			t.Errorf("Kinds[%s] = %q, want prefix %q", part, b.Kinds[part], want)
		}
	}
	if strings.Join(b.Embedded, ",") != "kafka,mongo,mysql,redis" {
		t.Errorf("Embedded = %v", b.Embedded)
	}
	if len(b.Warnings) == 0 || !strings.Contains(strings.Join(b.Warnings, "\n"), "go-mysql-server") {
		t.Errorf("no embedded MySQL warning in %q", b.Warnings)
	}
	if !strings.Contains(b.Summary(), "mysql=embedded go-mysql-server") {
		t.Errorf("Summary = %q", b.Summary())
	}
	pingSQL(t, b.MySQLDSN, true)
	pingRedis(t, b.RedisAddr, "")
	pingKafkaRoundTrip(t, b.KafkaBrokers, "compose.ping")
	pingMongo(t, b.MongoURI)
	waitIDIndexed(t, b.MongoURI, filepath.Join(b.root, "ferretdb"))

	addrs := addrsOf(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	assertReleased(t, b, addrs)
}

// requireLocalBinaries skips (or, under CI, fails) when the server binaries
// are not installed.
func requireLocalBinaries(t *testing.T) {
	t.Helper()
	_, errM := findMySQLServer()
	_, errR := lookBinary("redis-server")
	if err := errors.Join(errM, errR); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("local mode needs the server binaries under CI: %v", err)
		}
		t.Skipf("local mode: %v", err)
	}
}

func TestLocal(t *testing.T) {
	requireLocalBinaries(t)
	cfg := testConfig(t, ModeLocal)
	cfg.WithKafka, cfg.WithMongo = false, false
	b, stop := startT(t, cfg)
	if b.Mode != ModeLocal {
		t.Fatalf("Mode = %s", b.Mode)
	}
	if !strings.HasPrefix(b.Kinds[PartMySQL], "local ") || !strings.HasPrefix(b.Kinds[PartRedis], "local redis-server ") {
		t.Fatalf("Kinds = %v", b.Kinds)
	}
	if len(b.Embedded) != 0 || len(b.KafkaBrokers) != 0 || b.MongoURI != "" {
		t.Fatalf("unexpected parts: %+v", b)
	}
	if b.root == "" || !strings.HasPrefix(b.root, cfg.DataDir) {
		t.Fatalf("temp dir %q not under %q", b.root, cfg.DataDir)
	}
	pingSQL(t, b.MySQLDSN, true)
	pingRedis(t, b.RedisAddr, "")

	addrs := addrsOf(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	assertReleased(t, b, addrs)
	if n := childProcesses(t); n != 0 {
		t.Fatalf("%d child processes left after stop", n)
	}
}

// childProcesses counts this process's live children.
func childProcesses(t *testing.T) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += len(strings.Fields(string(b)))
	}
	return n
}

// TestStartFailureStopsWhatStarted starts a private MySQL, then fails on an
// unreachable Redis: Start must stop the MySQL and remove its directory.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	requireLocalBinaries(t)
	cfg := testConfig(t, ModeAuto)
	cfg.WithKafka, cfg.WithMongo = false, false
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg.RedisAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) // nothing listens there
	cfg.StartTimeout = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, stop, err := Start(ctx, cfg)
	if err == nil {
		_ = stop(ctx)
		t.Fatal("Start succeeded against a closed Redis port")
	}
	if !errors.Is(err, ErrUnavailable) || b != nil || stop != nil {
		t.Fatalf("Start = %v, %v; want nil and ErrUnavailable", b, err)
	}
	entries, rerr := os.ReadDir(cfg.DataDir)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(entries) != 0 {
		t.Fatalf("data dir not cleaned after failed Start: %v", entries)
	}
	if n := childProcesses(t); n != 0 {
		t.Fatalf("%d child processes left after failed Start", n)
	}
}

// TestExternal points every part at servers started outside Start: the
// machine's MariaDB and Redis (through testenv) and, as stand-ins for an
// external Kafka and MongoDB, the in-process ones of an embedded run.
func TestExternal(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	emb := testConfig(t, ModeEmbedded)
	eb, _ := startT(t, emb)

	cfg := testConfig(t, ModeAuto) // auto with every address given = external
	cfg.MySQLDSN = my.DSN
	cfg.RedisAddr = rd.Addr
	cfg.KafkaBrokers = eb.KafkaBrokers
	cfg.MongoURI = eb.MongoURI
	b, stop := startT(t, cfg)
	if b.Mode != ModeExternal {
		t.Fatalf("Mode = %s", b.Mode)
	}
	for _, p := range []string{PartMySQL, PartRedis, PartKafka, PartMongo} {
		if !strings.HasPrefix(b.Kinds[p], "external ") {
			t.Errorf("Kinds[%s] = %q", p, b.Kinds[p])
		}
	}
	if len(b.Embedded) != 0 || b.root != "" {
		t.Fatalf("external run embedded %v / made temp dir %q", b.Embedded, b.root)
	}
	c, err := mysql.ParseDSN(b.MySQLDSN)
	if err != nil || c.DBName != my.Name {
		t.Fatalf("DSN %s: database %q, want %q (%v)", b.MySQLDSN, c.DBName, my.Name, err)
	}
	pingSQL(t, b.MySQLDSN, false)
	pingRedis(t, b.RedisAddr, rd.Keys.Prefix)
	pingKafkaRoundTrip(t, b.KafkaBrokers, "compose.external")
	pingMongo(t, b.MongoURI)
	if err := stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// Stopping an external run leaves the servers up.
	if err := my.DB.Ping(); err != nil {
		t.Fatalf("external MySQL down after stop: %v", err)
	}
	if err := rd.Client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("external Redis down after stop: %v", err)
	}
}

// TestExternalCreatesDatabase: a DSN naming a missing database gets it
// created (a DSN naming none would get "imlab", which this test leaves alone
// on the shared server).
func TestExternalCreatesDatabase(t *testing.T) {
	my := testenv.NewMySQL(t) // skips (or fails under CI) without MariaDB
	rd := testenv.NewRedis(t)
	name := testenv.RandomName("imlab_t_")
	dsn, err := testenv.DSN(testenv.MySQLBaseDSN(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = my.DB.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg := testConfig(t, ModeExternal)
	cfg.WithKafka, cfg.WithMongo = false, false
	cfg.MySQLDSN, cfg.RedisAddr = dsn, rd.Addr
	b, stop := startT(t, cfg)
	defer stop(context.Background())
	var got string
	if err := my.DB.QueryRow("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&got); err != nil {
		t.Fatalf("database %s not created: %v", name, err)
	}
	if !strings.Contains(b.Kinds[PartMySQL], "mariadb") && !strings.Contains(b.Kinds[PartMySQL], "mysql") {
		t.Fatalf("Kinds[mysql] = %q", b.Kinds[PartMySQL])
	}
}

// TestAutoFallsBackWhenLocalFails puts server binaries on PATH that cannot
// start: auto mode must warn and serve both parts embedded, leaving no
// process behind.
func TestAutoFallsBackWhenLocalFails(t *testing.T) {
	bin := t.TempDir()
	scripts := map[string]string{
		"mariadbd":           "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'mariadbd  Ver 10.11.0-MariaDB for test'; exit 0; fi\necho 'refusing to start' >&2\nexit 1\n",
		"mariadb-install-db": "#!/bin/sh\nexit 0\n",
		"redis-server":       "#!/bin/sh\necho 'refusing to start'\nexit 1\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cfg := testConfig(t, ModeAuto)
	cfg.WithKafka, cfg.WithMongo = false, false
	b, stop := startT(t, cfg)
	if b.Mode != ModeEmbedded || !strings.HasPrefix(b.Kinds[PartMySQL], "embedded ") || !strings.HasPrefix(b.Kinds[PartRedis], "embedded ") {
		t.Fatalf("Mode %s Kinds %v", b.Mode, b.Kinds)
	}
	w := strings.Join(b.Warnings, "\n")
	if !strings.Contains(w, "local MySQL did not start") || !strings.Contains(w, "local Redis did not start") {
		t.Fatalf("warnings %q", w)
	}
	if len(b.Fallbacks) != 2 || !strings.Contains(b.Summary(), "(fallback: ") {
		t.Fatalf("fallbacks %q, summary %q", b.Fallbacks, b.Summary())
	}
	pingSQL(t, b.MySQLDSN, false)
	pingRedis(t, b.RedisAddr, "")
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := childProcesses(t); n != 0 {
		t.Fatalf("%d child processes left", n)
	}
}
