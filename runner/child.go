package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"imlab/ref/server"
	"imlab/scenario"
)

// Named limits of the child protocol.
const (
	// MaxChildLine bounds the spec line a child reads from stdin and the
	// ready line it prints on stdout.
	MaxChildLine = 64 << 10
	// MaxRunIDLen bounds ChildSpec.RunID.
	MaxRunIDLen = 32
	// MaxRedisPrefixLen bounds a Redis key prefix (runner and child).
	MaxRedisPrefixLen = 64
	// MinSecretLen is the shortest token secret the runner accepts.
	MinSecretLen = 16
)

// ChildSpec describes one server process run out of process: the runner
// writes it as one line of JSON to the stdin of Config.ChildCommand, and
// ChildMain builds the process's server.Config from it with the same
// function the runner uses for in-process processes.
type ChildSpec struct {
	// Server is the scenario's server section (its processes list is not
	// used: Process is this one).
	Server  scenario.ServerSpec  `json:"server"`
	Process scenario.ProcessSpec `json:"process"`
	// Node is the send path's node id (the msg_id node bits): the
	// process's 1-based position in server.processes.
	Node uint16 `json:"node"`
	// Migrate applies the schema at start (the first process's first start).
	Migrate bool `json:"migrate"`
	// Listen is the process's API or ops address ("127.0.0.1:0" the first
	// time; a restart listens where the first start did).
	Listen string `json:"listen"`
	// Secret signs and verifies the tokens.
	Secret string `json:"secret"`
	// RedisPrefix is the run's key prefix.
	RedisPrefix string `json:"redis_prefix"`
	// RunID names the run's Kafka topic, relay lock and MongoDB database.
	RunID string `json:"run_id"`
	// Partitions of the fan-out topic.
	Partitions int `json:"partitions"`
	// PushBus: the scenario has more than one process, so commits reach the
	// api process's devices over the Redis push bus.
	PushBus bool `json:"push_bus"`
	// Backends are what the process must use: the proxies' addresses.
	Backends ChildBackends `json:"backends"`
	// Defects are shipped defects to put into the process (the runner's
	// Config.Defects; lab only): ref/server's ParseDefects names.
	Defects []string `json:"defects,omitempty"`
	// Pprof, when set, serves net/http/pprof on this loopback host:port
	// (server.Config.PprofListen): profiling a process during a run.
	Pprof string `json:"pprof,omitempty"`
}

// ChildBackends are server.Backends in the child protocol.
type ChildBackends struct {
	MySQLDSN     string   `json:"mysql_dsn"`
	RedisAddr    string   `json:"redis_addr"`
	KafkaBrokers []string `json:"kafka_brokers,omitempty"`
	MongoURI     string   `json:"mongo_uri,omitempty"`
}

func childBackends(b server.Backends) ChildBackends {
	return ChildBackends{MySQLDSN: b.MySQLDSN, RedisAddr: b.RedisAddr, KafkaBrokers: b.KafkaBrokers, MongoURI: b.MongoURI}
}

func (b ChildBackends) server() server.Backends {
	return server.Backends{MySQLDSN: b.MySQLDSN, RedisAddr: b.RedisAddr, KafkaBrokers: b.KafkaBrokers, MongoURI: b.MongoURI}
}

var runIDRE = regexp.MustCompile(`^[0-9a-z]+$`)

// Validate checks a spec before anything is started.
func (c ChildSpec) Validate() error {
	if err := c.Server.Validate(); err != nil {
		return err
	}
	if len(c.Server.Processes) > 0 {
		return scenario.Bad("server.processes", "a child runs one process: give it as process")
	}
	if err := c.Process.Validate("process", c.Server.History); err != nil {
		return err
	}
	if c.Node < 1 || c.Node > scenario.MaxProcesses {
		return scenario.Bad("node", "%d: want 1..%d", c.Node, scenario.MaxProcesses)
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return scenario.Bad("listen", "%q: %v", c.Listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return scenario.Bad("listen", "%q: want a loopback IP address", c.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return scenario.Bad("listen", "%q: bad port", c.Listen)
	}
	if len(c.Secret) < MinSecretLen {
		return scenario.Bad("secret", "at least %d bytes", MinSecretLen)
	}
	if _, err := server.ParseDefects(c.Defects...); err != nil {
		return scenario.Bad("defects", "%v", err)
	}
	if err := validPrefix(c.RedisPrefix); err != nil {
		return scenario.Bad("redis_prefix", "%v", err)
	}
	if c.Pprof != "" {
		if h, _, err := net.SplitHostPort(c.Pprof); err != nil || net.ParseIP(h) == nil || !net.ParseIP(h).IsLoopback() {
			return scenario.Bad("pprof", "%q: want a loopback IP host:port", c.Pprof)
		}
	}
	if !runIDRE.MatchString(c.RunID) || len(c.RunID) > MaxRunIDLen {
		return scenario.Bad("run_id", "%q: want 1..%d lower-case letters and digits", c.RunID, MaxRunIDLen)
	}
	if c.Partitions < scenario.MinKafkaPartitions || c.Partitions > scenario.MaxKafkaPartitions {
		return scenario.Bad("partitions", "%d: want %d..%d", c.Partitions, scenario.MinKafkaPartitions, scenario.MaxKafkaPartitions)
	}
	if c.Backends.MySQLDSN == "" || c.Backends.RedisAddr == "" {
		return scenario.Bad("backends", "a MySQL DSN and a Redis address are required")
	}
	if _, err := mysqlAddr(c.Backends.MySQLDSN); err != nil {
		return scenario.Bad("backends.mysql_dsn", "%v", err)
	}
	return nil
}

// validPrefix checks a Redis key prefix ("" allowed).
func validPrefix(p string) error {
	if len(p) > MaxRedisPrefixLen || strings.ContainsAny(p, "*?[] ") {
		return fmt.Errorf("%q: at most %d bytes, no glob characters or spaces", p, MaxRedisPrefixLen)
	}
	return nil
}

// Names the run's Kafka topic, relay lock and databases (the fresh MySQL
// database and the MongoDB one) get from the run id.
func topicOf(runID string) string { return "imlab.scn." + runID }

func relayLockOf(runID string) string { return "imlab_relay_" + runID }

func databaseOf(runID string) string { return "imlab_scn_" + runID }

// serverConfig is one process's server.Config. Both the in-process path
// and ChildMain build it here.
func serverConfig(c ChildSpec, log *slog.Logger) server.Config {
	s := c.Server
	cfg := server.DefaultConfig()
	cfg.Listen = c.Listen
	cfg.Roles = append([]string(nil), c.Process.Roles...)
	cfg.Allocator = scenario.Or(s.Allocator, scenario.DefaultAllocator)
	cfg.Migrate = c.Migrate
	cfg.ShutdownTimeout = StopTimeout
	cfg.Auth.Secret = c.Secret
	cfg.Redis.KeyPrefix = c.RedisPrefix
	cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 32, 32
	cfg.Send.Policy = s.PolicyOr()
	cfg.Send.Node = c.Node
	cfg.LabRoutes = true // the store witness and read-after-ACK probe need them
	cfg.Pull.RateLimit = s.PullRateLimit
	if cfg.Pull.RateLimit == 0 {
		cfg.Pull.RateLimit = scenario.DefaultPullRateLimit
	}
	cfg.Pull.RateBurst = int(cfg.Pull.RateLimit)
	if s.UnreadThreshold > 0 {
		cfg.Pull.UnreadThreshold = s.UnreadThreshold
	}
	if s.TruncatedLatest > 0 {
		cfg.Pull.TruncatedLatest = s.TruncatedLatest
	}
	cfg.API.WS.CloseGrace = 200 * time.Millisecond
	topic := topicOf(c.RunID)
	cfg.Fanout.Dedup = scenario.Or(s.Dedup, scenario.DefaultDedup)
	cfg.Fanout.Topics.Fanout = topic
	cfg.Fanout.Topics.DLQ = topic + ".dlq"
	cfg.Fanout.Topics.Partitions = int32(c.Partitions)
	cfg.Fanout.Relay.LockName = relayLockOf(c.RunID)
	cfg.Fanout.Monitor.Interval = 500 * time.Millisecond
	cfg.Fanout.Consumer.SessionTimeout = ConsumerSessionTimeout
	cfg.Fanout.Producer.DeliveryTimeout = scenario.DefaultDeliveryTimeout
	if s.DeliveryTimeout > 0 {
		cfg.Fanout.Producer.DeliveryTimeout = s.DeliveryTimeout.D()
	}
	cfg.Reconcile.Interval = scenario.DefaultReconcileInterval
	if s.ReconcileInterval > 0 {
		cfg.Reconcile.Interval = s.ReconcileInterval.D()
	}
	cfg.Reconcile.Grace = scenario.DefaultReconcileGrace
	if s.ReconcileGrace > 0 {
		cfg.Reconcile.Grace = s.ReconcileGrace.D()
	}
	if w := s.LabTransientWindow; w != 0 {
		_ = server.LabTransientWindow(&cfg, w.D()) // checked by Validate
	}
	if r := s.LabRetention; r != nil {
		_ = server.LabRetention(&cfg, r.MaxAge.D(), r.PulledMinAge.D(), r.Interval.D()) // checked by Validate
	}
	cfg.Mongo.Database = databaseOf(c.RunID)
	cfg.Defects, _ = server.ParseDefects(c.Defects...) // checked by Validate
	cfg.PprofListen = c.Pprof
	if c.PushBus {
		cfg.PushBus.Mode = "redis"
	}
	cfg.Logger = log
	return cfg
}

// childReady is the one line a child prints on stdout: where it serves,
// or why it could not start.
type childReady struct {
	PID     int    `json:"pid,omitempty"`
	Addr    string `json:"addr,omitempty"`
	APIAddr string `json:"api_addr,omitempty"`
	Error   string `json:"error,omitempty"`
	// AddrInUse: the listen address is still taken (a restart retries).
	AddrInUse bool `json:"addr_in_use,omitempty"`
}

// errAddrInUse is wrapped by a child start that failed because its listen
// address was still taken.
var errAddrInUse = errors.New("listen address in use")

// ChildMain runs one server process from the ChildSpec on the first line
// of stdin: it builds the config (serverConfig, as in process), starts the
// process with ref/server's default roles, prints one JSON line on stdout
// ({"pid","addr","api_addr"}: addr serves /metrics and GET /v1/lab/lag,
// api_addr the contract when the process runs the api role) and runs until
// ctx ends (the caller cancels it on SIGTERM) or stdin ends; then it stops
// the process gracefully within StopTimeout. Logs go to logw.
//
// A spec that cannot be read or is invalid, or a start that fails, prints
// {"error": ..., "addr_in_use": bool} instead and returns the error:
// nothing keeps running. The goroutine that watches stdin is joined before
// ChildMain returns: stdin is closed for that (an *os.File is made
// pollable first so that closing it ends a pending read).
func ChildMain(ctx context.Context, stdin io.ReadCloser, stdout, logw io.Writer) (err error) {
	fail := func(err error) error {
		ready := childReady{Error: err.Error(), AddrInUse: errors.Is(err, syscall.EADDRINUSE)}
		if werr := writeReady(stdout, ready); werr != nil {
			err = errors.Join(err, werr)
		}
		return err
	}
	if f, ok := stdin.(*os.File); ok {
		pf, restore, err := pollable(f)
		if err != nil {
			return fail(err)
		}
		defer restore()
		stdin = pf
	}
	defer stdin.Close()
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	br := bufio.NewReaderSize(stdin, MaxChildLine)
	spec, err := readChildSpec(br)
	if err != nil {
		return fail(err)
	}
	log.Info("scenarios: child starting", "process", spec.Process.Name, "roles", strings.Join(spec.Process.Roles, ","), "listen", spec.Listen)
	cfg := serverConfig(spec, log)
	p, err := server.Start(ctx, cfg, spec.Backends.server(), server.DefaultRoles())
	if err != nil {
		return fail(fmt.Errorf("scenarios: child %s: start: %w", spec.Process.Name, err))
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		serr := p.Stop(sctx)
		log.Info("scenarios: child stopped", "process", spec.Process.Name, "err", serr)
		if serr != nil {
			err = errors.Join(err, fmt.Errorf("scenarios: child %s: stop: %w", spec.Process.Name, serr))
		}
	}()
	ready := childReady{PID: os.Getpid(), Addr: p.Addr().String()}
	if a := p.APIAddr(); a != nil {
		ready.APIAddr = a.String()
	}
	if err := writeReady(stdout, ready); err != nil {
		return err
	}
	log.Info("scenarios: child ready", "process", spec.Process.Name, "pid", ready.PID, "addr", ready.Addr)

	// The watcher is owned here: it ends when stdin ends or is closed
	// (below), and is joined before returning.
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, br)
	}()
	select {
	case <-ctx.Done():
		log.Info("scenarios: child stopping: signalled", "process", spec.Process.Name)
	case <-ended:
		log.Info("scenarios: child stopping: stdin closed", "process", spec.Process.Name)
	}
	_ = stdin.Close()
	<-ended
	return nil
}

// readChildSpec reads and validates the spec line.
func readChildSpec(br *bufio.Reader) (ChildSpec, error) {
	var spec ChildSpec
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return spec, fmt.Errorf("%w: child spec on stdin: longer than %d bytes", scenario.ErrInvalid, MaxChildLine)
	case err != nil && !errors.Is(err, io.EOF):
		return spec, fmt.Errorf("scenarios: child spec on stdin: %w", err)
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return spec, fmt.Errorf("%w: child spec on stdin: empty (want one line of JSON, a ChildSpec)", scenario.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("%w: child spec on stdin: not a ChildSpec JSON line: %v", scenario.ErrInvalid, err)
	}
	if dec.More() {
		return spec, fmt.Errorf("%w: child spec on stdin: more than one JSON value on the line", scenario.ErrInvalid)
	}
	if err := spec.Validate(); err != nil {
		return spec, fmt.Errorf("child spec on stdin: %w", err)
	}
	return spec, nil
}

func writeReady(w io.Writer, r childReady) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("scenarios: child ready line: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("scenarios: child ready line: %w", err)
	}
	return nil
}
