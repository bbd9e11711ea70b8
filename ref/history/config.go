package history

import (
	"fmt"
	"time"

	"imlab/ref/defect"
	"imlab/ref/model"
)

// Read modes (Config.ReadMode).
const (
	ReadAuto     = "auto"
	ReadNative   = "native"
	ReadFallback = "fallback"
)

// Named limits and defaults.
const (
	// DefaultMaxRange bounds one GET /v1/history (to_seq-from_seq+1).
	DefaultMaxRange = 100
	// DefaultDelListMax bounds a slot's del_list; past it a per-user
	// deletion record takes over.
	DefaultDelListMax = 64
	// DefaultRevokeWindow is how long after sending the sender may revoke.
	DefaultRevokeWindow = 2 * time.Minute
	// DefaultCacheTTL is the per-message cache's lifetime (seed: 24 h).
	DefaultCacheTTL = 24 * time.Hour
	// DefaultWriteConcurrency bounds the conversations one WriteBatch
	// writes at the same time.
	DefaultWriteConcurrency = 4
	// DefaultMaxBatch bounds the messages of one WriteBatch call.
	DefaultMaxBatch = 5000
	// DefaultWriteTimeout bounds the database calls of one document's write,
	// whatever the caller's deadline (see Store.write).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultUnknownHold is how long a document whose write had no answer
	// is refused to writers.
	DefaultUnknownHold = 30 * time.Second
	// writeAttempts bounds the update/insert steps per bucket (a duplicate
	// key steps back to update; losing that race again means the document
	// is being purged and re-created concurrently, which does not happen).
	writeAttempts = 4
)

// Config configures a Store and the Service on top of it.
type Config struct {
	// CollectionPrefix names the collections {prefix}_msgs, _meta,
	// _deletions, _user_state.
	CollectionPrefix string
	// BucketSize is the slots per document; recorded with the data and
	// refused if it differs from the recorded one.
	BucketSize int
	// ReadMode is "auto", "native" or "fallback" (see the package doc).
	ReadMode string
	// MaxRange bounds the seqs of one History call.
	MaxRange int
	// DelListMax bounds a slot's del_list.
	DelListMax int
	// RevokeWindow is how long after its creation a message may be revoked.
	RevokeWindow time.Duration
	// CacheTTL is the per-message Redis cache's TTL.
	CacheTTL time.Duration
	// WriteConcurrency bounds concurrent conversations in WriteBatch.
	WriteConcurrency int
	// MaxBatch bounds len(msgs) of one WriteBatch.
	MaxBatch int
	// WriteTimeout bounds the database calls of one document's write, run
	// under the document's lock until answered, past the caller's deadline
	// if need be (FerretDB v1 updates by read-modify-replace).
	WriteTimeout time.Duration
	// UnknownHold is how long writes of a document are refused after a
	// write of it had no answer within WriteTimeout (it may still be
	// running inside the database).
	UnknownHold time.Duration
	// Defects are shipped defects enabled on purpose (ref/defect; empty by
	// default): the lab's negative controls.
	Defects defect.Set
}

// DefaultConfig is the seed's layout with the named defaults.
func DefaultConfig() Config {
	return Config{
		CollectionPrefix: "history",
		BucketSize:       DefaultBucketSize,
		ReadMode:         ReadAuto,
		MaxRange:         DefaultMaxRange,
		DelListMax:       DefaultDelListMax,
		RevokeWindow:     DefaultRevokeWindow,
		CacheTTL:         DefaultCacheTTL,
		WriteConcurrency: DefaultWriteConcurrency,
		MaxBatch:         DefaultMaxBatch,
		WriteTimeout:     DefaultWriteTimeout,
		UnknownHold:      DefaultUnknownHold,
	}
}

// Validate checks every field; the error wraps model.ErrInvalid.
func (c Config) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: history config: "+f, append([]any{model.ErrInvalid}, a...)...)
	}
	switch {
	case c.CollectionPrefix == "":
		return bad("collection prefix is empty")
	case c.BucketSize < 1 || c.BucketSize > MaxBucketSize:
		return bad("bucket size %d not in 1..%d", c.BucketSize, MaxBucketSize)
	case c.ReadMode != ReadAuto && c.ReadMode != ReadNative && c.ReadMode != ReadFallback:
		return bad("read mode %q is not auto, native or fallback", c.ReadMode)
	case c.MaxRange < 1 || c.MaxRange > 10000:
		return bad("max range %d not in 1..10000", c.MaxRange)
	case c.DelListMax < 1 || c.DelListMax > 10000:
		return bad("del_list max %d not in 1..10000", c.DelListMax)
	case c.RevokeWindow <= 0:
		return bad("revoke window %s must be positive", c.RevokeWindow)
	case c.CacheTTL <= 0:
		return bad("cache ttl %s must be positive", c.CacheTTL)
	case c.WriteConcurrency < 1 || c.WriteConcurrency > 256:
		return bad("write concurrency %d not in 1..256", c.WriteConcurrency)
	case c.MaxBatch < 1:
		return bad("max batch %d must be positive", c.MaxBatch)
	case c.WriteTimeout <= 0:
		return bad("write timeout %s must be positive", c.WriteTimeout)
	case c.UnknownHold <= 0:
		return bad("unknown hold %s must be positive", c.UnknownHold)
	}
	return nil
}
