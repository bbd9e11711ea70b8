// Package budget measures what one group-commit batch of the write path
// costs: the MySQL round trips and statements it sends (through a counting
// database/sql connector wrapped around go-sql-driver), the Redis round
// trips (a go-redis hook), and CPU time of this process and of the MySQL
// server process (from /proc), so that benchmarks can report them per batch
// and per message and tests can pin them.
//
// Every database/sql call on a counted pool is one round trip because the
// pools of this project interpolate parameters client-side
// (interpolateParams=true): BEGIN, each Exec or Query, COMMIT, ROLLBACK.
// A Prepare (never used by the write path) is counted too.
//
// It owns nothing of the server; it must not be used by non-test code
// paths of the reference server (it is wired in by benchmarks and tests).
package budget

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// SQL counts the calls made through a pool opened by OpenMySQL.
type SQL struct {
	begins, commits, rollbacks, execs, queries, prepares atomic.Int64

	// handlers: read the server's session Handler_* counters after each
	// COMMIT (WithHandlerStats).
	handlers bool

	mu       sync.Mutex
	byKind   map[string]*kindStat
	rowCalls map[string]int64 // committed transactions' Handler_* calls
}

type kindStat struct {
	n   int64
	dur time.Duration
}

// SQLSnapshot is a copy of the counters at one moment.
type SQLSnapshot struct {
	Begins, Commits, Rollbacks, Execs, Queries, Prepares int64
	// Kinds counts statements by kind ("INSERT conv_counter",
	// "SELECT seq_fence", "COMMIT", ...) with their summed wall time.
	Kinds map[string]KindStat
	// Handlers sums the server's Handler_* counters (row-level storage
	// engine calls: Handler_read_key, Handler_write, Handler_update, ...)
	// of the pool's sessions, read at each COMMIT (so a rolled-back attempt
	// or an autocommit statement counts with the connection's next commit),
	// when it was opened WithHandlerStats; nil otherwise. Unlike CPU time
	// they are exact on a shared server.
	Handlers map[string]int64
}

// RowCalls is the sum of Handlers.
func (s SQLSnapshot) RowCalls() int64 {
	var n int64
	for _, v := range s.Handlers {
		n += v
	}
	return n
}

// KindStat is one statement kind's count and summed wall time (from the
// call to its answer, as the client saw it).
type KindStat struct {
	N   int64
	Dur time.Duration
}

// RoundTrips is every call that went to the server.
func (s SQLSnapshot) RoundTrips() int64 {
	return s.Begins + s.Commits + s.Rollbacks + s.Execs + s.Queries + s.Prepares
}

// Statements is Execs + Queries (BEGIN, COMMIT and ROLLBACK excluded).
func (s SQLSnapshot) Statements() int64 { return s.Execs + s.Queries }

// Sub is s - o, field by field.
func (s SQLSnapshot) Sub(o SQLSnapshot) SQLSnapshot {
	d := SQLSnapshot{
		Begins: s.Begins - o.Begins, Commits: s.Commits - o.Commits, Rollbacks: s.Rollbacks - o.Rollbacks,
		Execs: s.Execs - o.Execs, Queries: s.Queries - o.Queries, Prepares: s.Prepares - o.Prepares,
		Kinds: map[string]KindStat{},
	}
	for k, v := range s.Kinds {
		w := o.Kinds[k]
		if v.N-w.N != 0 {
			d.Kinds[k] = KindStat{N: v.N - w.N, Dur: v.Dur - w.Dur}
		}
	}
	if s.Handlers != nil {
		d.Handlers = map[string]int64{}
		for k, v := range s.Handlers {
			if v-o.Handlers[k] != 0 {
				d.Handlers[k] = v - o.Handlers[k]
			}
		}
	}
	return d
}

// Table renders the kinds per batch (batches > 0): count per batch and mean
// wall time per statement, one line each, sorted by kind.
func (s SQLSnapshot) Table(batches int64) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.Kinds)) {
		v := s.Kinds[k]
		fmt.Fprintf(&sb, "%-28s %6.2f/batch %8.1f µs each\n", k, float64(v.N)/float64(max(batches, 1)),
			float64(v.Dur.Microseconds())/float64(max(v.N, 1)))
	}
	return sb.String()
}

// Snapshot copies the counters.
func (c *SQL) Snapshot() SQLSnapshot {
	s := SQLSnapshot{
		Begins: c.begins.Load(), Commits: c.commits.Load(), Rollbacks: c.rollbacks.Load(),
		Execs: c.execs.Load(), Queries: c.queries.Load(), Prepares: c.prepares.Load(),
		Kinds: map[string]KindStat{},
	}
	c.mu.Lock()
	for k, v := range c.byKind {
		s.Kinds[k] = KindStat{N: v.n, Dur: v.dur}
	}
	if c.handlers {
		s.Handlers = maps.Clone(c.rowCalls)
	}
	c.mu.Unlock()
	return s
}

func (c *SQL) note(kind string, start time.Time) {
	d := time.Since(start)
	c.mu.Lock()
	k := c.byKind[kind]
	if k == nil {
		k = &kindStat{}
		c.byKind[kind] = k
	}
	k.n++
	k.dur += d
	c.mu.Unlock()
}

// Kind names a statement by its verb and first table: "INSERT msg_content",
// "SELECT seq_fence", "UPDATE conv_counter", "SAVEPOINT".
func Kind(query string) string {
	// The verb and table are near the start; a batch statement may be
	// megabytes long.
	if len(query) > 120 {
		query = query[:120]
	}
	f := strings.Fields(query)
	if len(f) == 0 {
		return "?"
	}
	verb := strings.ToUpper(f[0])
	var table string
	switch verb {
	case "INSERT", "REPLACE":
		// INSERT [IGNORE] INTO t
		for i := 1; i < len(f) && i < 4; i++ {
			if strings.EqualFold(f[i], "INTO") && i+1 < len(f) {
				table = f[i+1]
				break
			}
		}
	case "UPDATE":
		if len(f) > 1 {
			table = f[1]
		}
	case "SELECT", "DELETE":
		for i := 1; i < len(f); i++ {
			if strings.EqualFold(f[i], "FROM") && i+1 < len(f) {
				table = f[i+1]
				break
			}
		}
	}
	table = strings.TrimFunc(table, func(r rune) bool { return r == '(' || r == '`' || r == ',' })
	if table == "" {
		return verb
	}
	return verb + " " + table
}

// Option changes what OpenMySQL's pool counts.
type Option func(*SQL)

// WithHandlerStats makes each connection read the server's session
// Handler_* counters (SHOW SESSION STATUS) after every COMMIT and add the
// difference to the previous reading, less what the reading itself costs
// (measured at connect). The readings are extra round trips, not
// counted as such.
func WithHandlerStats() Option { return func(c *SQL) { c.handlers = true } }

// OpenMySQL opens a pool on dsn (go-sql-driver syntax) whose every call is
// counted by the returned SQL.
func OpenMySQL(dsn string, opts ...Option) (*sql.DB, *SQL, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("budget: parse dsn: %w", err)
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("budget: connector: %w", err)
	}
	c := &SQL{byKind: map[string]*kindStat{}, rowCalls: map[string]int64{}}
	for _, o := range opts {
		o(c)
	}
	return sql.OpenDB(&connector{inner: inner, c: c}), c, nil
}

type connector struct {
	inner driver.Connector
	c     *SQL
}

func (k *connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := k.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cc := &countedConn{Conn: conn, c: k.c}
	if k.c.handlers {
		// Three readings: the first of a session may cost more than
		// the steady ones, whose difference is the overhead.
		var r [3]map[string]int64
		for i := range r {
			if r[i], err = cc.readHandlers(ctx); err != nil {
				conn.Close()
				return nil, err
			}
		}
		cc.overhead = map[string]int64{}
		for name, v := range r[2] {
			cc.overhead[name] = v - r[1][name]
		}
		cc.last = r[2]
	}
	return cc, nil
}

// handlerQuery reads the row-level storage engine calls of the session.
const handlerQuery = "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key','Handler_read_next','Handler_read_prev'," +
	"'Handler_read_first','Handler_read_last','Handler_read_rnd','Handler_read_rnd_next','Handler_write','Handler_update','Handler_delete')"

func (cc *countedConn) readHandlers(ctx context.Context) (map[string]int64, error) {
	rows, err := cc.Conn.(driver.QueryerContext).QueryContext(ctx, handlerQuery, nil)
	if err != nil {
		return nil, fmt.Errorf("budget: session status: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(dest); err != nil {
			break
		}
		name := fmt.Sprint(asString(dest[0]))
		v, err := strconv.ParseInt(asString(dest[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("budget: session status %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func asString(v driver.Value) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// noteHandlers adds the session's Handler_* calls since the last reading.
func (cc *countedConn) noteHandlers() {
	now, err := cc.readHandlers(context.Background())
	if err != nil {
		return
	}
	cc.c.mu.Lock()
	for name, v := range now {
		if d := v - cc.last[name] - cc.overhead[name]; d > 0 {
			cc.c.rowCalls[name] += d
		}
	}
	cc.c.mu.Unlock()
	cc.last = now
}

func (k *connector) Driver() driver.Driver { return k.inner.Driver() }

// countedConn forwards to go-sql-driver's connection (which implements
// every optional interface used here) and counts.
type countedConn struct {
	driver.Conn
	c *SQL
	// last and overhead: the previous Handler_* reading and what one
	// reading adds (WithHandlerStats).
	last, overhead map[string]int64
}

func (cc *countedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	cc.c.begins.Add(1)
	start := time.Now()
	tx, err := cc.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	cc.c.note("BEGIN", start)
	if err != nil {
		return nil, err
	}
	return &countedTx{Tx: tx, c: cc.c, conn: cc}, nil
}

func (cc *countedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cc.c.execs.Add(1)
	start := time.Now()
	r, err := cc.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	cc.c.note(Kind(query), start)
	return r, err
}

func (cc *countedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cc.c.queries.Add(1)
	start := time.Now()
	r, err := cc.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	cc.c.note(Kind(query), start)
	return r, err
}

func (cc *countedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	cc.c.prepares.Add(1)
	return cc.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (cc *countedConn) Ping(ctx context.Context) error {
	return cc.Conn.(driver.Pinger).Ping(ctx)
}

func (cc *countedConn) ResetSession(ctx context.Context) error {
	return cc.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (cc *countedConn) IsValid() bool { return cc.Conn.(driver.Validator).IsValid() }

func (cc *countedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return cc.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

type countedTx struct {
	driver.Tx
	c    *SQL
	conn *countedConn
}

func (t *countedTx) Commit() error {
	t.c.commits.Add(1)
	start := time.Now()
	err := t.Tx.Commit()
	t.c.note("COMMIT", start)
	if err == nil && t.c.handlers {
		t.conn.noteHandlers()
	}
	return err
}

func (t *countedTx) Rollback() error {
	t.c.rollbacks.Add(1)
	return t.Tx.Rollback()
}

// Redis counts the round trips of a go-redis client: one per command sent
// alone, one per pipeline (or MULTI/EXEC), and the commands in them.
type Redis struct {
	trips, cmds, pipes atomic.Int64
}

// RedisSnapshot is a copy of the Redis counters. RoundTrips include the
// commands a new connection sends (HELLO, CLIENT SETINFO); Pipelines are
// only the caller's pipelines (or MULTI/EXEC).
type RedisSnapshot struct{ RoundTrips, Commands, Pipelines int64 }

// CountRedis adds the counting hook to client.
func CountRedis(client *redis.Client) *Redis {
	r := &Redis{}
	client.AddHook(r)
	return r
}

// Snapshot copies the counters.
func (r *Redis) Snapshot() RedisSnapshot {
	return RedisSnapshot{RoundTrips: r.trips.Load(), Commands: r.cmds.Load(), Pipelines: r.pipes.Load()}
}

// DialHook implements redis.Hook.
func (r *Redis) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (r *Redis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.trips.Add(1)
		r.cmds.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (r *Redis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.trips.Add(1)
		if !connSetup(cmds) {
			r.pipes.Add(1)
		}
		r.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// connSetup tells the pipeline a new connection sends before its first
// command (HELLO, AUTH, SELECT, CLIENT SETINFO) from the caller's.
func connSetup(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		switch c.Name() {
		case "hello", "auth", "select", "client", "readonly":
		default:
			return false
		}
	}
	return len(cmds) > 0
}

// CPU is a reading of CPU time (user + system) of this process and of
// another process (the MySQL server), taken together.
type CPU struct {
	Self, Server time.Duration
	// ServerOK is false when the server process could not be read (not
	// found, not ours): its figure is then unknown, not zero.
	ServerOK bool
}

// ReadCPU reads this process's CPU time and that of the process with pid
// (pid <= 0: none).
func ReadCPU(pid int) CPU {
	var ru syscall.Rusage
	var c CPU
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		c.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if pid > 0 {
		if d, err := procCPU(pid); err == nil {
			c.Server, c.ServerOK = d, true
		}
	}
	return c
}

// clockTick is USER_HZ: 100 on every Linux this runs on.
const clockTick = 100

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	// Fields after the command name (which may hold spaces) start past ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("budget: odd /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("budget: short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("budget: /proc stat times")
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// ServerPID is the pid of the MySQL server behind db, read from the file
// its @@pid_file names (0 when that cannot be read, e.g. a remote server).
// Several servers may run on one machine: the pid file tells which one this
// is, a process name would not.
func ServerPID(ctx context.Context, db *sql.DB) int {
	var path string
	if err := db.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&path); err != nil {
		return 0
	}
	if !filepath.IsAbs(path) {
		var dir string
		if err := db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&dir); err != nil {
			return 0
		}
		path = filepath.Join(dir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if _, err := procCPU(pid); err != nil {
		return 0
	}
	return pid
}

// Run is one measured stretch: counters and CPU read at Start, compared at
// Result.
type Run struct {
	sql *SQL
	rd  *Redis
	pid int
	s0  SQLSnapshot
	r0  RedisSnapshot
	c0  CPU
}

// Start reads the counters (rd may be nil; pid <= 0: no server CPU).
func Start(s *SQL, rd *Redis, pid int) *Run {
	r := &Run{sql: s, rd: rd, pid: pid, s0: s.Snapshot(), c0: ReadCPU(pid)}
	if rd != nil {
		r.r0 = rd.Snapshot()
	}
	return r
}

// Result is what a run of msgs messages cost.
type Result struct {
	Msgs    int64
	SQL     SQLSnapshot
	Redis   RedisSnapshot
	CPU     CPU // deltas
	Batches int64
}

// Result compares the counters with Start's.
func (r *Run) Result(msgs int) Result {
	c1 := ReadCPU(r.pid)
	res := Result{Msgs: int64(msgs), SQL: r.sql.Snapshot().Sub(r.s0)}
	if r.rd != nil {
		s := r.rd.Snapshot()
		res.Redis = RedisSnapshot{RoundTrips: s.RoundTrips - r.r0.RoundTrips, Commands: s.Commands - r.r0.Commands,
			Pipelines: s.Pipelines - r.r0.Pipelines}
	}
	res.CPU = CPU{Self: c1.Self - r.c0.Self, Server: c1.Server - r.c0.Server, ServerOK: c1.ServerOK && r.c0.ServerOK}
	res.Batches = res.SQL.Commits
	return res
}

// Reporter is what testing.B offers for metrics.
type Reporter interface {
	ReportMetric(n float64, unit string)
}

// Report puts the per-batch and per-message figures on b: rt/batch (MySQL
// round trips), stmts/msg, rowcalls/msg (the server's Handler_* calls of
// committed transactions, WithHandlerStats), msgs/batch, redis-rt/batch,
// go-µs/msg and, when
// the server process was readable, db-µs/msg (both CPU; on a shared machine
// the server figure includes other clients' work).
func (res Result) Report(b Reporter) {
	if res.Batches > 0 {
		b.ReportMetric(float64(res.SQL.RoundTrips())/float64(res.Batches), "rt/batch")
		b.ReportMetric(float64(res.Msgs)/float64(res.Batches), "msgs/batch")
		b.ReportMetric(float64(res.Redis.RoundTrips)/float64(res.Batches), "redis-rt/batch")
	}
	if res.Msgs > 0 {
		if res.SQL.Handlers != nil {
			b.ReportMetric(float64(res.SQL.RowCalls())/float64(res.Msgs), "rowcalls/msg")
		}
		b.ReportMetric(float64(res.SQL.Statements())/float64(res.Msgs), "stmts/msg")
		b.ReportMetric(float64(res.CPU.Self.Microseconds())/float64(res.Msgs), "go-µs/msg")
		if res.CPU.ServerOK {
			b.ReportMetric(float64(res.CPU.Server.Microseconds())/float64(res.Msgs), "db-µs/msg")
		}
	}
}
