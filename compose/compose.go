// Package compose owns the backend topology of imlab: where MySQL, Redis,
// Kafka and MongoDB come from for one run, and the lifetime of every one it
// starts.
//
// Four modes, chosen per part:
//   - external: servers somebody else runs (the machine's MariaDB and Redis,
//     docker-compose.yml beside this file, a staging cluster), reached at the
//     DSN/addresses given in Config.
//   - local: private instances of the real server binaries found on PATH
//     (mariadbd or mysqld, redis-server), in a temporary directory on free
//     loopback ports, stopped and removed by the stop function.
//   - embedded: in-process stand-ins that speak the real wire protocols
//     (go-mysql-server's memory engine, miniredis), for a machine that has
//     only Go. They are for correctness demos: much slower, and every figure
//     must say it came from them (Backends.Kinds, Backends.Summary). Where
//     the memory engine's semantics differ from MySQL's in a way the
//     reference server relies on, the embedded MySQL (package compose/gms)
//     makes it answer as MySQL does: one transaction at a time (it takes no
//     row locks), the indexes of the tables a transaction wrote rebuilt
//     when it ends without COMMIT (a rollback left them pointing at other
//     rows), and error 1062 naming its key.
//   - auto: per part, external if an address is given, else local if the
//     binary is on PATH, else embedded; a local server that fails to start
//     falls back to embedded, with a warning and its cause in one line
//     (Backends.Fallbacks, said by Backends.Summary).
//
// Kafka and MongoDB have no local mode: unless an address is given they run
// in-process (franz-go's kfake cluster, FerretDB v1 with its SQLite handler),
// FerretDB in a child process at a lower scheduling priority when
// Config.MongoCommand names one (imlab does), so that the slow history store
// lags instead of taking CPU from the send path. Every client reaches every
// backend over TCP on loopback.
//
// Every private process (mariadbd, redis-server, the FerretDB child) gets
// SIGTERM from the kernel when the process that started it dies, however it
// dies; the FerretDB child also exits when its stdin (a pipe from the
// parent) closes.
//
// compose only starts, checks and stops servers and creates the empty
// database; it must not apply the schema or touch application data, and it
// must not decide how the reference server uses the backends (ref/server does).
package compose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Modes accepted by Config.Mode.
const (
	ModeAuto     = "auto"
	ModeExternal = "external"
	ModeLocal    = "local"
	ModeEmbedded = "embedded"
)

// Environment variables read by Config.ApplyEnv.
const (
	EnvBackends        = "IMLAB_BACKENDS"
	EnvMySQLDSN        = "IMLAB_MYSQL_DSN"
	EnvRedisAddr       = "IMLAB_REDIS_ADDR"
	EnvKafkaBrokers    = "IMLAB_KAFKA_BROKERS"
	EnvMongoURI        = "IMLAB_MONGO_URI"
	EnvDataDir         = "IMLAB_DATA_DIR"
	EnvKafkaPartitions = "IMLAB_KAFKA_PARTITIONS"
	EnvMongoNice       = "IMLAB_MONGO_NICE"
)

// Named limits.
const (
	// DefaultDatabase is the database created when the MySQL DSN names none.
	DefaultDatabase = "imlab"
	// DefaultKafkaPartitions is the partition count of topics an in-process
	// Kafka creates automatically.
	DefaultKafkaPartitions = 16
	// MaxKafkaPartitions bounds KafkaPartitions.
	MaxKafkaPartitions = 1024
	// DefaultStartTimeout bounds how long Start waits for one backend to
	// answer.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout bounds how long a private server gets to exit after
	// SIGTERM before it is killed.
	DefaultStopTimeout = 30 * time.Second
	// DefaultEmbeddedLockWait is the embedded MySQL's lock wait timeout.
	DefaultEmbeddedLockWait = 20 * time.Second
	// DefaultMongoNice is the nice value of an embedded FerretDB run as a
	// child process (Config.MongoCommand): it gets the CPU the server
	// leaves over, so a slow history store lags instead of starving sends.
	DefaultMongoNice = 10
	// MaxNice is the largest nice value (the lowest priority) on Linux.
	MaxNice = 19
)

// Part names used as keys of Backends.Kinds.
const (
	PartMySQL = "mysql"
	PartRedis = "redis"
	PartKafka = "kafka"
	PartMongo = "mongo"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("compose: invalid config")

// ErrUnavailable is wrapped when a required backend cannot be started or
// reached.
var ErrUnavailable = errors.New("compose: backend unavailable")

// Config says which backends to use. The zero value is not valid: start from
// DefaultConfig.
type Config struct {
	Mode string // auto|external|local|embedded

	MySQLDSN string // go-sql-driver DSN; the database defaults to "imlab"
	// MySQLNoCreate: an external MySQL is only checked, the DSN's database
	// is not created (the caller makes databases of its own on that
	// server). Backends.MySQLDSN still names it.
	MySQLNoCreate bool
	RedisAddr     string   // host:port
	KafkaBrokers  []string // host:port seed brokers
	MongoURI      string   // mongodb://...

	WithKafka bool // start or check Kafka
	WithMongo bool // start or check MongoDB

	// KafkaPartitions is the partition count an in-process Kafka gives to
	// topics it creates on first use (seeded or auto-created).
	KafkaPartitions int
	// KafkaTopics are created up front by an in-process Kafka.
	KafkaTopics []string

	// DataDir is the parent of the temporary directories of private
	// instances (local servers, FerretDB's SQLite files). Empty means the
	// system temporary directory. Everything created under it is removed
	// by the stop function.
	DataDir string

	StartTimeout time.Duration // per backend
	StopTimeout  time.Duration // per private server process

	// EmbeddedLockWait bounds how long a statement waits for the embedded
	// MySQL's engine lock (it runs one transaction at a time) before it
	// fails with error 1205, lock wait timeout.
	EmbeddedLockWait time.Duration

	// MongoCommand, when set, runs the embedded FerretDB in a child process
	// instead of in this one: the command (e.g. {"/path/to/imlab",
	// "internal", "ferretdb"}) gets the data directory as its last argument
	// and must call ServeEmbeddedMongo. Empty: FerretDB runs in-process and
	// competes with everything here for the CPUs.
	MongoCommand []string
	// MongoNice is the child's nice value, 0..MaxNice ($IMLAB_MONGO_NICE).
	MongoNice int

	Logger *slog.Logger // nil: discard
}

// DefaultConfig is auto mode with Kafka and MongoDB, nothing external.
func DefaultConfig() Config {
	return Config{
		Mode:            ModeAuto,
		WithKafka:       true,
		WithMongo:       true,
		KafkaPartitions: DefaultKafkaPartitions,
		StartTimeout:    DefaultStartTimeout,
		StopTimeout:     DefaultStopTimeout,

		EmbeddedLockWait: DefaultEmbeddedLockWait,
		MongoNice:        DefaultMongoNice,
	}
}

// ApplyEnv overrides fields from the IMLAB_* environment variables that are
// set (lookup is usually os.LookupEnv). Flags should be applied after it so
// they win.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	if v, ok := lookup(EnvBackends); ok && v != "" {
		c.Mode = v
	}
	if v, ok := lookup(EnvMySQLDSN); ok && v != "" {
		c.MySQLDSN = v
	}
	if v, ok := lookup(EnvRedisAddr); ok && v != "" {
		c.RedisAddr = v
	}
	if v, ok := lookup(EnvKafkaBrokers); ok && v != "" {
		c.KafkaBrokers = SplitList(v)
	}
	if v, ok := lookup(EnvMongoURI); ok && v != "" {
		c.MongoURI = v
	}
	if v, ok := lookup(EnvDataDir); ok && v != "" {
		c.DataDir = v
	}
	if v, ok := lookup(EnvKafkaPartitions); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrConfig, EnvKafkaPartitions, v, err)
		}
		c.KafkaPartitions = n
	}
	if v, ok := lookup(EnvMongoNice); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrConfig, EnvMongoNice, v, err)
		}
		c.MongoNice = n
	}
	return nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks the config without touching the network.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeAuto, ModeExternal, ModeLocal, ModeEmbedded:
	default:
		return fmt.Errorf("%w: mode %q (want auto, external, local or embedded)", ErrConfig, c.Mode)
	}
	if c.Mode == ModeExternal {
		var missing []string
		if c.MySQLDSN == "" {
			missing = append(missing, "MySQL DSN ("+EnvMySQLDSN+")")
		}
		if c.RedisAddr == "" {
			missing = append(missing, "Redis address ("+EnvRedisAddr+")")
		}
		if c.WithKafka && len(c.KafkaBrokers) == 0 {
			missing = append(missing, "Kafka brokers ("+EnvKafkaBrokers+")")
		}
		if c.WithMongo && c.MongoURI == "" {
			missing = append(missing, "MongoDB URI ("+EnvMongoURI+")")
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: external mode needs %s", ErrConfig, strings.Join(missing, ", "))
		}
	}
	if (c.Mode == ModeLocal || c.Mode == ModeEmbedded) && (c.MySQLDSN != "" || c.RedisAddr != "") {
		return fmt.Errorf("%w: %s mode starts its own MySQL and Redis; drop the MySQL DSN / Redis address or use auto/external", ErrConfig, c.Mode)
	}
	if c.MySQLDSN != "" {
		if _, err := mysqlConfig(c.MySQLDSN); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if c.RedisAddr != "" && !strings.Contains(c.RedisAddr, ":") {
		return fmt.Errorf("%w: Redis address %q is not host:port", ErrConfig, c.RedisAddr)
	}
	for _, b := range c.KafkaBrokers {
		if !strings.Contains(b, ":") {
			return fmt.Errorf("%w: Kafka broker %q is not host:port", ErrConfig, b)
		}
	}
	if c.MongoURI != "" && !strings.HasPrefix(c.MongoURI, "mongodb://") && !strings.HasPrefix(c.MongoURI, "mongodb+srv://") {
		return fmt.Errorf("%w: MongoDB URI %q must start with mongodb:// or mongodb+srv://", ErrConfig, c.MongoURI)
	}
	if c.KafkaPartitions < 1 || c.KafkaPartitions > MaxKafkaPartitions {
		return fmt.Errorf("%w: Kafka partitions %d not in [1, %d]", ErrConfig, c.KafkaPartitions, MaxKafkaPartitions)
	}
	for _, t := range c.KafkaTopics {
		if t == "" {
			return fmt.Errorf("%w: empty Kafka topic name", ErrConfig)
		}
	}
	if c.DataDir != "" {
		st, err := os.Stat(c.DataDir)
		if err != nil {
			return fmt.Errorf("%w: data dir: %v", ErrConfig, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("%w: data dir %s is not a directory", ErrConfig, c.DataDir)
		}
	}
	if c.MongoNice < 0 || c.MongoNice > MaxNice {
		return fmt.Errorf("%w: MongoDB nice %d not in [0, %d]", ErrConfig, c.MongoNice, MaxNice)
	}
	if c.StartTimeout <= 0 || c.StopTimeout <= 0 || c.EmbeddedLockWait <= 0 {
		return fmt.Errorf("%w: start, stop and lock wait timeouts must be positive", ErrConfig)
	}
	return nil
}

// Backends is where the started (or checked) backends are.
type Backends struct {
	// Mode is the mode MySQL and Redis ended up in ("external", "local",
	// "embedded"), or "mixed" when they differ.
	Mode string

	// MySQLDSN names the database and carries
	// parseTime=true&loc=UTC&interpolateParams=true.
	MySQLDSN     string
	RedisAddr    string
	KafkaBrokers []string // empty when Kafka was not requested
	MongoURI     string   // empty when MongoDB was not requested

	// Kinds says, per part ("mysql", "redis", "kafka", "mongo"), what serves
	// it, e.g. "external mariadb 10.11.19-MariaDB", "local mariadbd
	// 10.11.19-MariaDB", "embedded go-mysql-server v0.20.0".
	Kinds map[string]string

	// Warnings are for the operator: slow stand-ins, fallbacks taken.
	// compose does not log them: the caller prints each one once.
	Warnings []string

	// Fallbacks are the parts (auto mode) served embedded because their
	// local server was not found or did not start, each with the cause in
	// one line; Summary shows them.
	Fallbacks map[string]string

	// Embedded lists the parts served by in-process stand-ins.
	Embedded []string

	// PIDs are the private processes' pids by part (local mode: "mysql",
	// "redis"), for a caller that reads their CPU; a part served by
	// anything else has none.
	PIDs map[string]int

	root             string   // temporary directory of this run ("" when none)
	fallbackWarnings []string // the Warnings that say a part fell back
}

// Summary is a one-line description of the backends, to print beside every
// figure: "mysql=local mariadbd 10.11.19-MariaDB; redis=..."; a part that
// fell back to embedded says so with its cause: "mysql=embedded
// go-mysql-server v0.20.0 (fallback: CAUSE)".
func (b *Backends) Summary() string {
	parts := make([]string, 0, len(b.Kinds))
	for k := range b.Kinds {
		parts = append(parts, k)
	}
	order := map[string]int{PartMySQL: 0, PartRedis: 1, PartKafka: 2, PartMongo: 3}
	sort.Slice(parts, func(i, j int) bool { return order[parts[i]] < order[parts[j]] })
	var sb strings.Builder
	for i, p := range parts {
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p)
		sb.WriteString("=")
		sb.WriteString(b.Kinds[p])
		if c, ok := b.Fallbacks[p]; ok {
			sb.WriteString(" (fallback: " + c + ")")
		}
	}
	return sb.String()
}

// stopper runs cleanup functions in reverse order of registration.
type stopper struct {
	mu   sync.Mutex
	fns  []namedStop
	once sync.Once
	err  error
	log  *slog.Logger
}

type namedStop struct {
	name string
	fn   func(context.Context) error
}

func (s *stopper) add(name string, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fns = append(s.fns, namedStop{name, fn})
}

// stop runs every cleanup once, newest first, and joins their errors. A
// cleanup that exceeds ctx still runs to its own bound: processes are
// killed, never abandoned.
func (s *stopper) stop(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		fns := s.fns
		s.fns = nil
		s.mu.Unlock()
		var errs []error
		for i := len(fns) - 1; i >= 0; i-- {
			if err := fns[i].fn(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", fns[i].name, err))
			} else {
				s.log.Debug("compose: stopped", "what", fns[i].name)
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Start resolves cfg into running backends. The returned stop function stops
// everything Start started (processes, in-process servers, goroutines) and
// removes the temporary directories; it is safe to call more than once.
// On error, everything already started is stopped before Start returns.
func Start(ctx context.Context, cfg Config) (b *Backends, stop func(context.Context) error, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = discardLogger()
	}
	st := &stopper{log: log}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.StopTimeout+10*time.Second)
			defer cancel()
			if serr := st.stop(sctx); serr != nil {
				err = errors.Join(err, serr)
			}
			b, stop = nil, nil
		}
	}()

	b = &Backends{Kinds: map[string]string{}, PIDs: map[string]int{}}
	r := &run{cfg: cfg, log: log, st: st, b: b}

	mysqlMode, redisMode := r.resolveMySQL(), r.resolveRedis()
	needRoot := mysqlMode == ModeLocal || redisMode == ModeLocal || (cfg.WithMongo && cfg.MongoURI == "")
	if needRoot {
		if err := r.makeRoot(); err != nil {
			return nil, nil, err
		}
	}

	switch mysqlMode {
	case ModeExternal:
		err = r.externalMySQL(ctx)
	case ModeLocal:
		err = r.localMySQL(ctx)
		if err != nil && cfg.Mode == ModeAuto && ctx.Err() == nil {
			r.fallBack(PartMySQL, "local MySQL did not start; MySQL", "go-mysql-server", fallbackCause(err))
			mysqlMode = ModeEmbedded
			err = r.embeddedMySQL(ctx)
		}
	default:
		err = r.embeddedMySQL(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	switch redisMode {
	case ModeExternal:
		err = r.externalRedis(ctx)
	case ModeLocal:
		err = r.localRedis(ctx)
		if err != nil && cfg.Mode == ModeAuto && ctx.Err() == nil {
			r.fallBack(PartRedis, "local Redis did not start; Redis", "miniredis", fallbackCause(err))
			redisMode = ModeEmbedded
			err = r.embeddedRedis(ctx)
		}
	default:
		err = r.embeddedRedis(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	if cfg.WithKafka {
		if len(cfg.KafkaBrokers) > 0 {
			err = r.externalKafka(ctx)
		} else {
			err = r.embeddedKafka(ctx)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if cfg.WithMongo {
		if cfg.MongoURI != "" {
			err = r.externalMongo(ctx)
		} else {
			err = r.embeddedMongo(ctx)
		}
		if err != nil {
			return nil, nil, err
		}
	}

	if mysqlMode == redisMode {
		b.Mode = mysqlMode
	} else {
		b.Mode = "mixed"
	}
	sort.Strings(b.Embedded)
	log.Info("compose: backends ready", "summary", b.Summary())
	return b, st.stop, nil
}

// run is the state of one Start call.
type run struct {
	cfg Config
	log *slog.Logger
	st  *stopper
	b   *Backends
}

// warn records an operator warning in Backends.Warnings; the caller shows
// them (once: compose does not also log them).
func (r *run) warn(msg string) {
	r.b.Warnings = append(r.b.Warnings, msg)
	r.log.Debug("compose: warning recorded", "warning", msg)
}

func (r *run) makeRoot() error {
	dir, err := os.MkdirTemp(r.cfg.DataDir, "imlab-backends-")
	if err != nil {
		return fmt.Errorf("%w: temp dir: %v", ErrUnavailable, err)
	}
	r.b.root = dir
	r.st.add("temp dir "+dir, func(context.Context) error { return os.RemoveAll(dir) })
	return nil
}

// resolveMySQL picks the MySQL mode for this run.
func (r *run) resolveMySQL() string {
	switch r.cfg.Mode {
	case ModeExternal, ModeLocal, ModeEmbedded:
		return r.cfg.Mode
	}
	if r.cfg.MySQLDSN != "" {
		return ModeExternal
	}
	if _, err := findMySQLServer(); err == nil {
		return ModeLocal
	}
	r.fallBack(PartMySQL, "MySQL", "go-mysql-server", "no mariadbd or mysqld on PATH")
	return ModeEmbedded
}

// resolveRedis picks the Redis mode for this run.
func (r *run) resolveRedis() string {
	switch r.cfg.Mode {
	case ModeExternal, ModeLocal, ModeEmbedded:
		return r.cfg.Mode
	}
	if r.cfg.RedisAddr != "" {
		return ModeExternal
	}
	if _, err := lookBinary("redis-server"); err == nil {
		return ModeLocal
	}
	r.fallBack(PartRedis, "Redis", "miniredis", "no redis-server on PATH")
	return ModeEmbedded
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// waitFor calls probe until it succeeds, ctx ends, or timeout passes.
// exited, when non-nil, is closed if the server being waited for died.
func waitFor(ctx context.Context, timeout time.Duration, exited <-chan struct{}, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 20 * time.Millisecond
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := probe(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("not ready after %s: %w (last error: %v)", timeout, ctx.Err(), err)
		case <-exited:
			t.Stop()
			return fmt.Errorf("process exited before it was ready (last error: %v)", err)
		case <-t.C:
		}
		if delay < 500*time.Millisecond {
			delay *= 2
		}
	}
}
