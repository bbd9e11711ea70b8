package history

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"imlab/ref/defect"
	"imlab/ref/model"
)

// Server error codes the store tells apart.
const (
	codePathNotViable           = 28  // $set msgs.N.x where msgs.N is not a document (a purged slot)
	codeInvalidPipelineOperator = 168 // an aggregation operator the server does not know
	codeNotImplemented          = 238 // FerretDB v1: $map, $arrayElemAt, $slice projections
)

// Store is the MongoDB side: the bucket collection and its companions. It
// does not own the client; the caller closes it after the Store's last use.
// It starts no goroutine that outlives a call.
type Store struct {
	cfg    Config
	layout Layout
	msgs   *mongo.Collection
	meta   *mongo.Collection
	dels   *mongo.Collection
	users  *mongo.Collection
	// native is true while reads use the aggregation path; auto mode
	// clears it for good on the first NotImplemented.
	native atomic.Bool
	// stripes serialize this Store's writes to one document (see docLock).
	stripes [lockStripes]sync.Mutex
	// unknown holds the documents a write left unknown (see write).
	unknown unknownDocs
	// afterDocRead, if set (tests only), runs after ReadSlots read one
	// document and before it reads the next.
	afterDocRead func(idx uint64)
	// beforeInsert, if set (tests only), runs between a bucket update that
	// matched nothing and the insert that follows it.
	beforeInsert func(docID string)
	// beforeUpdate, if set (tests only), runs before updateSlot takes the
	// document's lock.
	beforeUpdate func(docID string)
	// tops remembers, per conversation, the highest bucket this Store saw
	// exist (its own insert or an update that matched): a hint for the
	// writer, never the truth (see writeBucket).
	tops bucketTops
}

// New checks cfg, creates the secondary index, and checks (or records) the
// bucket size. A size that differs from the recorded one is refused with an
// error wrapping model.ErrConflict.
func New(ctx context.Context, db *mongo.Database, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: history: nil database", model.ErrInvalid)
	}
	s := &Store{
		cfg:    cfg,
		layout: Layout{Size: uint64(cfg.BucketSize), noMinusOne: cfg.Defects.Has(defect.HistoryDocIndexOffByOne)},
		msgs:   db.Collection(cfg.CollectionPrefix + "_msgs"),
		meta:   db.Collection(cfg.CollectionPrefix + "_meta"),
		dels:   db.Collection(cfg.CollectionPrefix + "_deletions"),
		users:  db.Collection(cfg.CollectionPrefix + "_user_state"),
	}
	s.native.Store(cfg.ReadMode != ReadFallback)
	if _, err := s.msgs.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "conv_id", Value: 1}, {Key: "idx", Value: 1}},
	}); err != nil {
		return nil, dbErr("create index", err)
	}
	if err := s.checkBucketSize(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Layout is the addressing in force.
func (s *Store) Layout() Layout { return s.layout }

// ReadPath says which read path is in use: "native" or "fallback".
func (s *Store) ReadPath() string {
	if s.native.Load() {
		return ReadNative
	}
	return ReadFallback
}

type metaDoc struct {
	ID   string `bson:"_id"`
	Size int    `bson:"size"`
}

const metaBucketID = "bucket"

func (s *Store) checkBucketSize(ctx context.Context) error {
	for attempt := 0; attempt < 2; attempt++ {
		var m metaDoc
		err := s.meta.FindOne(ctx, bson.D{{Key: "_id", Value: metaBucketID}}).Decode(&m)
		if err == nil {
			if m.Size != s.cfg.BucketSize {
				return fmt.Errorf("%w: history: bucket size %d is recorded with the data; configured %d would re-address every message (migrate the data instead)",
					model.ErrConflict, m.Size, s.cfg.BucketSize)
			}
			return nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return dbErr("read meta", err)
		}
		// No record: data written before the record existed tells its own
		// size by its array length.
		size := s.cfg.BucketSize
		var d bucketDoc
		err = s.msgs.FindOne(ctx, bson.D{}).Decode(&d)
		switch {
		case err == nil:
			size = len(d.Msgs)
		case errors.Is(err, mongo.ErrNoDocuments):
		default:
			return dbErr("probe data", err)
		}
		_, err = s.meta.InsertOne(ctx, metaDoc{ID: metaBucketID, Size: size})
		if err != nil && !mongo.IsDuplicateKeyError(err) {
			return dbErr("record meta", err)
		}
		// Loop: read back what is recorded (ours or a concurrent New's).
	}
	return fmt.Errorf("%w: history: bucket size record did not settle", model.ErrUnavailable)
}

// WriteBatch stores messages in their buckets, idempotently: replays of the
// same messages change nothing. Messages are grouped by conversation and by
// bucket; each bucket takes ONE update ($set of every msgs.N.msg of the
// batch, $max of max_seq) when its document exists, and ONE whole-document
// insert (every slot pre-filled) when it does not. A duplicate key on insert
// means another writer created the document first: the writer steps back and
// updates. Slots that were physically deleted are skipped, never rewritten.
// Conversations are written concurrently, at most Config.WriteConcurrency at
// a time, by goroutines that end before WriteBatch returns.
//
// Bad input (conv_seq 0, an invalid conv_id, two different messages for one
// (conv_id, conv_seq)) is refused before anything is written.
func (s *Store) WriteBatch(ctx context.Context, msgs []model.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) > s.cfg.MaxBatch {
		return fmt.Errorf("%w: history: batch of %d messages exceeds %d", model.ErrTooLarge, len(msgs), s.cfg.MaxBatch)
	}
	byConv := make(map[uint64][]model.Message)
	for _, m := range msgs {
		m, err := validateMessage(m)
		if err != nil {
			return err
		}
		byConv[m.ConvID] = append(byConv[m.ConvID], m)
	}
	convs := make([]uint64, 0, len(byConv))
	for c, ms := range byConv {
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].ConvSeq < ms[j].ConvSeq })
		out := ms[:1]
		for _, m := range ms[1:] {
			last := out[len(out)-1]
			if m.ConvSeq != last.ConvSeq {
				out = append(out, m)
				continue
			}
			if m.MsgID != last.MsgID {
				return fmt.Errorf("%w: history: conv %d seq %d given twice with msg_id %d and %d", model.ErrConflict, c, m.ConvSeq, last.MsgID, m.MsgID)
			}
		}
		byConv[c] = out
		convs = append(convs, c)
	}
	sort.Slice(convs, func(i, j int) bool { return convs[i] < convs[j] })

	errs := make([]error, len(convs))
	sem := make(chan struct{}, s.cfg.WriteConcurrency)
	var wg sync.WaitGroup
	for i, c := range convs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.writeConv(ctx, c, byConv[c])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// validateMessage checks one message and fills an unset ConvType from the
// conv_id (which determines it).
func validateMessage(m model.Message) (model.Message, error) {
	t, _, _, err := model.ParseConvID(m.ConvID)
	if err != nil {
		return m, fmt.Errorf("history: message %d: %w", m.MsgID, err)
	}
	if m.ConvType == 0 {
		m.ConvType = t
	}
	switch {
	case m.ConvSeq == 0:
		return m, fmt.Errorf("%w: history: message %d has conv_seq 0", model.ErrInvalid, m.MsgID)
	case m.MsgID == 0:
		return m, fmt.Errorf("%w: history: conv %d seq %d has msg_id 0", model.ErrInvalid, m.ConvID, m.ConvSeq)
	case m.SenderUID == 0:
		return m, fmt.Errorf("%w: history: message %d has sender 0", model.ErrInvalid, m.MsgID)
	case m.ConvType != t:
		return m, fmt.Errorf("%w: history: message %d has conv_type %d but conv_id %d is type %d", model.ErrInvalid, m.MsgID, m.ConvType, m.ConvID, t)
	case m.CreatedAt.IsZero():
		return m, fmt.Errorf("%w: history: message %d has no created_at", model.ErrInvalid, m.MsgID)
	case len(m.Content) > model.MaxContentLen:
		return m, fmt.Errorf("%w: history: message %d content longer than %d bytes", model.ErrTooLarge, m.MsgID, model.MaxContentLen)
	}
	return m, nil
}

// writeConv writes one conversation's messages (ascending conv_seq) bucket
// by bucket. tryUpdate is the seed's optimistic flag: assume the document
// exists (a replay, or a bucket being filled) until an insert succeeds; the
// buckets after a freshly inserted one are new too, so insert them directly
// (writeBucket also bets on an insert for a write that opens a bucket).
func (s *Store) writeConv(ctx context.Context, convID uint64, msgs []model.Message) error {
	tryUpdate := true
	for start := 0; start < len(msgs); {
		idx, _ := s.layout.DocIndex(msgs[start].ConvSeq)
		end := start + 1
		for end < len(msgs) {
			i, _ := s.layout.DocIndex(msgs[end].ConvSeq)
			if i != idx {
				break
			}
			end++
		}
		if err := s.writeBucket(ctx, convID, idx, msgs[start:end], &tryUpdate); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// writeBucket writes one bucket's messages: an update when the document
// exists, a whole-document insert when it does not. Which one is tried first
// is a bet whose loss costs one command, never a message: a write that
// starts at the bucket's first slot of a bucket this Store has not seen
// (a conversation's first message, a bucket's first after 100) inserts
// first, everything else updates first (the seed's order), and either
// falls back to the other (a duplicate key on insert steps back to the
// update). The history tier writes a conversation in conv_seq order, so
// under 1:1 traffic most writes open a bucket: the bet saves them the
// update that matched nothing.
func (s *Store) writeBucket(ctx context.Context, convID, idx uint64, msgs []model.Message, tryUpdate *bool) error {
	id := DocIDOf(convID, idx)
	return s.write(ctx, id, func(ctx context.Context) error {
		return s.writeBucketLocked(ctx, convID, idx, id, msgs, tryUpdate)
	})
}

// writeBucketLocked is writeBucket's update or insert; the caller holds the
// document's lock (write).
func (s *Store) writeBucketLocked(ctx context.Context, convID, idx uint64, id string, msgs []model.Message, tryUpdate *bool) error {
	if first, _ := s.layout.Slot(msgs[0].ConvSeq); first == 0 && !s.tops.known(convID, idx) {
		*tryUpdate = false
	}
	for attempt := 0; attempt < writeAttempts; attempt++ {
		if *tryUpdate {
			res, err := s.msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, s.slotsUpdate(msgs))
			if err != nil {
				if hasCode(err, codePathNotViable) {
					s.tops.saw(convID, idx)
					return s.writeAroundPurged(ctx, convID, idx, msgs)
				}
				return dbErr("update "+id, err)
			}
			if res.MatchedCount == 1 {
				s.tops.saw(convID, idx)
				return nil
			}
		}
		if s.beforeInsert != nil {
			s.beforeInsert(id)
		}
		_, err := s.msgs.InsertOne(ctx, s.newBucketDoc(convID, idx, msgs, nil))
		if err == nil {
			s.tops.saw(convID, idx)
			*tryUpdate = false
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return dbErr("insert "+id, err)
		}
		// Another writer created the document first: step back and
		// update this same bucket (the seed's i--).
		*tryUpdate = true
	}
	return fmt.Errorf("%w: history: bucket %s: no update or insert succeeded in %d attempts", model.ErrUnavailable, id, writeAttempts)
}

// slotsUpdate is the single update of one bucket: $set every msgs.N.msg
// and raise max_seq.
func (s *Store) slotsUpdate(msgs []model.Message) bson.D {
	set := make(bson.D, 0, len(msgs))
	var maxSeq uint64
	for _, m := range msgs {
		slot, _ := s.layout.Slot(m.ConvSeq)
		set = append(set, bson.E{Key: "msgs." + strconv.Itoa(slot) + ".msg", Value: toMsgDoc(m)})
		maxSeq = max(maxSeq, m.ConvSeq)
	}
	return bson.D{{Key: "$set", Value: set}, {Key: "$max", Value: bson.D{{Key: "max_seq", Value: int64(maxSeq)}}}}
}

// newBucketDoc builds a whole document: every slot pre-filled (an empty
// slot, never null), msgs placed, purged slots (purgeSlots) marked.
func (s *Store) newBucketDoc(convID, idx uint64, msgs []model.Message, purgeSlots []int) bson.D {
	slots := make([]any, s.layout.Size)
	for i := range slots {
		slots[i] = emptySlotDoc()
	}
	var maxSeq uint64
	shift := s.cfg.Defects.Has(defect.HistoryInsertSlotShift)
	for _, m := range msgs {
		slot, _ := s.layout.Slot(m.ConvSeq)
		if shift {
			slot = int(m.ConvSeq % s.layout.Size) // the defect: one slot up
		}
		d := emptySlotDoc()
		d.Msg = toMsgDoc(m)
		slots[slot] = d
		maxSeq = max(maxSeq, m.ConvSeq)
	}
	for _, p := range purgeSlots {
		slots[p] = purgedMarker
		maxSeq = max(maxSeq, s.layout.SeqOf(idx, p))
	}
	return bson.D{
		{Key: "_id", Value: DocIDOf(convID, idx)},
		{Key: "conv_id", Value: strconv.FormatUint(convID, 10)},
		{Key: "idx", Value: int64(idx)},
		{Key: "max_seq", Value: int64(maxSeq)},
		{Key: "msgs", Value: slots},
	}
}

// writeAroundPurged rewrites a bucket update without its purged slots. The
// caller holds the document's lock.
func (s *Store) writeAroundPurged(ctx context.Context, convID, idx uint64, msgs []model.Message) error {
	id := DocIDOf(convID, idx)
	for attempt := 0; attempt < writeAttempts; attempt++ {
		b, err := s.loadBucket(ctx, convID, idx)
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("%w: history: bucket %s vanished while writing around purged slots", model.ErrUnavailable, id)
		}
		keep := msgs[:0:0]
		for _, m := range msgs {
			slot, _ := s.layout.Slot(m.ConvSeq)
			if b.slotAt(s.layout, slot).State != SlotPurged {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			return nil
		}
		res, err := s.msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, s.slotsUpdate(keep))
		if err != nil {
			if hasCode(err, codePathNotViable) {
				continue // purged again meanwhile
			}
			return dbErr("update "+id, err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
	}
	return fmt.Errorf("%w: history: bucket %s: purges kept racing the write", model.ErrUnavailable, id)
}

// loadBucket reads a whole document; nil if it does not exist.
func (s *Store) loadBucket(ctx context.Context, convID, idx uint64) (*Bucket, error) {
	id := DocIDOf(convID, idx)
	var d bucketDoc
	err := s.msgs.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("find "+id, err)
	}
	return decodeBucket(s.layout, convID, &d)
}

// ReadResult is what one range read found.
type ReadResult struct {
	// Slots holds every requested seq; absent documents give empty slots.
	Slots map[uint64]Slot
	// Known is the highest conv_seq the store knows to be written for the
	// conversation, as far as this read saw: the max_seq of the documents
	// read, raised to the highest requested seq when the bucket after the
	// last requested one exists. Seqs above Known may simply not be written
	// yet (the history tier lags the send path) and are not holes.
	Known uint64
}

// ReadSlots reads the given seqs of one conversation: one query per
// document, newest document first, only the needed slots on the native
// path.
func (s *Store) ReadSlots(ctx context.Context, convID uint64, seqs []uint64) (ReadResult, error) {
	groups, err := s.layout.GroupByDoc(convID, seqs)
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{Slots: make(map[uint64]Slot, len(seqs))}
	if len(groups) == 0 {
		return res, nil
	}
	var lastExists bool
	var lastMax uint64
	// Newest document first: the history tier writes a conversation in
	// conv_seq order, so a write landing between two document reads can
	// only leave the newest seqs out of the answer (a shorter tail), never
	// a hole below a seq the answer shows (the last slot of a bucket read
	// before it was written, the next bucket's first after).
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		r, err := s.readDoc(ctx, convID, g)
		if err != nil {
			return ReadResult{}, err
		}
		if s.afterDocRead != nil {
			s.afterDocRead(g.Idx)
		}
		for i, seq := range g.Seqs {
			res.Slots[seq] = r.slots[i]
		}
		res.Known = max(res.Known, r.maxSeq)
		if gi == len(groups)-1 {
			lastExists, lastMax = r.exists, r.maxSeq
		}
	}
	last := groups[len(groups)-1]
	top := last.Seqs[len(last.Seqs)-1]
	if !lastExists || lastMax < top {
		// Everything up to the requested top is settled if a later bucket
		// exists (the missing ones were skipped, not pending).
		ok, err := s.bucketExists(ctx, convID, last.Idx+1)
		if err != nil {
			return ReadResult{}, err
		}
		if ok {
			res.Known = max(res.Known, top)
		}
	}
	return res, nil
}

type docRead struct {
	exists bool
	maxSeq uint64
	slots  []Slot // parallel to the group's Seqs
}

func (s *Store) readDoc(ctx context.Context, convID uint64, g DocSeqs) (docRead, error) {
	if s.native.Load() {
		r, err := s.readDocNative(ctx, convID, g)
		if err == nil {
			return r, nil
		}
		if s.cfg.ReadMode != ReadAuto || !(hasCode(err, codeNotImplemented) || hasCode(err, codeInvalidPipelineOperator)) {
			return docRead{}, err
		}
		s.native.Store(false) // this server cannot project slots: fall back for good
	}
	return s.readDocFallback(ctx, convID, g)
}

// nativePipeline selects the slots of one document on the server:
// $match by _id, then $project msgs as $map over the slot list of
// $arrayElemAt (the seed's read), plus max_seq.
func nativePipeline(docID string, slots []int) mongo.Pipeline {
	input := make(bson.A, len(slots))
	for i, sl := range slots {
		input[i] = int32(sl)
	}
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: docID}}}},
		{{Key: "$project", Value: bson.D{
			{Key: "_id", Value: 0},
			{Key: "max_seq", Value: 1},
			{Key: "msgs", Value: bson.D{{Key: "$map", Value: bson.D{
				{Key: "input", Value: input},
				{Key: "as", Value: "i"},
				{Key: "in", Value: bson.D{{Key: "$arrayElemAt", Value: bson.A{"$msgs", "$$i"}}}},
			}}}},
		}}},
	}
}

type nativeDoc struct {
	MaxSeq int64           `bson:"max_seq"`
	Msgs   []bson.RawValue `bson:"msgs"`
}

func (s *Store) readDocNative(ctx context.Context, convID uint64, g DocSeqs) (docRead, error) {
	cur, err := s.msgs.Aggregate(ctx, nativePipeline(g.DocID, g.Slots))
	if err != nil {
		return docRead{}, dbErr("aggregate "+g.DocID, err)
	}
	var docs []nativeDoc
	if err := cur.All(ctx, &docs); err != nil {
		return docRead{}, dbErr("aggregate "+g.DocID, err)
	}
	return decodeNative(convID, g, docs)
}

// decodeNative turns the pipeline's answer (zero or one document whose msgs
// are the requested slots in order) into a docRead.
func decodeNative(convID uint64, g DocSeqs, docs []nativeDoc) (docRead, error) {
	r := docRead{slots: make([]Slot, len(g.Seqs))}
	for i, seq := range g.Seqs {
		r.slots[i] = Slot{Seq: seq}
	}
	if len(docs) == 0 {
		return r, nil
	}
	d := docs[0]
	r.exists = true
	r.maxSeq = uint64(d.MaxSeq)
	for i, seq := range g.Seqs {
		if i >= len(d.Msgs) {
			break // a short answer reads as empty slots, never a panic
		}
		sl, err := decodeSlot(convID, seq, d.Msgs[i])
		if err != nil {
			return docRead{}, err
		}
		r.slots[i] = sl
	}
	return r, nil
}

func (s *Store) readDocFallback(ctx context.Context, convID uint64, g DocSeqs) (docRead, error) {
	r := docRead{slots: make([]Slot, len(g.Seqs))}
	for i, seq := range g.Seqs {
		r.slots[i] = Slot{Seq: seq}
	}
	var d bucketDoc
	err := s.msgs.FindOne(ctx, bson.D{{Key: "_id", Value: g.DocID}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return r, nil
	}
	if err != nil {
		return docRead{}, dbErr("find "+g.DocID, err)
	}
	r.exists = true
	r.maxSeq = uint64(d.MaxSeq)
	for i, slot := range g.Slots {
		if slot >= len(d.Msgs) {
			continue // short array: empty, not a panic
		}
		sl, err := decodeSlot(convID, g.Seqs[i], d.Msgs[slot])
		if err != nil {
			return docRead{}, err
		}
		r.slots[i] = sl
	}
	return r, nil
}

func (s *Store) bucketExists(ctx context.Context, convID, idx uint64) (bool, error) {
	id := DocIDOf(convID, idx)
	var d struct {
		ID string `bson:"_id"`
	}
	err := s.msgs.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, dbErr("probe "+id, err)
	}
	return true, nil
}

// loadSlot reads one slot straight from MongoDB (never the cache).
func (s *Store) loadSlot(ctx context.Context, convID, seq uint64) (Slot, error) {
	groups, err := s.layout.GroupByDoc(convID, []uint64{seq})
	if err != nil {
		return Slot{}, err
	}
	r, err := s.readDoc(ctx, convID, groups[0])
	if err != nil {
		return Slot{}, err
	}
	return r.slots[0], nil
}

// MaxStoredSeq is the highest conv_seq written (or purged) for a
// conversation, 0 if none: the last slot taken in its highest bucket.
func (s *Store) MaxStoredSeq(ctx context.Context, convID uint64) (uint64, error) {
	cur, err := s.msgs.Find(ctx, bson.D{{Key: "conv_id", Value: strconv.FormatUint(convID, 10)}},
		options.Find().SetSort(bson.D{{Key: "idx", Value: -1}}).SetLimit(1))
	if err != nil {
		return 0, dbErr("find last bucket", err)
	}
	var docs []bucketDoc
	if err := cur.All(ctx, &docs); err != nil {
		return 0, dbErr("find last bucket", err)
	}
	if len(docs) == 0 {
		return 0, nil
	}
	b, err := decodeBucket(s.layout, convID, &docs[0])
	if err != nil {
		return 0, err
	}
	return b.LastSeq(), nil
}

// updateSlot applies one update to a bucket by _id, holding the document's
// lock until the database has answered (write). It reports whether the
// document exists, and errPurged if the slot was physically deleted.
func (s *Store) updateSlot(ctx context.Context, docID string, update bson.D) (bool, error) {
	if s.beforeUpdate != nil {
		s.beforeUpdate(docID)
	}
	var matched bool
	err := s.write(ctx, docID, func(ctx context.Context) error {
		res, err := s.msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: docID}}, update)
		if err != nil {
			if hasCode(err, codePathNotViable) {
				matched = true
				return errPurged
			}
			return dbErr("update "+docID, err)
		}
		matched = res.MatchedCount == 1
		return nil
	})
	return matched, err
}

var errPurged = fmt.Errorf("%w: message was physically deleted", model.ErrNotFound)

// purge replaces a slot with the purged marker; a missing document is
// created with the slot already purged, so a later write cannot bring the
// message back.
func (s *Store) purge(ctx context.Context, convID, seq uint64) error {
	idx, err := s.layout.DocIndex(seq)
	if err != nil {
		return err
	}
	slot, _ := s.layout.Slot(seq)
	id := DocIDOf(convID, idx)
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "msgs." + strconv.Itoa(slot), Value: purgedMarker}}},
		{Key: "$max", Value: bson.D{{Key: "max_seq", Value: int64(seq)}}},
	}
	return s.write(ctx, id, func(ctx context.Context) error {
		for attempt := 0; attempt < writeAttempts; attempt++ {
			res, err := s.msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, update)
			if err != nil {
				return dbErr("purge "+id, err)
			}
			if res.MatchedCount == 1 {
				return nil
			}
			_, err = s.msgs.InsertOne(ctx, s.newBucketDoc(convID, idx, nil, []int{slot}))
			if err == nil {
				return nil
			}
			if !mongo.IsDuplicateKeyError(err) {
				return dbErr("insert "+id, err)
			}
		}
		return fmt.Errorf("%w: history: purge of %s did not settle", model.ErrUnavailable, id)
	})
}
