// Package runner carries out one scenario file against the reference
// server: the topology (backends, proxied where a fault needs it), the
// server processes (in this process or exec children, their stops and kills), the fault
// schedule, the load (one generator or several segments), the drain, lag
// polling, the repairs read from /v1/lab/repairs, the checker's verdict,
// and the outputs (result.json, junit.xml, report.html, the loadgen run
// directory with its ledger).
//
// It must not implement faults (imlab/chaos does), judge a ledger
// (imlab/checker does), turn observations into checks (imlab/expect
// does), render HTML (imlab/report does) or parse the file format
// (imlab/scenario does), and it must not import ref internals other than
// ref/server's public API for starting processes. It talks to the server
// processes it starts through the contract (loadgen), GET /v1/lab/lag
// and, for exec processes, GET /metrics and the child protocol
// (ChildMain).
//
// # Load segments
//
// load.segments: N (N > 1) splits the load over N generator OS processes
// on this machine (loadgen execution segments, each with its share of the
// schedule and population and GOMAXPROCS of its own; Config.LoadChildCommand,
// default this executable with "scenario load-child"), started together,
// each writing its ledger to load/seg-I. The checker judges the segments'
// ledgers as one run on one time base; counts and timelines are added up,
// latency quantiles come from the checker's histograms over every record.
//
// # Server processes: stop and kill
//
// Each entry of server.processes is one reference-server process with the
// roles it names (default: one process "all" with every role). It runs
// inside the runner (server.Start) unless it says exec: true, then as a
// separate OS process. Two fault kinds take a process down and start it
// again after for, on the same listen address (the load keeps its target;
// a restart retries, RestartAttempts times, while the address is still
// taken):
//
//   - stop is graceful, for either kind of process: server.Process.Stop in
//     process, SIGTERM for an exec process. Batches are drained, consumer
//     offsets committed, the relay's lock released, WebSockets closed.
//   - kill is SIGKILL and needs an exec process (a file that kills an
//     in-process one is refused, naming server.processes[i].exec): nothing
//     is drained or committed, in-flight transactions die with their
//     connections, and a consumer's partitions stay with its dead group
//     member until the member's session (ConsumerSessionTimeout) expires.
//     This is the crash the pipeline must survive without losing an ACKed
//     message.
//
// An exec process is Config.ChildCommand (default: this executable with
// "scenario child", imlab's hidden subcommand; a test binary can be its
// own child command, see DefaultChildArgs). The runner writes a ChildSpec
// as one JSON line to its stdin: the scenario's server section, the
// process's name and roles, the backends it must use (the proxies'
// addresses), the secret, the Redis prefix, the listen address, the node
// id and the run id. ChildMain builds the server.Config from it with the
// same function as the in-process path, starts the process and prints one
// JSON line with its pid and addresses on stdout (or the error), and runs
// until SIGTERM or until its stdin closes. Its stderr (and anything else it
// prints) goes to OutDir/process-NAME.log, every incarnation appending; an
// in-process process logs to its OutDir/process-NAME.log too, so that the
// terminal gets the live line and the verdict, not the servers' logs. A
// child is its own process group (a Ctrl-C in the terminal reaches only the
// runner) and, on Linux, gets SIGKILL from the kernel if the runner dies
// (Pdeathsig); its stdin closing stops it anyway. Every child, running or
// spare, is stopped (SIGTERM, then SIGKILL after StopTimeout) and waited
// for before Run returns, also on error and cancellation.
//
// A process that stop or kill faults target gets a spare: its start also
// spawns the next OS process, which initialises and waits for its spec, so
// that the restart costs the server's start only, not the executable's
// (seconds for a large binary built with -race) and the process is down
// for about the fault's for.
//
// The runner reads the same things from both kinds of process: the load's
// target is the api address of the first process running the api role,
// the lag poll asks the first running process for GET /v1/lab/lag, and the
// counters behind expectations (truncated pulls for min_truncated_pulls)
// come from the process's registry in process and from its GET /metrics
// for an exec process. A process's counters are read when it ends and at
// the end of the load; for a killed process that is just before the
// SIGKILL, so what it served in between is not counted (a lower bound,
// which min_truncated_pulls can only under-count). result.json lists every
// incarnation under "processes" (pid, address, how it ended: stopped,
// killed or exited, the OS's exit state and signal, its counters).
//
// # What a run does
//
// Run starts the backends through compose (MySQL and Redis as the file or
// the caller says; Kafka always in-process here, so that it can be proxied,
// see below), makes a fresh database and Redis key prefix for the run
// unless the caller supplies them, and puts one chaos proxy in front of
// each backend a fault of the file acts on through one (faults.ProxiedTargets):
// the servers reach that backend only through it, and the others directly
// (an idle proxy would cost every round trip two loopback hops and this
// process's CPU; result.json's setting "proxies" names them). The lab's own
// fault clients (Redis wipe, allocator rollback, Kafka admin) talk to the
// backends directly. Then it starts the server processes (see above),
// runs loadgen.Run and chaos.RunSchedule from the same start time, polls
// GET /v1/lab/lag once a second, heals everything after the load
// (loadgen.Run includes the settle, the final drain and the witness
// pulls), runs the checker on the ledger, evaluates every expectation into
// a Check, and writes the outputs. A file's baseline (or the runner's
// BaselineDir) adds one more check, "baseline": the run's result compared
// with a stored result by package compare (one run a side, so by
// tolerance alone), the comparison itself kept in result.json.
// Everything it starts is stopped and every goroutine it starts is joined
// before Run returns, also on error and on cancellation; a run is bounded
// by its duration + settle + drain timeout + RunMargin.
//
// # Recovery figures
//
// For a file that uses Kafka the lag poller also reads each group's
// consumed position (from the lag answer's partitions) and the inbox row
// count (SELECT COUNT(*) FROM offline_msg on the run's database, directly,
// not through the proxy; a count walks the whole table, so it is taken at
// most about 1/lagpoll.RowCountDuty of the time and the samples between have
// none), and result.json's "recovery" holds the figures
// of imlab/recovery: peak lag age and records per group, the
// backlog peak, the recovery time from the end of the burst or the heal of
// the last fault (whichever is later; without either, the end of the load)
// until every group's lag age is under expect.recovery_bound (default 1s)
// for expect.recovery_hold (default 2s), the drain rate meanwhile
// (records/s per group, inbox rows/s), and the outbox's peak and drain
// time. After the load the runner keeps polling until that recovery holds
// or the drain timeout after its start has passed: lag_recovered (checked
// by default with Kafka; expect.lag_recovered: false turns it off) fails
// with the reason when it did not, and max_recovery and min_drain_rate
// bound the figures. A poll that failed or whose monitor reported an error
// is unknown: it never counts as caught up (an error of the outbox query
// alone leaves it unknown for the outbox only).
//
// For a burst shape, result.json's "burst" compares the sends the
// generator intended around the burst with those it started, and the
// start delay p99 in the burst's seconds; generator_kept_up (checked for
// every burst shape; expect.min_offered_ratio, default 0.95, and
// expect.max_start_delay, default 100ms) fails a run whose generator fell
// behind, so that a burst the server never saw is not reported as one it
// survived.
//
// # Rates on the embedded topology
//
// The embedded MySQL (go-mysql-server's memory engine behind compose's
// one-transaction-at-a-time lock) carries about a tenth of the rates the
// shipped files send to MariaDB. When the run's MySQL is embedded, the
// runner multiplies every rate of the file's shape by
// load.embedded_rate_scale (default DefaultEmbeddedRateScale, 0.1; a file
// whose expectations need more traffic states its own factor, 1 keeps the
// file's rate); Config.RateScale (imlab scenario run --rate-scale) sets
// the factor on any topology instead. Only rates change: the shape's
// times, the faults, the population and every expectation are the file's,
// and min_rate_ratio is judged against the scaled shape. A scaled run is
// never silent: Result.RateScale in result.json, the "rate_scale" setting
// (junit properties), the report's backends line and notes, and the CLI's
// verdict block all carry RateScale.Label ("rates scaled ×0.1 for the
// embedded topology (file const:200, run const:20)"). Figures from such a
// run are embedded-backend figures, never capacity figures.
//
// A file that cannot mean anything there says so: backends.skip_embedded
// is the reason (capacity-smoke: a capacity search, which an engine that
// slows as its tables grow cannot hold still for). Where the run's MySQL
// is embedded such a file starts no server and no load; its result passes
// with Result.Skipped set, its junit.xml holds one skipped case, and the
// CLI's verdict table says SKIPPED.
//
// # Rules that keep a verdict honest
//
// A fault that did not reach its target proves nothing about the server:
// every scheduled fault is wrapped (reach.go), and one that was never
// injected, whose inject failed, or that affected nothing where it can
// count (the data faults: 0 keys wiped, counters set back, records
// deleted) fails the faults_reached check, unless its file entry says
// may_miss: true. A lag sample that is not a complete measurement of now
// (the poll failed, the server's monitor reported errors or partitions of
// unknown age, its snapshot is older than lagpoll.Stale) is unknown, never 0:
// any unknown sample fails max_lag_age. A sample whose outbox query alone
// failed (its outbox_error, apart from its error) measured the consumer
// lag: it counts for max_lag_age and the groups' recovery, and its outbox
// is unknown (package recovery states the rule).
//
// The checker's verdict is re-judged with the file's allowances
// (Verdict.Judge): max_reordered is the order judgement the verdict uses.
// A witness error fails the evidence check: a pull or store witness (read
// after the drain, healed) not made or made only for some uids leaves
// findings unjudged; read-after-ACK probes run during the faults, so only
// probes not made at all fail it.
//
// Repairs are evidence. Forward reconciliation writing an inbox row means
// the pipeline had lost it; the runner reads GET /v1/lab/repairs of every
// process that runs the reconciler (when an incarnation ends, and after
// the load) and reports the rows and msg_ids beside the verdict
// (Result.Repairs, a table in the report), with what the checker's ledger
// says became of the repaired messages (Repairs.Fate: delivered in the
// end, late, or still lost); max_repairs and min_repairs
// judge them, and repairs that could not be read fail both. A repair can
// also hide a loss from the checker, so the runner's default
// reconcile_grace (DefaultReconcileGrace, 30m) is longer than any run:
// nothing of the run is repaired before it is judged. A file about repair
// (queue-loss-store, queue-recreate-outbox) sets a short grace and says so;
// its settings in result.json say whether reconciliation ran early or late.
//
// Retention runs with the server's defaults (30 days, early deletion after
// a day), which delete nothing of a run, unless the file sets
// server.lab_retention (LAB ONLY: window, early-deletion grace and pass
// interval in seconds; the server's lab-only switch). The setting
// "retention" of result.json says which; every process serves what its
// retention deleted at GET /v1/lab/retention.
//
// # Kafka through a proxy
//
// A Kafka broker advertises its own address in metadata, so a client that
// bootstraps through a proxy would then connect to the advertised address
// directly. The runner therefore starts the in-process kfake broker itself
// with a listener that reports the proxy's address as its own: the broker
// advertises the proxy, and every server connection stays behind it. The
// lab's Kafka admin client dials the broker's real listener through a
// dialer that rewrites the advertised address. An external Kafka cannot be
// proxied this way (its advertised listeners are its own), so Kafka always
// runs in-process in a scenario.
//
// MongoDB (server.history: true) is proxied by rewriting the host of the
// URI; the in-process FerretDB is a single server, so no discovery bypasses
// the proxy (the runner connects with directConnection=true).
package runner
