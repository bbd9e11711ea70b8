package history

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/bson"

	"imlab/ref/defect"
	"imlab/ref/model"
	"imlab/ref/rkeys"
)

// Membership answers whether uid belongs to a group conversation (the send
// path owns groups). 1:1 membership is derived from the conv_id itself.
type Membership interface {
	IsMember(ctx context.Context, convID, uid uint64) (bool, error)
}

// ConvSeqSource gives the highest conv_seq committed for a conversation
// (the send path's conv_counter). Clear uses it when set; without it the
// watermark is the highest seq already in MongoDB, which lags the send path
// by the history tier's consumer lag.
type ConvSeqSource interface {
	MaxConvSeq(ctx context.Context, convID uint64) (uint64, error)
}

// Deps are the Service's collaborators.
type Deps struct {
	// Redis holds the per-message cache; nil disables it.
	Redis redis.UniversalClient
	// Keys names the cache keys (rkeys.HistoryMsg).
	Keys rkeys.Keys
	// Members answers group membership; required.
	Members Membership
	// ConvSeqs is optional (see ConvSeqSource).
	ConvSeqs ConvSeqSource
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CacheRequests, if set, is the process's
	// imlab_cache_requests_total{cache,result} vector; History adds its
	// per-message lookups with cache="history", result "hit" or "miss".
	CacheRequests *prometheus.CounterVec
}

// Service is what the HTTP routes call: history reads projected for the
// caller, revoke, delete-for-me, clear, the admin physical delete and the
// 1:1 read flag. Every error wraps a model.Err* sentinel.
type Service struct {
	store    *Store
	cfg      Config
	cache    *cache
	members  Membership
	convSeqs ConvSeqSource
	now      func() time.Time
	hits     prometheus.Counter // nil without Deps.CacheRequests
	misses   prometheus.Counter
}

// NewService wires a Service on a Store.
func NewService(store *Store, d Deps) (*Service, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: history: nil store", model.ErrInvalid)
	}
	if d.Members == nil {
		return nil, fmt.Errorf("%w: history: a Membership is required", model.ErrInvalid)
	}
	s := &Service{store: store, cfg: store.cfg, members: d.Members, convSeqs: d.ConvSeqs, now: d.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if d.Redis != nil {
		s.cache = &cache{rdb: d.Redis, keys: d.Keys, ttl: store.cfg.CacheTTL}
	}
	if d.CacheRequests != nil {
		var err error
		if s.hits, err = d.CacheRequests.GetMetricWithLabelValues("history", "hit"); err != nil {
			return nil, fmt.Errorf("%w: history: cache metric: %w", model.ErrInvalid, err)
		}
		if s.misses, err = d.CacheRequests.GetMetricWithLabelValues("history", "miss"); err != nil {
			return nil, fmt.Errorf("%w: history: cache metric: %w", model.ErrInvalid, err)
		}
	}
	return s, nil
}

// Store is the underlying store (for the history consumer tier's writer).
func (s *Service) Store() *Store { return s.store }

// MaxRange is the most seqs one History call accepts (for a route that
// defaults to_seq).
func (s *Service) MaxRange() int { return s.cfg.MaxRange }

// HistoryItem is one conv_seq of a history page as the caller sees it.
// A tombstone carries conv_seq only: there is nothing to show at that seq
// for this caller (never written, physically deleted, or deleted by the
// caller for themselves), and the client must not wait for it. A revoked
// message keeps its envelope, loses its content, and says revoked.
// is_read is present for 1:1 conversations only.
type HistoryItem struct {
	ConvSeq   uint64 `json:"conv_seq"`
	MsgID     uint64 `json:"msg_id"`
	SenderUID uint64 `json:"sender_uid"`
	CreatedAt int64  `json:"created_at"` // unix ms
	Content   string `json:"content"`
	Revoked   bool   `json:"revoked,omitempty"`
	Tombstone bool   `json:"tombstone,omitempty"`
	IsRead    *bool  `json:"is_read,omitempty"`
}

// access checks the caller and the conversation: a malformed id is
// ErrInvalid, a non-member ErrForbidden.
func (s *Service) access(ctx context.Context, uid, convID uint64) (model.ConvType, error) {
	if uid == 0 || uid > model.MaxUID {
		return 0, fmt.Errorf("%w: uid must be in 1..%d", model.ErrInvalid, model.MaxUID)
	}
	t, a, b, err := model.ParseConvID(convID)
	if err != nil {
		return 0, err
	}
	if t == model.ConvSingle {
		if uid != a && uid != b {
			return 0, fmt.Errorf("%w: uid %d is not a party of conversation %d", model.ErrForbidden, uid, convID)
		}
		return t, nil
	}
	ok, err := s.members.IsMember(ctx, convID, uid)
	if err != nil {
		return 0, fmt.Errorf("history: membership of %d in %d: %w", uid, convID, err)
	}
	if !ok {
		return 0, fmt.Errorf("%w: uid %d is not a member of conversation %d", model.ErrForbidden, uid, convID)
	}
	return t, nil
}

func (s *Service) checkRange(fromSeq, toSeq uint64) error {
	switch {
	case fromSeq == 0:
		return fmt.Errorf("%w: from_seq must be at least 1", model.ErrInvalid)
	case toSeq < fromSeq:
		return fmt.Errorf("%w: to_seq %d is below from_seq %d", model.ErrInvalid, toSeq, fromSeq)
	case toSeq-fromSeq >= uint64(s.cfg.MaxRange):
		return fmt.Errorf("%w: range of %d seqs exceeds the limit of %d", model.ErrInvalid, toSeq-fromSeq+1, s.cfg.MaxRange)
	}
	return nil
}

// History returns conv_seqs fromSeq..toSeq (at most Config.MaxRange of them)
// of a conversation as uid sees them. Seqs at or below uid's clear
// watermark are left out. Every seq from the first one above the watermark
// up to the last seq known to be written appears exactly once, as a
// message, a revoke notice or a tombstone; seqs beyond what is written are
// not returned (ask again later). Order: ascending conv_seq.
func (s *Service) History(ctx context.Context, uid, convID, fromSeq, toSeq uint64) ([]HistoryItem, error) {
	if err := s.checkRange(fromSeq, toSeq); err != nil {
		return nil, err
	}
	t, err := s.access(ctx, uid, convID)
	if err != nil {
		return nil, err
	}
	minSeq, err := s.store.minSeq(ctx, convID, uid)
	if err != nil {
		return nil, err
	}
	start := max(fromSeq, minSeq+1)
	items := []HistoryItem{}
	if start > toSeq {
		return items, nil
	}
	seqs := make([]uint64, 0, toSeq-start+1)
	for seq := start; seq <= toSeq; seq++ {
		seqs = append(seqs, seq)
	}
	slots, err := s.cache.get(ctx, convID, seqs)
	if err != nil {
		// The cache is an accelerator, never the truth: read through.
		slots = map[uint64]Slot{}
	}
	var known uint64
	var misses []uint64
	for _, seq := range seqs {
		if _, ok := slots[seq]; ok {
			known = max(known, seq)
		} else {
			misses = append(misses, seq)
		}
	}
	if s.hits != nil && s.cache != nil {
		s.hits.Add(float64(len(seqs) - len(misses)))
		s.misses.Add(float64(len(misses)))
	}
	if len(misses) > 0 {
		rr, err := s.store.ReadSlots(ctx, convID, misses)
		if err != nil {
			return nil, err
		}
		known = max(known, rr.Known)
		fill := make([]Slot, 0, len(misses))
		for _, seq := range misses {
			sl := rr.Slots[seq]
			slots[seq] = sl
			fill = append(fill, sl)
		}
		_ = s.cache.put(ctx, convID, fill) // a failed fill only costs a later miss
	}

	var full []uint64
	for _, seq := range seqs {
		sl := slots[seq]
		if sl.State == SlotFilled && len(sl.DelList) >= s.cfg.DelListMax && !sl.DeletedBy(uid) {
			full = append(full, seq)
		}
	}
	overflow, err := s.store.deletionRecords(ctx, convID, uid, full)
	if err != nil {
		return nil, err
	}
	for _, seq := range seqs {
		if seq > known {
			break
		}
		items = append(items, project(slots[seq], uid, t, overflow[seq], s.cfg.Defects))
	}
	return items, nil
}

// project is the read-time rewrite of one shared slot for one viewer (d:
// the shipped defects in force, none on a correct server).
func project(sl Slot, uid uint64, t model.ConvType, deletedByRecord bool, d defect.Set) HistoryItem {
	deleted := sl.DeletedBy(uid)
	if d.Has(defect.DeleteHidesForEveryone) {
		deleted = len(sl.DelList) > 0 // the defect: anyone's delete-for-me
	}
	if sl.State != SlotFilled || sl.Msg == nil || deletedByRecord || deleted {
		return HistoryItem{ConvSeq: sl.Seq, Tombstone: true}
	}
	it := HistoryItem{
		ConvSeq:   sl.Seq,
		MsgID:     sl.Msg.MsgID,
		SenderUID: sl.Msg.SenderUID,
		CreatedAt: sl.Msg.CreatedAt.UnixMilli(),
		Content:   sl.Msg.Content,
	}
	revoked := sl.Revoke != nil
	if revoked && d.Has(defect.RevokeShownToRevokerOnly) {
		revoked = sl.Revoke.UserID == uid // the defect: a per-user tag
	}
	if revoked {
		it.Revoked = true
		it.Content = ""
	}
	if t == model.ConvSingle {
		read := sl.IsRead
		it.IsRead = &read
	}
	return it
}

func slotPath(slot int, field string) string {
	return "msgs." + strconv.Itoa(slot) + "." + field
}

// refresh re-reads a slot from MongoDB and stores it in the cache (keeping
// the higher version). It ends every mutation, including idempotent no-ops,
// so a retried call repairs a cache store that failed the first time.
func (s *Service) refresh(ctx context.Context, convID, seq uint64) error {
	if s.cache == nil {
		return nil
	}
	sl, err := s.store.loadSlot(ctx, convID, seq)
	if err != nil {
		return err
	}
	return s.cache.put(ctx, convID, []Slot{sl})
}

// slotFor reads one slot straight from MongoDB for a mutation by uid: a
// conv_seq of 0 is ErrInvalid, a uid with no access to the conversation is
// refused as access refuses it (before anything is read). An empty
// slot whose conv_seq the send path has committed (ConvSeqSource) and the
// store does not know as written yet is ErrUnavailable: the history tier
// has not written it (it lags the send path), a retry will find it.
// Otherwise an empty slot is for the caller to refuse as ErrNotFound: no
// message is or will be there.
func (s *Service) slotFor(ctx context.Context, uid, convID, convSeq uint64) (Slot, error) {
	if convSeq == 0 {
		return Slot{}, fmt.Errorf("%w: conv_seq must be at least 1", model.ErrInvalid)
	}
	if _, err := s.access(ctx, uid, convID); err != nil {
		return Slot{}, err
	}
	rr, err := s.store.ReadSlots(ctx, convID, []uint64{convSeq})
	if err != nil {
		return Slot{}, err
	}
	sl := rr.Slots[convSeq]
	if sl.State == SlotEmpty {
		if err := s.notWrittenYet(ctx, convID, []uint64{convSeq}, rr.Known); err != nil {
			return Slot{}, err
		}
	}
	return sl, nil
}

// notWrittenYet fails with ErrUnavailable when one of the empty seqs is
// above what the store knows as written (known) and at or below the
// conversation's committed conv_seq. Without a ConvSeqSource it cannot
// tell and says nothing.
func (s *Service) notWrittenYet(ctx context.Context, convID uint64, empty []uint64, known uint64) error {
	if s.convSeqs == nil {
		return nil
	}
	var first uint64
	for _, seq := range empty {
		if seq > known && (first == 0 || seq < first) {
			first = seq
		}
	}
	if first == 0 {
		return nil
	}
	committed, err := s.convSeqs.MaxConvSeq(ctx, convID)
	if err != nil {
		return fmt.Errorf("history: committed conv_seq of %d: %w", convID, err)
	}
	if first <= committed {
		return fmt.Errorf("%w: conv %d seq %d is committed but not in the history yet (the history tier lags the send path): nothing was changed, retry",
			model.ErrUnavailable, convID, first)
	}
	return nil
}

// Revoke marks a message revoked for everyone. Only its sender may, and only
// within Config.RevokeWindow of its creation (ErrForbidden otherwise).
// Revoking a revoked message is a no-op, also past the window. A message
// committed but not in the history yet is ErrUnavailable (retry); a missing
// or physically deleted message is ErrNotFound.
func (s *Service) Revoke(ctx context.Context, uid, convID, convSeq uint64) error {
	sl, err := s.slotFor(ctx, uid, convID, convSeq)
	if err != nil {
		return err
	}
	if sl.State != SlotFilled {
		return fmt.Errorf("%w: no message at conv %d seq %d", model.ErrNotFound, convID, convSeq)
	}
	if sl.Msg.SenderUID != uid {
		return fmt.Errorf("%w: only the sender may revoke a message", model.ErrForbidden)
	}
	if sl.Revoke == nil {
		now := s.now()
		if now.Sub(sl.Msg.CreatedAt) > s.cfg.RevokeWindow {
			return fmt.Errorf("%w: the revoke window of %s has passed", model.ErrForbidden, s.cfg.RevokeWindow)
		}
		slot, _ := s.store.layout.Slot(convSeq)
		docID, _ := s.store.layout.DocID(convID, convSeq)
		ok, err := s.store.updateSlot(ctx, docID, bson.D{
			{Key: "$set", Value: bson.D{{Key: slotPath(slot, "revoke"), Value: revokeDoc{UserID: int64(uid), Role: roleSender, Time: now.UnixMilli()}}}},
			{Key: "$inc", Value: bson.D{{Key: slotPath(slot, "v"), Value: int64(1)}}},
		})
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: no message at conv %d seq %d", model.ErrNotFound, convID, convSeq)
		}
	}
	return s.refresh(ctx, convID, convSeq)
}

// Delete hides a message from uid only ($addToSet into del_list, at most
// Config.DelListMax uids; past the bound a per-user deletion record takes
// over). Idempotent. A message physically deleted already is a no-op; a
// message committed but not in the history yet is ErrUnavailable (retry); a
// seq that holds no message is ErrNotFound.
func (s *Service) Delete(ctx context.Context, uid, convID, convSeq uint64) error {
	sl, err := s.slotFor(ctx, uid, convID, convSeq)
	if err != nil {
		return err
	}
	switch {
	case sl.State == SlotPurged:
		return nil
	case sl.State != SlotFilled:
		return fmt.Errorf("%w: no message at conv %d seq %d", model.ErrNotFound, convID, convSeq)
	case sl.DeletedBy(uid):
		return s.refresh(ctx, convID, convSeq)
	case len(sl.DelList) >= s.cfg.DelListMax:
		return s.store.addDeletionRecord(ctx, convID, convSeq, uid)
	}
	slot, _ := s.store.layout.Slot(convSeq)
	docID, _ := s.store.layout.DocID(convID, convSeq)
	if _, err := s.store.updateSlot(ctx, docID, bson.D{
		{Key: "$addToSet", Value: bson.D{{Key: slotPath(slot, "del_list"), Value: int64(uid)}}},
		{Key: "$inc", Value: bson.D{{Key: slotPath(slot, "v"), Value: int64(1)}}},
	}); err != nil {
		if errors.Is(err, errPurged) {
			return nil
		}
		return err
	}
	// Concurrent deleters may have pushed the list past the bound. Entries
	// are only ever removed at positions >= DelListMax, so a position at or
	// past the bound now means it was past the bound when pushed: move this
	// uid to a deletion record (record first, so it is never in neither).
	sl, err = s.store.loadSlot(ctx, convID, convSeq)
	if err != nil {
		return err
	}
	if pos := indexOf(sl.DelList, uid); pos >= s.cfg.DelListMax {
		if err := s.store.addDeletionRecord(ctx, convID, convSeq, uid); err != nil {
			return err
		}
		if _, err := s.store.updateSlot(ctx, docID, bson.D{
			{Key: "$pull", Value: bson.D{{Key: slotPath(slot, "del_list"), Value: int64(uid)}}},
			{Key: "$inc", Value: bson.D{{Key: slotPath(slot, "v"), Value: int64(1)}}},
		}); err != nil && !errors.Is(err, errPurged) {
			return err
		}
	}
	return s.refresh(ctx, convID, convSeq)
}

func indexOf(list []uint64, v uint64) int {
	for i, u := range list {
		if u == v {
			return i
		}
	}
	return -1
}

// Clear raises uid's watermark in the conversation to the highest conv_seq
// committed (ConvSeqSource) or stored, in one write, and returns the
// watermark in force; later History calls start above it. Nothing is
// deleted; other members see no change. A watermark never goes down.
func (s *Service) Clear(ctx context.Context, uid, convID uint64) (uint64, error) {
	if _, err := s.access(ctx, uid, convID); err != nil {
		return 0, err
	}
	var target uint64
	var err error
	if s.convSeqs != nil {
		target, err = s.convSeqs.MaxConvSeq(ctx, convID)
	} else {
		target, err = s.store.MaxStoredSeq(ctx, convID)
	}
	if err != nil {
		return 0, fmt.Errorf("history: clear: %w", err)
	}
	return s.store.raiseMinSeq(ctx, convID, uid, target)
}

// PhysicalDelete removes a message for everyone, for good (admin and
// compliance; the caller authorizes). The slot becomes a tombstone that a
// replayed write cannot refill; deletion records of the seq are dropped and
// the cache entry is made final. Idempotent; a seq never written is purged
// in advance.
func (s *Service) PhysicalDelete(ctx context.Context, convID, convSeq uint64) error {
	if _, _, _, err := model.ParseConvID(convID); err != nil {
		return err
	}
	if convSeq == 0 {
		return fmt.Errorf("%w: conv_seq must be at least 1", model.ErrInvalid)
	}
	if err := s.store.purge(ctx, convID, convSeq); err != nil {
		return err
	}
	if err := s.store.deleteRecordsOf(ctx, convID, convSeq); err != nil {
		return err
	}
	return s.cache.put(ctx, convID, []Slot{{Seq: convSeq, State: SlotPurged}})
}

// MarkRead sets is_read on the messages of a 1:1 conversation in
// fromSeq..toSeq (at most Config.MaxRange) that the other party sent to uid:
// one update per bucket touched. Idempotent. Seqs that hold no message and
// never will (holes, physically deleted, past the conversation's end) are
// skipped; if one of the range is committed but not in the history yet,
// nothing is marked and the answer is ErrUnavailable (retry), so a success
// always means every message of the range is marked. Groups have no is_read
// (ErrInvalid).
func (s *Service) MarkRead(ctx context.Context, uid, convID, fromSeq, toSeq uint64) error {
	if err := s.checkRange(fromSeq, toSeq); err != nil {
		return err
	}
	t, err := s.access(ctx, uid, convID)
	if err != nil {
		return err
	}
	if t != model.ConvSingle {
		return fmt.Errorf("%w: is_read exists for 1:1 conversations only", model.ErrInvalid)
	}
	seqs := make([]uint64, 0, toSeq-fromSeq+1)
	for seq := fromSeq; seq <= toSeq; seq++ {
		seqs = append(seqs, seq)
	}
	rr, err := s.store.ReadSlots(ctx, convID, seqs)
	if err != nil {
		return err
	}
	var empty []uint64
	for _, seq := range seqs {
		if rr.Slots[seq].State == SlotEmpty {
			empty = append(empty, seq)
		}
	}
	if err := s.notWrittenYet(ctx, convID, empty, rr.Known); err != nil {
		return err
	}
	byDoc := map[string]bson.D{}
	var docOrder []string
	var changed []uint64
	// marked: slots the store holds marked already. An earlier mark-read
	// whose update landed after its caller gave up (the store finishes a
	// write whatever the caller's deadline) never refreshed the cache:
	// the cache may still show them unread, so they are stored again (the
	// cache keeps the higher version).
	var marked []Slot
	for _, seq := range seqs {
		sl := rr.Slots[seq]
		if sl.State == SlotFilled && sl.Msg.SenderUID != uid && sl.IsRead {
			marked = append(marked, sl)
		}
		if sl.State != SlotFilled || sl.Msg.SenderUID == uid || sl.IsRead {
			continue
		}
		docID, _ := s.store.layout.DocID(convID, seq)
		slot, _ := s.store.layout.Slot(seq)
		if _, ok := byDoc[docID]; !ok {
			docOrder = append(docOrder, docID)
		}
		byDoc[docID] = append(byDoc[docID], bson.E{Key: slotPath(slot, "is_read"), Value: true})
		changed = append(changed, seq)
	}
	readUpdate := func(set bson.D) bson.D {
		inc := make(bson.D, len(set))
		for i, e := range set {
			inc[i] = bson.E{Key: e.Key[:len(e.Key)-len("is_read")] + "v", Value: int64(1)}
		}
		return bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: inc}}
	}
	for _, docID := range docOrder {
		set := byDoc[docID]
		_, err := s.store.updateSlot(ctx, docID, readUpdate(set))
		if errors.Is(err, errPurged) {
			// A slot was purged since the read: the whole update was
			// refused, so mark the slots one by one, skipping purged ones.
			for _, e := range set {
				if _, err := s.store.updateSlot(ctx, docID, readUpdate(bson.D{e})); err != nil && !errors.Is(err, errPurged) {
					return err
				}
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	if s.cache == nil || len(changed)+len(marked) == 0 {
		return nil
	}
	fill := marked
	if len(changed) > 0 {
		after, err := s.store.ReadSlots(ctx, convID, changed)
		if err != nil {
			return err
		}
		for _, seq := range changed {
			fill = append(fill, after.Slots[seq])
		}
	}
	return s.cache.put(ctx, convID, fill)
}
