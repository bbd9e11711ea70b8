package runner

import (
	"context"
	"database/sql"
	"fmt"
	"imlab/result"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/redis/go-redis/v9"

	"imlab/chaos"
	"imlab/compose"
	"imlab/faults"
	"imlab/runner/proc"
	"imlab/scenario"
)

// startBackends starts compose (MySQL, Redis, MongoDB with history), the
// in-process Kafka, the run's database and prefix, and the proxies.
func (r *run) startBackends(ctx context.Context) error {
	cc := compose.DefaultConfig()
	cc.Mode = r.f.Backends.ModeOr()
	if r.cfg.Mode != "" {
		cc.Mode = r.cfg.Mode
	}
	cc.MySQLDSN, cc.RedisAddr, cc.DataDir = r.cfg.MySQLDSN, r.cfg.RedisAddr, r.cfg.DataDir
	cc.WithKafka = false // in-process here, so that it can be proxied
	cc.WithMongo = r.f.Server.History
	cc.MongoCommand = r.cfg.MongoCommand
	// A fresh database is made below: compose must not leave the DSN's
	// own database behind, created and empty.
	cc.MySQLNoCreate = r.cfg.FreshDatabase
	cc.Logger = r.log
	cb, stop, err := compose.Start(ctx, cc)
	if err != nil {
		return fmt.Errorf("scenarios: backends: %w", err)
	}
	r.onStop(func(ctx context.Context) error { return stop(ctx) })
	r.cb = cb
	r.res.Fallbacks = cb.Fallbacks
	for _, w := range cb.Warnings {
		// A warning about the backends (e.g. the embedded MongoDB's
		// speed), not an error of the run: said as such where shown. A
		// fallback is said where the run starts and in its summary
		// (Result.Fallbacks), not among these.
		if !cb.IsFallback(w) {
			r.res.Errors = append(r.res.Errors, result.WarningPrefix+w)
		}
	}
	if r.cfg.Progress != nil {
		for _, l := range result.FallbackLines(cb.Fallbacks) {
			fmt.Fprintln(r.cfg.Progress, l)
		}
	}

	dsn := cb.MySQLDSN
	r.database = databaseSetting(dsn, r.cfg.FreshDatabase, proc.DatabaseOf(r.id))
	if r.cfg.FreshDatabase {
		name := proc.DatabaseOf(r.id)
		fresh, drop, err := freshDatabase(ctx, dsn, name)
		if err != nil {
			return err
		}
		dsn = fresh
		if !r.cfg.KeepData {
			r.onStop(drop)
		}
	}
	r.prefix = r.cfg.RedisPrefix
	if r.prefix == "" {
		r.prefix = "imlab:scn:" + r.id + ":"
	}
	r.redisAddr = cb.RedisAddr
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "mysql database %s; redis prefix %s\n", r.database, r.prefix)
	}
	if !r.cfg.KeepData {
		addr, prefix := cb.RedisAddr, r.prefix
		r.onStop(func(ctx context.Context) error { return deletePrefix(ctx, addr, prefix) })
	}

	if r.f.UsesKafka() {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return fmt.Errorf("scenarios: mysql: %w", err)
		}
		db.SetMaxOpenConns(1)
		r.rowsDB = db
		r.onStop(func(context.Context) error { return db.Close() })
	}
	up := map[string]string{scenario.TargetRedis: cb.RedisAddr}
	if up[scenario.TargetMySQL], err = proc.MySQLAddr(dsn); err != nil {
		return err
	}
	if r.f.UsesKafka() {
		k, err := startKafka(r.f.Backends.PartitionsOr())
		if err != nil {
			return err
		}
		r.kafka = k
		r.onStop(func(context.Context) error { k.Close(); return nil })
		up[scenario.TargetKafka] = k.real
	}
	if r.f.Server.History {
		if up[scenario.TargetMongo], err = mongoHost(cb.MongoURI); err != nil {
			return err
		}
	}
	return r.startProxies(ctx, up, dsn, cb.MongoURI)
}

// startProxies puts a chaos proxy in front of each backend of up that a
// fault of the file acts on through one (faults.ProxiedTargets) and gives
// the servers its address; they reach the others directly (a proxy costs
// every round trip two more loopback hops and this process's CPU: 40% of
// it in burst-50k, with no fault to inject). Without one r.px is empty.
func (r *run) startProxies(ctx context.Context, up map[string]string, dsn, mongoURI string) (err error) {
	r.px = chaos.NoProxies()
	want := map[string]string{}
	for _, name := range faults.ProxiedTargets(r.f.Faults) {
		if a, ok := up[name]; ok {
			want[name] = a
		}
	}
	if len(want) > 0 {
		if r.px, err = chaos.StartProxies(ctx, want); err != nil {
			return fmt.Errorf("scenarios: proxies: %w", err)
		}
		px := r.px
		r.onStop(func(context.Context) error { return px.Close() })
	}
	addr := func(name string) string {
		if a, err := r.px.Addr(name); err == nil {
			return a
		}
		return up[name]
	}
	if r.back.MySQLDSN, err = withAddr(dsn, addr(scenario.TargetMySQL)); err != nil {
		return err
	}
	r.back.RedisAddr = addr(scenario.TargetRedis)
	if r.kafka != nil {
		if a, err := r.px.Addr(scenario.TargetKafka); err == nil {
			if err := r.kafka.Advertise(a); err != nil {
				return err
			}
		}
		r.back.KafkaBrokers = []string{addr(scenario.TargetKafka)}
	}
	if r.f.Server.History {
		r.back.MongoURI = mongoVia(mongoURI, addr(scenario.TargetMongo))
	}
	return nil
}

// deletePrefix deletes every key under prefix, with the same SCAN + UNLINK
// as the redis_wipe fault (chaos.RedisWipe); an empty prefix deletes
// nothing (never the whole server).
func deletePrefix(ctx context.Context, addr, prefix string) error {
	if prefix == "" {
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := chaos.RedisWipe(c, chaos.RedisWipeConfig{Prefix: prefix}).Inject(ctx); err != nil {
		return fmt.Errorf("scenarios: clean redis prefix: %w", err)
	}
	return nil
}

// childSpec describes process i: what serverConfig needs, in process or
// out.
func (r *run) childSpec(i int, p scenario.ProcessSpec) proc.ChildSpec {
	srv := r.f.Server
	srv.Processes = nil
	return proc.ChildSpec{Server: srv, Process: p, Node: uint16(i + 1), Migrate: i == 0, Listen: "127.0.0.1:0",
		Secret: r.cfg.Secret, RedisPrefix: r.prefix, RunID: r.id, Partitions: r.f.Backends.PartitionsOr(),
		PushBus: len(r.f.Processes()) > 1, Backends: proc.BackendsOf(r.back), Defects: r.cfg.Defects,
		Pprof: r.cfg.Pprof[p.Name]}
}

// processLog is the log file of a server process.
func (r *run) processLog(name string) string {
	return filepath.Join(r.cfg.OutDir, "process-"+name+".log")
}

// startProcesses starts every server process in file order.
func (r *run) startProcesses(ctx context.Context) error {
	r.topic = proc.TopicOf(r.id)
	for name := range r.cfg.Pprof {
		if !slices.ContainsFunc(r.f.Processes(), func(p scenario.ProcessSpec) bool { return p.Name == name }) {
			return fmt.Errorf("%w: pprof for process %q: the file has no such process", scenario.ErrInvalid, name)
		}
	}
	var command []string
	for i, p := range r.f.Processes() {
		spec := r.childSpec(i, p)
		if err := spec.Validate(); err != nil {
			return fmt.Errorf("scenarios: process %s: %w", p.Name, err)
		}
		if p.Exec && command == nil {
			var err error
			if command, err = r.cfg.childCommand(); err != nil {
				return err
			}
		}
		// Every process logs to its own file in the run directory, in
		// process or out: the terminal gets the live line and the verdict.
		logPath := r.processLog(p.Name)
		logw, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("scenarios: process %s: log: %w", p.Name, err)
		}
		r.onStop(func(context.Context) error { return logw.Close() }) // after the process's stop
		faults := 0
		for _, x := range r.f.Faults {
			if (x.Kind == scenario.KindStop || x.Kind == scenario.KindKill) && x.Target == p.Name {
				faults++
			}
		}
		log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s := proc.NewSlot(spec, log, command, logw, logPath, faults)
		r.procs = append(r.procs, s)
		r.onStop(s.Stop)
		if err := s.Start(ctx); err != nil {
			return fmt.Errorf("scenarios: start process %s: %w", p.Name, err)
		}
	}
	if r.target() == "" {
		return fmt.Errorf("scenarios: no process serves the api")
	}
	return nil
}

// target is the base URL of the first process running the api role.
func (r *run) target() string {
	if t := r.f.Target; t.External() {
		return t.URL()
	}
	for _, s := range r.procs {
		if a := s.APIAddr(); a != "" {
			return "http://" + a
		}
	}
	return ""
}
