// Package fanout owns the queue side of the reference server (seed 003):
// the fan-out event codec and topic layout (partitioned by hash(conv_id)),
// the Kafka producer that recovers from a recreated topic by itself, the
// consumer loops (one goroutine per assigned partition, bounded batches, a
// per-message timeout, retries with backoff, a dead-letter topic, offsets
// committed only after the sinks succeeded), the idempotency strategies
// keyed by (msg_id, uid), the outbox relay over mq_outbox, lag measured as
// the age of the oldest unprocessed message, and the store / outbox /
// queue ack policies that plug into the send pipeline.
//
// It must not serve client reads, allocate per-user seqs itself, or write
// offline_msg rows other than through ref/inbox (the one fenced,
// idempotent path). It talks to Kafka only through franz-go, so the same
// code runs against the in-process kfake cluster and a real Kafka.
package fanout
