// Package scenarios owns the lab's scenario files (YAML: load phases, a
// fault schedule, steady-state assertions and pass/fail thresholds), the
// runner that carries one out against the reference server, and the
// runner's outputs: result.json, junit.xml, report.html and the loadgen run
// directory with its ledger.
//
// It must not implement faults (imlab/chaos does), judge a ledger
// (imlab/loadgen/checker does) or render HTML (imlab/dashboards/report
// does), and it must not import ref internals other than ref/server's
// public API for starting processes. It talks to the server processes it
// starts through the contract (loadgen) and GET /v1/lab/lag.
//
// # File format
//
// A file is strict YAML: an unknown field is an error, and every value is
// checked (Parse names the file and the field). Durations are Go durations
// ("10s", "1m30s"). See File and its parts for every field; the shipped
// files in this directory are examples of each fault kind.
//
// # What a run does
//
// Run starts the backends through compose (MySQL and Redis as the file or
// the caller says; Kafka always in-process here, so that it can be proxied,
// see below), makes a fresh database and Redis key prefix for the run
// unless the caller supplies them, puts one chaos proxy in front of every
// backend the server uses, and hands the server processes only the proxy
// addresses: all their traffic goes through the proxies. The lab's own
// fault clients (Redis wipe, allocator rollback, Kafka admin) talk to the
// backends directly. Then it starts the server processes, runs loadgen.Run
// and chaos.RunSchedule from the same start time, polls GET /v1/lab/lag
// once a second, heals everything after the load (loadgen.Run includes the
// settle, the final drain and the witness pulls), runs the checker on the
// ledger, evaluates every expectation into a Check, and writes the outputs.
// Everything it starts is stopped and every goroutine it starts is joined
// before Run returns, also on error and on cancellation; a run is bounded
// by its duration + settle + drain timeout + RunMargin.
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
package scenarios
