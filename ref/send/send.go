// Package send owns the send path of the reference server: validation,
// dedupe by (sender_uid, client_msg_id), msg_id, dense conv_seq, group
// commit, ack policies, and groups (create, members, membership).
//
// Group commit: Send validates the request, resolves the recipients, and
// queues it to one of Config.Shards committer goroutines chosen by conv_id
// hash (a bounded queue: when it is full Send waits up to its deadline, then
// fails with ErrUnavailable). Each committer takes up to MaxBatch messages
// (MaxBatchRows inbox rows) gathered for at most MaxWait and commits them in
// ONE READ COMMITTED transaction:
//
//  0. before queueing, a (sender_uid, client_msg_id) still in flight in
//     this process waits for that send's outcome, and one answered
//     recently (Config.DedupCacheSize/TTL) is answered from memory
//     (dedup.go): a retry storm does not reach MySQL;
//  1. dedupe of keys not known locally: a (sender_uid, client_msg_id)
//     already stored makes the msg_content INSERT fail on
//     uk_sender_client; in the same transaction the stored rows are looked
//     up and answered with Duplicate=true, the rest of the batch is
//     renumbered densely and inserted (no rollback). Only when that is not
//     possible (an earlier statement of the batch already inserted rows, or
//     repeated collisions) is the batch rolled back and run again with a
//     SELECT of the stored rows first (optimistic: no lookup per batch);
//  2. conv_counter advanced for each conversation (ascending conv_id) and
//     read back: dense conv_seq, no hole if the batch rolls back (when the
//     upsert created every row, the counters are the counts and the read
//     back is skipped; when the committer remembers counters it committed,
//     the upsert checks them itself, IF(max_seq = remembered), and the
//     exact affected-rows count proves them; a wrong one rolls the attempt
//     back and the next reads back: db.go, convTops);
//  3. msg_content multi-row INSERT;
//  4. Policy.InTx (strict: inbox.Writer's guarded fence raise, one UPDATE
//     that locks, checks and raises the seq_fence rows in ascending uid
//     order, with the seq proposals taken while the transaction began; a
//     guard that misses rolls the attempt back and the next one locks and
//     reads the rows: policy.go);
//  5. COMMIT; then Policy.AfterCommit, then every CommitHook, then the ACKs.
//
// Under the strict policy the committers claim the uids of their batches
// (claims.go): a message with a recipient in another committer's batch in
// flight waits for this committer's next batch, so batches of one process
// do not wait on each other's fence rows; a batch most of whose messages
// would wait (a hot uid) is instead ordered behind that batch, proposals and
// fence step after its.
//
// Each committer keeps one connection (session isolation READ COMMITTED,
// set once; so a batch begins with one round trip), replaced after a
// connection-level failure and closed, not pooled, when the committer ends.
//
// Deadlock (1213) and lock wait timeout (1205) retry the batch (MaxAttempts).
// A duplicate client_msg_id (a retry, or a concurrent copy committed by
// another process: 1062 on uk_sender_client) is answered with the stored
// row as step 1 says; imlab_send_batch_rollbacks_total counts rolled-back
// attempts by reason. A conv_seq already stored
// (uk_conv_seq: conv_counter set back by a restore) raises the counter from
// MAX(conv_seq) and retries. An unavailable backend fails the whole batch at
// once; any other error retries the batch's messages one by one, so a
// single bad message does not fail its batch-mates.
//
// The ack-policy seam is the Policy interface (policy.go): ref/fanout adds
// store, outbox and queue through Config.Policies without touching the
// batcher.
//
// Goroutines: the committers are owned by the Service; Close stops intake,
// lets the committers drain their queues, and waits for them. A strict
// attempt starts one goroutine for its seq proposals and waits for it
// before it returns.
//
// It must not serve reads (pull, history) and must not talk to Redis
// directly: the hot cache and push are CommitHooks.
package send

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/defect"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/msgid"
)

// CommitHook learns of committed inbox entries after COMMIT and before the
// ACK is released, per uid in seq order. Hooks must not block long.
type CommitHook interface {
	Committed(ctx context.Context, entries []model.InboxEntry)
}

// HookFunc adapts a function to CommitHook.
type HookFunc func(ctx context.Context, entries []model.InboxEntry)

// Committed implements CommitHook.
func (f HookFunc) Committed(ctx context.Context, entries []model.InboxEntry) { f(ctx, entries) }

type outcome struct {
	res model.SendResult
	err error
}

// Service is the send path of one process.
type Service struct {
	cfg    Config
	db     *sql.DB
	policy Policy
	ids    *msgid.Generator
	hooks  atomic.Pointer[[]CommitHook]
	m      metrics
	obs    sendObs // m for this policy

	queues []chan *Pending

	mu     sync.RWMutex
	closed bool
	intake sync.WaitGroup // Sends between the closed check and the enqueue
	stop   chan struct{}
	wg     sync.WaitGroup // committers

	bgCtx    context.Context
	bgCancel context.CancelFunc

	groups groupCache
	dd     *dedup
	// timers holds the stopped deadline timers of finished sends for the
	// next ones (a timer each: three allocations a send otherwise). A
	// stopped timer's channel yields no stale tick after Reset (Go 1.23
	// timers), and no timer is read after its Send returned.
	timers sync.Pool
	// hint is the guarded conv_counter UPDATE's index hint.
	hint inbox.PrimaryHint
	// claims is nil unless the policy writes inbox rows in the send
	// transaction (strict): see claims.
	claims *claims
}

// New starts a Service: cfg.Shards committer goroutines, stopped by Close.
// writer is used by the strict policy; reg may be nil.
func New(ctx context.Context, cfg Config, db *sql.DB, writer *inbox.Writer, reg prometheus.Registerer, hooks ...CommitHook) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("send: nil db")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	var policy Policy
	for _, p := range cfg.Policies {
		if p.Name() == cfg.Policy {
			policy = p
		}
	}
	if policy == nil { // "strict"
		st, err := NewStrict(writer)
		if err != nil {
			return nil, err
		}
		st.defects = cfg.Defects
		st.guardPause = int64(cfg.FenceGuardPause)
		policy = st
	}
	ids, err := msgid.New(cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg: cfg, db: db, policy: policy, ids: ids, m: m,
		queues: make([]chan *Pending, cfg.Shards),
		stop:   make(chan struct{}),
		groups: groupCache{ttl: cfg.GroupCacheTTL, max: cfg.GroupCacheSize, m: map[uint64]groupEntry{}},
		dd:     newDedup(cfg.DedupCacheTTL, cfg.DedupCacheSize),
	}
	s.obs = m.forPolicy(policy.Name())
	if _, ok := policy.(inboxWriter); ok && cfg.Shards > 1 {
		s.claims = newClaims(cfg.Shards)
	}
	hs := append([]CommitHook(nil), hooks...)
	for _, h := range hs {
		if h == nil {
			return nil, errors.New("send: nil commit hook")
		}
	}
	s.hooks.Store(&hs)
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	for i := range s.queues {
		s.queues[i] = make(chan *Pending, cfg.QueueSize)
		s.wg.Add(1)
		go s.committer(i, s.queues[i])
	}
	return s, nil
}

// PolicyName is the active ack policy.
func (s *Service) PolicyName() string { return s.policy.Name() }

// AddHook adds a CommitHook for batches committed from now on.
func (s *Service) AddHook(h CommitHook) {
	if h == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.hooks.Load()
	hs := append(append([]CommitHook(nil), old...), h)
	s.hooks.Store(&hs)
}

// Close stops intake (later Sends fail with ErrUnavailable), lets the
// committers finish what is queued, and waits for them.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.intake.Wait()
	close(s.stop)
	s.wg.Wait()
	s.bgCancel()
	return nil
}

func shardOf(convID uint64, n int) int {
	x := convID
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return int(x % uint64(n))
}

// Send stores one message under the active policy and returns its ACK. A
// retried (sender, client_msg_id) returns the first answer with
// Duplicate=true.
func (s *Service) Send(ctx context.Context, req model.SendRequest) (res model.SendResult, err error) {
	start := time.Now()
	defer func() { s.obs.observe(start, res, err) }()

	if err := req.Validate(); err != nil {
		return model.SendResult{}, err
	}
	// The send's deadline: the caller's or SendTimeout from now, the
	// earlier. One timer bounds the waits below (a derived context would
	// cost several allocations more per send); the committer does not start
	// a send past its deadline.
	deadline := start.Add(s.cfg.SendTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	expire := s.timer(deadline.Sub(start))
	defer func() {
		expire.Stop()
		s.timers.Put(expire)
	}()
	convID := req.ConvID()
	p := &Pending{
		Req: req,
		Msg: model.Message{
			ConvID: convID, ConvType: req.ConvType, SenderUID: req.SenderUID,
			ClientMsgID: req.ClientMsgID, Content: req.Content,
		},
		start:    start,
		ctx:      ctx,
		deadline: deadline,
		done:     make(chan outcome, 1),
		key:      dupKey{req.SenderUID, req.ClientMsgID},
	}
	if req.ConvType == model.ConvGroup {
		mctx, cancel := context.WithDeadline(ctx, deadline)
		members, err := s.Members(mctx, req.GroupID)
		cancel()
		if err != nil {
			return model.SendResult{}, err
		}
		if !containsSorted(members, req.SenderUID) {
			return model.SendResult{}, fmt.Errorf("%w: uid %d is not a member of group %d", model.ErrForbidden, req.SenderUID, req.GroupID)
		}
		p.Recipients = members
	} else {
		a, b := req.SenderUID, req.ToUID
		if a > b {
			a, b = b, a
		}
		p.pair = [2]uint64{a, b}
		p.Recipients = p.pair[:]
	}

	// A duplicate of a send answered recently or still in flight in this
	// process gets that send's answer without a batch (not with the
	// retry-stored-twice defect, which does not recognise retries).
	for !s.cfg.Defects.Has(defect.RetryStoredTwice) {
		r, hit, f, own := s.dd.claimInto(p.key, start, &p.fl)
		if hit {
			s.m.dedup.WithLabelValues("recent").Inc()
			r.Duplicate = true
			return r, nil
		}
		if own {
			p.flight = f
			break
		}
		r, ok, err := f.await(ctx, expire.C)
		if err != nil {
			return model.SendResult{}, err
		}
		if ok {
			s.m.dedup.WithLabelValues("inflight").Inc()
			return r, nil
		}
		// The flight failed: this send tries itself (with a flight of its
		// own: p.fl was not used).
	}

	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		err := fmt.Errorf("%w: send service closed", model.ErrUnavailable)
		s.dd.finish(p.key, p.flight, outcome{err: err})
		return model.SendResult{}, err
	}
	s.intake.Add(1)
	s.mu.RUnlock()
	q := s.queues[shardOf(convID, len(s.queues))]
	// A queue with room takes p without a blocking select (which would
	// lock all three channels).
	select {
	case q <- p:
		s.intake.Done()
		return s.await(ctx, p, expire.C)
	default:
	}
	select {
	case q <- p:
		s.intake.Done()
	case <-ctx.Done():
		s.intake.Done()
		err := fmt.Errorf("%w: send queue full: %v", model.ErrUnavailable, ctx.Err())
		s.dd.finish(p.key, p.flight, outcome{err: err})
		return model.SendResult{}, err
	case <-expire.C:
		s.intake.Done()
		err := fmt.Errorf("%w: send queue full: %v", model.ErrUnavailable, context.DeadlineExceeded)
		s.dd.finish(p.key, p.flight, outcome{err: err})
		return model.SendResult{}, err
	}
	return s.await(ctx, p, expire.C)
}

// timer is a timer that fires after d, from the pool when one is there.
// The caller stops it before putting it back.
func (s *Service) timer(d time.Duration) *time.Timer {
	if t, ok := s.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// await waits for the answer to p (queued), until ctx ends or expire fires.
func (s *Service) await(ctx context.Context, p *Pending, expire <-chan time.Time) (model.SendResult, error) {
	select {
	case o := <-p.done:
		return o.res, o.err
	case <-ctx.Done():
		return model.SendResult{}, fmt.Errorf("%w: send not acknowledged in time: %v", model.ErrUnavailable, ctx.Err())
	case <-expire:
		return model.SendResult{}, fmt.Errorf("%w: send not acknowledged in time: %v", model.ErrUnavailable, context.DeadlineExceeded)
	}
}

func containsSorted(s []uint64, v uint64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i] >= v })
	return i < len(s) && s[i] == v
}

// committer owns one shard queue until Close. With claims (the strict
// policy) it commits the part of each gathered batch no other committer's
// batch holds a recipient of, and keeps the rest (left) at the head of its
// next batch.
func (s *Service) committer(idx int, q chan *Pending) {
	defer s.wg.Done()
	cc := &txConn{db: s.db}
	cc.convs.hint = &s.hint
	defer cc.discard()
	batch := make([]*Pending, 0, s.cfg.MaxBatch)
	take := make([]*Pending, 0, s.cfg.MaxBatch)
	var left []*Pending
	var timer *time.Timer
	for {
		batch = append(batch[:0], left...)
		left = left[:0]
		if len(batch) == 0 {
			select {
			case first := <-q:
				batch = append(batch, first)
			case <-s.stop:
				s.drain(cc, q, batch)
				return
			}
		}
		timer = s.gather(q, &batch, timer)
		if s.claims == nil {
			s.commit(cc, batch)
			continue
		}
		var changed <-chan struct{}
		var t *ticket
		take, left, t, changed = s.claims.claim(idx, batch, take[:0], left)
		if len(take) == 0 {
			// Everything waits on another committer's batch.
			select {
			case <-changed:
			case <-s.stop:
				s.drain(cc, q, left)
				return
			}
			continue
		}
		for _, p := range take {
			p.tk = t
		}
		s.commit(cc, take)
		s.claims.release(t, take)
	}
}

// gather fills batch (holding at least one message) from q up to MaxBatch
// messages and MaxBatchRows rows, waiting at most MaxWait after the call
// for more; timer is reused across calls.
func (s *Service) gather(q chan *Pending, batch *[]*Pending, timer *time.Timer) *time.Timer {
	rows := 0
	for _, p := range *batch {
		rows += len(p.Recipients)
	}
	var deadline <-chan time.Time
	if s.cfg.MaxWait > 0 {
		if timer == nil {
			timer = time.NewTimer(s.cfg.MaxWait)
		} else {
			timer.Reset(s.cfg.MaxWait)
		}
		deadline = timer.C
	}
gather:
	for len(*batch) < s.cfg.MaxBatch && rows < s.cfg.MaxBatchRows {
		select {
		case p := <-q:
			*batch = append(*batch, p)
			rows += len(p.Recipients)
			continue
		default:
		}
		if deadline == nil {
			break
		}
		select {
		case p := <-q:
			*batch = append(*batch, p)
			rows += len(p.Recipients)
		case <-deadline:
			deadline = nil
			break gather
		case <-s.stop:
			break gather
		}
	}
	if deadline != nil {
		// Go >= 1.23 timers: after Stop no stale value is ever received,
		// so the next Reset starts clean.
		timer.Stop()
	}
	return timer
}

// drain commits, after Close, the messages kept from earlier batches and
// what was queued before Close, without claims (MySQL's locks still guard
// the fence; the other committers drain at the same time).
func (s *Service) drain(cc *txConn, q chan *Pending, kept []*Pending) {
	batch := append([]*Pending(nil), kept...)
	var timer *time.Timer
	for {
		// stop is closed: gather takes what is queued and does not wait.
		timer = s.gather(q, &batch, timer)
		if len(batch) == 0 {
			return
		}
		s.commit(cc, batch)
		batch = batch[:0]
	}
}

type dupKey struct {
	sender uint64
	client string
}

// commit runs one batch to its ACKs. Every Pending of batch is answered.
func (s *Service) commit(cc *txConn, batch []*Pending) {
	// Requests whose caller gave up are not started.
	live := batch[:0:0]
	now := time.Now()
	for _, p := range batch {
		if err := p.expired(now); err != nil {
			p.dups = nil
			s.fail(p, fmt.Errorf("%w: %v", model.ErrUnavailable, err))
			continue
		}
		live = append(live, p)
	}
	// The same (sender, client_msg_id) twice in one batch: the first one is
	// stored, the others get its answer.
	leaders := live[:0:0]
	byKey := make(map[dupKey]*Pending, len(live))
	for _, p := range live {
		k := dupKey{p.Req.SenderUID, p.Req.ClientMsgID}
		if l, ok := byKey[k]; ok {
			l.dups = append(l.dups, p)
			continue
		}
		p.dups = nil
		byKey[k] = p
		leaders = append(leaders, p)
	}
	if len(leaders) == 0 {
		return
	}
	s.m.batchSize.Observe(float64(len(leaders)))
	rest, err := s.runBatch(cc, leaders)
	if err == nil {
		return
	}
	if len(rest) == 1 || !itemSpecific(err) {
		for _, p := range rest {
			s.fail(p, err)
		}
		return
	}
	// Retry one by one so that one bad message fails alone.
	for _, p := range rest {
		if left, err := s.runBatch(cc, []*Pending{p}); err != nil {
			for _, q := range left {
				s.fail(q, err)
			}
		}
	}
}

// itemSpecific tells whether a failed batch may owe its error to one of
// its messages (then the messages are retried one by one); an unavailable
// backend or an expired deadline fails them all at once.
func itemSpecific(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, model.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn), errors.As(err, &ne):
		return false
	}
	return true
}

func (s *Service) fail(p *Pending, err error) {
	if !isModelErr(err) {
		err = fmt.Errorf("%w: %v", model.ErrUnavailable, err)
	}
	s.deliver(p, outcome{err: err})
	for _, d := range p.dups {
		s.deliver(d, outcome{err: err})
	}
}

// deliver hands o to p's caller and to the duplicates waiting on p's
// flight.
func (s *Service) deliver(p *Pending, o outcome) {
	p.done <- o
	if p.flight != nil {
		s.dd.finish(p.key, p.flight, o)
	}
}

func isModelErr(err error) bool {
	for _, e := range []error{model.ErrInvalid, model.ErrForbidden, model.ErrNotFound, model.ErrConflict,
		model.ErrTooLarge, model.ErrUnavailable, model.ErrRateLimited, model.ErrUnauthorized} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Service) answer(p *Pending, res model.SendResult) {
	s.deliver(p, outcome{res: res})
	dup := res
	dup.Duplicate = true
	for _, d := range p.dups {
		s.deliver(d, outcome{res: dup})
	}
}

// errConvBehind marks an attempt rolled back because a conv_seq taken from
// conv_counter was already stored (the counter was set back).
var errConvBehind = errors.New("send: conv_counter behind msg_content")

// maxInPlaceDups bounds how many times one attempt answers stored
// duplicates in place (each time a concurrent commit of another key of the
// batch collided) before it rolls back and retries with a lookup first.
const maxInPlaceDups = 3

// rollbackReason labels a rolled-back attempt for
// imlab_send_batch_rollbacks_total.
func rollbackReason(err error) string {
	switch {
	case errors.Is(err, errDupRace):
		return "duplicate"
	case errors.Is(err, errConvBehind):
		return "conv_behind"
	case errors.Is(err, errConvStale):
		return "conv_stale"
	case errors.Is(err, inbox.ErrFenceMoved):
		return "fence_moved"
	case inbox.Retryable(err):
		return "retryable"
	case !itemSpecific(err):
		return "unavailable"
	default:
		return "error"
	}
}

// dropStored runs after a msg_content INSERT of work failed on
// uk_sender_client (the statement changed nothing; the conv_counter rows of
// work are locked by this transaction). It looks the stored rows up, answers
// them with Duplicate=true, gives the remaining messages of each
// conversation the same dense conv_seqs from the lowest one taken, and sets
// the counters back by the number dropped. It returns the remaining
// messages.
func (s *Service) dropStored(ctx context.Context, tx *sql.Tx, work []*Pending) ([]*Pending, error) {
	found, err := lookupSent(ctx, tx, work)
	if err != nil {
		return work, err
	}
	if len(found) == 0 {
		return work, fmt.Errorf("%w: stored duplicate not found", errDupRace)
	}
	low := make(map[uint64]uint64)
	for _, p := range work {
		if l, ok := low[p.Msg.ConvID]; !ok || p.Msg.ConvSeq < l {
			low[p.Msg.ConvID] = p.Msg.ConvSeq
		}
	}
	dropped := make(map[uint64]uint64)
	fresh := work[:0:0]
	for _, p := range work {
		if r, ok := found[p.key]; ok {
			dropped[p.Msg.ConvID]++
			r.Duplicate = true
			s.answer(p, r)
			s.m.dedup.WithLabelValues("store").Inc()
			continue
		}
		fresh = append(fresh, p)
	}
	for _, p := range fresh {
		p.Msg.ConvSeq = low[p.Msg.ConvID]
		low[p.Msg.ConvID]++
	}
	if err := lowerConvCounters(ctx, tx, dropped); err != nil {
		return fresh, err
	}
	return fresh, nil
}

// errDupRace marks an attempt rolled back because a client_msg_id of the
// batch was committed meanwhile by another transaction.
var errDupRace = errors.New("send: duplicate client_msg_id committed concurrently")

// runBatch commits batch with bounded retries and answers every Pending on
// success. On failure it returns the Pendings not yet answered (some may
// have been answered as duplicates on the way) and the last error.
func (s *Service) runBatch(cc *txConn, batch []*Pending) ([]*Pending, error) {
	var lastErr error
	// Dedupe is optimistic: the first attempt relies on uk_sender_client to
	// reject a (sender, client_msg_id) already stored; only after such a
	// rejection does an attempt look the stored answers up first.
	lookup := false
	for attempt := 0; attempt < s.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * time.Millisecond)
			select {
			case <-t.C:
			case <-s.bgCtx.Done():
				t.Stop()
				return batch, fmt.Errorf("%w: send service closed", model.ErrUnavailable)
			}
		}
		rest, err := s.attempt(cc, batch, lookup)
		if err != nil {
			s.m.rollbacks.WithLabelValues(rollbackReason(err)).Inc()
		}
		if err != nil && !itemSpecific(err) {
			// The session may be broken (network, timeout): the next
			// attempt starts on a fresh connection.
			cc.discard()
		}
		if errors.Is(err, errDupRace) {
			lookup = true
		}
		if errors.Is(err, errConvBehind) {
			cc.convs.forget(rest)
			if rerr := repairConvCounters(s.bgCtx, s.db, rest); rerr != nil {
				return rest, rerr
			}
		}
		if err == nil {
			return nil, nil
		}
		lastErr = err
		// Answers already given (duplicates found) are not repeated.
		batch = rest
		if len(batch) == 0 {
			return nil, nil
		}
		if !errors.Is(err, errDupRace) && !errors.Is(err, errConvBehind) && !errors.Is(err, errConvStale) &&
			!errors.Is(err, inbox.ErrFenceMoved) && !inbox.Retryable(err) {
			return batch, err
		}
	}
	return batch, fmt.Errorf("%w: batch gave up after %d attempts: %v", model.ErrUnavailable, s.cfg.MaxAttempts, lastErr)
}

// attempt runs one transaction for batch (looking stored answers up first
// when lookup is set). On a retryable error it returns the Pendings still
// unanswered.
func (s *Service) attempt(cc *txConn, batch []*Pending, lookup bool) (rest []*Pending, err error) {
	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.TxTimeout)
	defer cancel()
	if iw, ok := s.policy.(inboxWriter); ok {
		if wait := iw.prepare(ctx, batch); wait != nil {
			defer wait()
		}
	}
	tx, err := cc.begin(ctx)
	if err != nil {
		return batch, fmt.Errorf("%w: begin: %v", model.ErrUnavailable, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()

	work := batch
	var found map[dupKey]model.SendResult
	if lookup && s.policy.StoresContent() {
		s.m.lookups.Inc()
		found, err = lookupSent(ctx, tx, work)
		if err != nil {
			return batch, err
		}
		if len(found) > 0 {
			fresh := work[:0:0]
			for _, p := range work {
				if r, ok := found[dupKey{p.Req.SenderUID, p.Req.ClientMsgID}]; ok {
					r.Duplicate = true
					s.answer(p, r)
					continue
				}
				fresh = append(fresh, p)
			}
			work = fresh
		}
	}
	if len(work) == 0 {
		return nil, tx.Commit()
	}
	if err = advanceConvSeqs(ctx, tx, work, &cc.convs); err != nil {
		return work, err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, p := range work {
		p.Msg.MsgID = s.ids.Next()
		p.Msg.CreatedAt = now
		if s.cfg.Defects.Has(defect.RetryStoredTwice) {
			// Defect: the stored key is made unique per message, so
			// uk_sender_client never matches a retry.
			p.Msg.ClientMsgID = fmt.Sprintf("%.40s#%x", p.Req.ClientMsgID, p.Msg.MsgID)
		}
	}
	for try := 0; s.policy.StoresContent(); try++ {
		var inserted int
		inserted, err = insertContent(ctx, tx, work)
		if err == nil {
			break
		}
		key, dup := inbox.DupKey(err)
		if dup && key == "uk_sender_client" && inserted == 0 && try < maxInPlaceDups {
			// A (sender, client_msg_id) of the batch is stored already
			// (another process, or a key this one no longer remembers).
			// The failed statement changed nothing: answer the stored
			// ones, renumber the rest densely, and go on in the same
			// transaction instead of rolling the whole batch back.
			var derr error
			work, derr = s.dropStored(ctx, tx, work)
			if derr != nil {
				err = derr
				return work, err
			}
			err = nil
			if len(work) == 0 {
				return nil, tx.Commit()
			}
			continue
		}
		switch {
		case dup && key == "uk_sender_client":
			return work, fmt.Errorf("%w: %v", errDupRace, err)
		case dup && key == "uk_conv_seq":
			// conv_counter is behind msg_content (restored): raise it
			// after the rollback, then retry.
			return work, fmt.Errorf("%w: %v", errConvBehind, err)
		}
		return work, err
	}
	entries, err := s.policy.InTx(ctx, tx, work)
	if err != nil {
		return work, err
	}
	if s.cfg.Defects.Has(defect.AckBeforeCommit) && s.policy.Name() == "strict" {
		// Defect: the ACKs go out before the COMMIT; a commit that fails
		// now loses what was ACKed.
		for _, p := range work {
			s.answer(p, model.SendResult{MsgID: p.Msg.MsgID, ConvID: p.Msg.ConvID, ConvSeq: p.Msg.ConvSeq, ServerTime: p.Msg.CreatedAt})
		}
		if err = tx.Commit(); err != nil {
			return nil, fmt.Errorf("%w: commit: %v", model.ErrUnavailable, err)
		}
		for _, h := range *s.hooks.Load() {
			h.Committed(ctx, entries)
		}
		return nil, nil
	}
	if err = tx.Commit(); err != nil {
		return work, fmt.Errorf("%w: commit: %v", model.ErrUnavailable, err)
	}
	cc.convs.committed(work)
	// Committed: from here on every Pending is answered.
	if aerr := s.policy.AfterCommit(ctx, work); aerr != nil {
		for _, p := range work {
			s.fail(p, fmt.Errorf("%w: after commit (%s): %v", model.ErrUnavailable, s.policy.Name(), aerr))
		}
		return nil, nil
	}
	if len(entries) > 0 {
		for _, h := range *s.hooks.Load() {
			h.Committed(ctx, entries)
		}
	}
	for _, p := range work {
		s.answer(p, model.SendResult{MsgID: p.Msg.MsgID, ConvID: p.Msg.ConvID, ConvSeq: p.Msg.ConvSeq, ServerTime: p.Msg.CreatedAt})
	}
	return nil, nil
}

// txConn is a committer's own connection, kept across batches with the
// session isolation set to READ COMMITTED once, so that a batch begins with
// one round trip (START TRANSACTION) instead of two (SET TRANSACTION ...
// before each START TRANSACTION). It is owned by one committer goroutine.
// The connection never goes back to the pool with the changed session
// setting: discard closes it.
type txConn struct {
	db   *sql.DB
	conn *sql.Conn
	// perTx: the server refused the session setting; the isolation level
	// is then set per transaction, as database/sql does.
	perTx bool
	// convs is what the committer knows of its conversations' counters
	// (db.go, convTops).
	convs convTops
}

var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// begin starts a READ COMMITTED transaction on the committer's connection,
// taking a fresh one when there is none or the kept one fails (closed by the
// server while idle, network cut).
func (c *txConn) begin(ctx context.Context) (*sql.Tx, error) {
	var lastErr error
	for try := 0; try < 2; try++ {
		if c.conn == nil {
			conn, err := c.db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			c.conn = conn
			if !c.perTx {
				if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
					var me *mysql.MySQLError
					if !errors.As(err, &me) {
						c.discard()
						lastErr = err
						continue
					}
					c.perTx = true
				}
			}
		}
		var opts *sql.TxOptions
		if c.perTx {
			opts = readCommitted
		}
		tx, err := c.conn.BeginTx(ctx, opts)
		if err == nil {
			return tx, nil
		}
		c.discard()
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// discard closes the kept connection (it does not return to the pool).
func (c *txConn) discard() {
	if c.conn == nil {
		return
	}
	_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.conn.Close()
	c.conn = nil
}

// CreateGroup creates a group with exactly these members (1..500 distinct
// uids). Creating it again with the same member set succeeds; with another
// set it fails with ErrConflict.
func (s *Service) CreateGroup(ctx context.Context, groupID uint64, members []uint64) error {
	if _, err := model.GroupConvID(groupID); err != nil {
		return err
	}
	if len(members) == 0 {
		return fmt.Errorf("%w: a group needs at least one member", model.ErrInvalid)
	}
	if len(members) > model.MaxGroupMembers {
		return fmt.Errorf("%w: %d members (max %d)", model.ErrInvalid, len(members), model.MaxGroupMembers)
	}
	sorted := append([]uint64(nil), members...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for i, u := range sorted {
		if u == 0 || u > model.MaxUID {
			return fmt.Errorf("%w: member uid %d out of range 1..%d", model.ErrInvalid, u, model.MaxUID)
		}
		if i > 0 && sorted[i-1] == u {
			return fmt.Errorf("%w: member uid %d listed twice", model.ErrInvalid, u)
		}
	}
	hash := memberHash(sorted)
	if err := createGroupTx(ctx, s.db, groupID, sorted, hash); err != nil {
		return err
	}
	s.groups.put(groupID, sorted)
	return nil
}

func memberHash(sorted []uint64) []byte {
	h := sha256.New()
	var b [8]byte
	for _, u := range sorted {
		binary.BigEndian.PutUint64(b[:], u)
		h.Write(b[:])
	}
	return h.Sum(nil)
}

// Members lists a group's members, ascending (cached for GroupCacheTTL).
// A group that does not exist is ErrNotFound.
func (s *Service) Members(ctx context.Context, groupID uint64) ([]uint64, error) {
	if _, err := model.GroupConvID(groupID); err != nil {
		return nil, err
	}
	if m, ok := s.groups.get(groupID); ok {
		return m, nil
	}
	m, err := loadMembers(ctx, s.db, groupID)
	if err != nil {
		return nil, err
	}
	s.groups.put(groupID, m)
	return m, nil
}

// MaxConvSeq is the highest conv_seq committed in conversation convID (0
// when it has none): conv_counter is this package's, advanced in the same
// transaction as the messages, so it never runs ahead of a stored message.
func (s *Service) MaxConvSeq(ctx context.Context, convID uint64) (uint64, error) {
	var n uint64
	err := s.db.QueryRowContext(ctx, "SELECT max_seq FROM conv_counter WHERE conv_id = ?", convID).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("%w: send: read conv_counter: %v", model.ErrUnavailable, err)
	}
	return n, nil
}

// IsMember tells whether uid belongs to conversation convID: for 1:1 one of
// its two uids, for a group a member (false for a group that does not exist).
func (s *Service) IsMember(ctx context.Context, convID, uid uint64) (bool, error) {
	t, a, b, err := model.ParseConvID(convID)
	if err != nil {
		return false, err
	}
	if t == model.ConvSingle {
		return uid == a || uid == b, nil
	}
	m, err := s.Members(ctx, a)
	if errors.Is(err, model.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return containsSorted(m, uid), nil
}

type groupEntry struct {
	members []uint64
	expires time.Time
}

// groupCache keeps member lists briefly; bounded (cleared when full).
type groupCache struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	m   map[uint64]groupEntry
}

func (c *groupCache) get(id uint64) ([]uint64, bool) {
	if c.ttl == 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || time.Now().After(e.expires) {
		return nil, false
	}
	return e.members, true
}

func (c *groupCache) put(id uint64, members []uint64) {
	if c.ttl == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[id] = groupEntry{members: members, expires: time.Now().Add(c.ttl)}
}
