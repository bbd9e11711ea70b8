package send

import (
	"fmt"
	"time"

	"imlab/ref/defect"
	"imlab/ref/model"
	"imlab/ref/msgid"
)

// Config configures a Service. Every limit is named here.
type Config struct {
	// Defects are shipped defects enabled on purpose (ref/defect; empty
	// by default): the lab's negative controls.
	Defects defect.Set
	// Policy names the ack policy: "strict", or the Name of one of Policies.
	Policy string
	// Policies are extra ack policies (ref/fanout's store, outbox, queue).
	Policies []Policy
	// Shards is the number of committer goroutines; a conversation always
	// goes to the same one (conv_id hash).
	Shards int
	// MaxBatch bounds messages per batch transaction.
	MaxBatch int
	// MaxBatchRows bounds inbox rows (recipients summed) per batch; it must
	// hold one full group (model.MaxGroupMembers).
	MaxBatchRows int
	// MaxWait is how long a committer waits for a batch to fill after its
	// first message (0: take what is queued, never wait).
	MaxWait time.Duration
	// QueueSize bounds each shard's queue; a full queue makes Send wait up
	// to its deadline, then fail with ErrUnavailable.
	QueueSize int
	// SendTimeout bounds one Send when its context has no earlier deadline.
	SendTimeout time.Duration
	// TxTimeout bounds one batch transaction attempt.
	TxTimeout time.Duration
	// MaxAttempts bounds attempts of one batch (deadlock, lock wait
	// timeout, a duplicate client_msg_id racing in another process).
	MaxAttempts int
	// Node is this process's msg_id node (0..1023); processes sharing a
	// database must use distinct nodes.
	Node uint16
	// GroupCacheTTL is how long a group's member list is cached.
	GroupCacheTTL time.Duration
	// GroupCacheSize bounds the number of cached groups.
	GroupCacheSize int
	// DedupCacheSize bounds the recent answers kept per process to answer
	// a retried (sender, client_msg_id) without MySQL (least recently used
	// evicted; 0 disables the cache; in-flight duplicates are always
	// coalesced).
	DedupCacheSize int
	// DedupCacheTTL is how long a recent answer is kept.
	DedupCacheTTL time.Duration
	// FenceGuardPause is how many batches the strict policy writes with
	// the locking read of seq_fence after its guarded raise missed once (a
	// uid's first message, a hole in its seqs, a writer in another process:
	// inbox.Writer.WriteFreshGuardedTx). A miss costs its batch one rolled
	// back attempt, the locking read one statement in every batch, so a
	// process whose guards keep missing pays one miss per FenceGuardPause
	// batches; 0 tries the guard in every batch.
	FenceGuardPause int
}

// DefaultConfig is the strict policy, 2 shards (one per core of the lab
// machine: with more, concurrent batches more often wait on each other's
// seq_fence rows), batches of up to 256 messages / 4096 rows gathered for at
// most 1ms.
func DefaultConfig() Config {
	return Config{
		Policy:         "strict",
		Shards:         2,
		MaxBatch:       256,
		MaxBatchRows:   4096,
		MaxWait:        time.Millisecond,
		QueueSize:      4096,
		SendTimeout:    5 * time.Second,
		TxTimeout:      5 * time.Second,
		MaxAttempts:    8,
		Node:           0,
		GroupCacheTTL:  2 * time.Second,
		GroupCacheSize: 10_000,
		DedupCacheSize: 100_000,
		DedupCacheTTL:  10 * time.Minute,

		FenceGuardPause: 64,
	}
}

// Validate checks every field.
func (c Config) Validate() error {
	switch {
	case c.Policy == "":
		return fmt.Errorf("send: policy is required")
	case c.Shards < 1 || c.Shards > 256:
		return fmt.Errorf("send: shards %d out of range 1..256", c.Shards)
	case c.MaxBatch < 1 || c.MaxBatch > 10_000:
		return fmt.Errorf("send: max batch %d out of range 1..10000", c.MaxBatch)
	case c.MaxBatchRows < model.MaxGroupMembers || c.MaxBatchRows > 50_000:
		return fmt.Errorf("send: max batch rows %d out of range %d..50000", c.MaxBatchRows, model.MaxGroupMembers)
	case c.MaxWait < 0 || c.MaxWait > time.Second:
		return fmt.Errorf("send: max wait %s out of range 0..1s", c.MaxWait)
	case c.QueueSize < 1 || c.QueueSize > 1<<20:
		return fmt.Errorf("send: queue size %d out of range 1..%d", c.QueueSize, 1<<20)
	case c.SendTimeout <= 0:
		return fmt.Errorf("send: send timeout must be > 0")
	case c.TxTimeout <= 0:
		return fmt.Errorf("send: tx timeout must be > 0")
	case c.MaxAttempts < 1 || c.MaxAttempts > 100:
		return fmt.Errorf("send: max attempts %d out of range 1..100", c.MaxAttempts)
	case c.Node > msgid.MaxNode:
		return fmt.Errorf("send: node %d out of range 0..%d", c.Node, msgid.MaxNode)
	case c.GroupCacheTTL < 0:
		return fmt.Errorf("send: group cache ttl must be >= 0")
	case c.GroupCacheSize < 1:
		return fmt.Errorf("send: group cache size must be >= 1")
	case c.DedupCacheSize < 0 || c.DedupCacheSize > 10_000_000:
		return fmt.Errorf("send: dedup cache size %d out of range 0..10000000", c.DedupCacheSize)
	case c.DedupCacheTTL < 0:
		return fmt.Errorf("send: dedup cache ttl must be >= 0")
	case c.FenceGuardPause < 0 || c.FenceGuardPause > 1<<20:
		return fmt.Errorf("send: fence guard pause %d out of range 0..%d", c.FenceGuardPause, 1<<20)
	}
	known := c.Policy == "strict"
	seen := map[string]bool{"strict": true}
	for _, p := range c.Policies {
		if p == nil {
			return fmt.Errorf("send: nil policy in Policies")
		}
		if seen[p.Name()] {
			return fmt.Errorf("send: policy %q given twice", p.Name())
		}
		seen[p.Name()] = true
		if p.Name() == c.Policy {
			known = true
		}
	}
	if !known {
		return fmt.Errorf("send: unknown policy %q", c.Policy)
	}
	return nil
}
