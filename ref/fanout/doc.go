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
// # Metrics
//
// The lag series carry a group label beside the topic and partition the
// architecture table names: imlab_consumer_lag_seconds{group,topic,partition}
// and imlab_consumer_lag_records{group,topic,partition}. Each tier has its
// own consumer group (imlab-inbox, imlab-history), and a history tier that
// falls behind must not be averaged into, or hidden behind, the inbox
// tier's figure. Dead letters carry the group that gave up (HeaderDLQGroup):
// the dead-letter topic is shared by both tiers.
//
// # Queue down
//
// Under store and outbox a send is ACKed once msg_content (and, for outbox,
// mq_outbox) is committed, whatever Kafka does. Store hands a publish that
// failed (after ProducerConfig.DeliveryTimeout) to the Direct fan-out;
// outbox hands every commit to it while Health reports the brokers down.
// Direct writes inbox rows through the same fenced, idempotent inbox sink
// and runs the hooks (hot cache, online push) from the storing process, but
// only for messages that extend their conversation's chain: conv_seq 1, or
// the predecessor already in every recipient's inbox (InboxSink.
// HandleChained). The others are deferred: under outbox the relay publishes
// every row once Kafka is back and the consumers write them in commit order
// (rows direct wrote are idempotent hits there); under store forward
// reconciliation writes them. What it drops (queue full, write failed)
// reconciliation repairs too.
//
// Order: under outbox a conversation stays in conv_seq order in every inbox
// across an outage (ref/reconcile's TestQueueDown asserts it). Under store
// it cannot be promised: a publish fails only after the delivery timeout,
// and by then later messages of the conversation may have been published
// and consumed; the failed one reaches the inbox after them (the lab checker
// counts it "reordered"; it is not lost). That is option B's weakness.
//
// # Relay
//
// One relay is active per lock name (a MySQL advisory lock held by one
// session); the others wait as standbys. A relay whose lock session ends
// notices at its next check (RelayConfig.MaintainEvery), stops publishing
// and waits as a standby again; in that window both may publish the same
// rows, which the idempotent consumers absorb.
//
// It must not serve client reads, allocate per-user seqs itself, or write
// offline_msg rows other than through ref/inbox (the one fenced,
// idempotent path). It talks to Kafka only through franz-go, so the same
// code runs against the in-process kfake cluster and a real Kafka.
package fanout
