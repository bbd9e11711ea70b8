// Package scenario owns the lab's scenario file format: the YAML of a
// scenario (load phases, a fault schedule, steady-state assertions and
// pass/fail thresholds, a consumer matrix, a baseline, a capacity search),
// parsing it strictly, validating every value, the defaults of each key,
// and the shipped files compiled in (package scenarios holds them).
//
// It must not run anything, start processes, talk to a server or judge a
// run: the runner (package runner) carries a file out, package expect
// turns its observations into checks, package result records them.
//
// # File format
//
// A file is strict YAML: an unknown field is an error, and every value is
// checked (Parse names the file and the field). Durations are Go durations
// ("10s", "1m30s"). See File and its parts for every field; the shipped
// files in this directory are examples of each fault kind.
//
//	server:
//	  policy: outbox
//	  processes:
//	    - name: api
//	      roles: [api, relay, reconciler]
//	    - name: consumer
//	      roles: [consumer]
//	      exec: true          # a separate OS process
//	faults:
//	  - {at: 2s, for: 2s, kind: kill, target: consumer}   # SIGKILL, new process after 2s
//	  - {at: 5s, for: 1s, kind: stop, target: api}        # graceful stop, start after 1s
package scenario
