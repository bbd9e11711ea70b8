// Package mixe2e holds the end-to-end tests of the client mix against the
// full reference server (every tier: MariaDB, Redis, the in-process Kafka
// and MongoDB stand-in, lab routes, lab short retention ages): the
// unmodified server valid under the default mix, and each shipped defect
// of the history, the conversation pull and retention caught through its
// own finding. They live apart from package loadgen's tests so that their
// minutes run as a test binary of their own (in parallel with the rest,
// under a timeout of their own). It has no code: it must not be imported.
package mixe2e
