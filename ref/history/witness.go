package history

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/bsontype"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"imlab/ref/model"
)

// MaxWitnessRange bounds the conv_seqs of one Witness read (ten buckets of
// the default size): the lab pages through a long conversation.
const MaxWitnessRange = 1000

// Witness states of a position (WitnessSlot.State).
const (
	WitnessEmpty  = "empty"  // nothing written (a pre-filled slot, a missing bucket, past a short array)
	WitnessFilled = "filled" // a message is stored
	WitnessPurged = "purged" // physically deleted
	// WitnessInvalid: the stored element is neither a slot document nor the
	// purged marker, or does not decode as a slot: the store is corrupt
	// there. Detail says what was found.
	WitnessInvalid = "invalid"
)

// WitnessSlot is one conv_seq position as MongoDB stores it: no cache, no
// projection for any viewer, no watermark applied.
type WitnessSlot struct {
	// ConvSeq is the position: the seq the seed's addressing assigns to
	// this bucket and slot (idx*size + slot + 1), whatever the writer did.
	ConvSeq uint64
	State   string
	// StoredSeq is the conv_seq recorded inside the stored message (filled
	// only). It differs from ConvSeq when a message was written to another
	// message's slot.
	StoredSeq uint64
	// The stored message (filled only).
	MsgID     uint64
	SenderUID uint64
	ConvType  model.ConvType
	Content   string
	CreatedAt time.Time
	// Revoke is the slot's revoke layer (nil: not revoked).
	Revoke *Revoke
	// DelList is the slot's del_list as stored; DelRecords the uids whose
	// delete-for-me went to a deletion record past Config.DelListMax.
	DelList    []uint64
	DelRecords []uint64
	IsRead     bool
	// Version counts the slot's mutations (revoke, delete, read).
	Version int64
	// Detail explains an invalid position.
	Detail string
}

// WitnessBucket is one bucket document of the range.
type WitnessBucket struct {
	Idx    uint64
	Exists bool
	// Slots is the length of the stored msgs array (Config.BucketSize in a
	// well-formed document).
	Slots int
	// MaxSeq is the document's max_seq field (raised by every write).
	MaxSeq uint64
}

// Clear is one user's clear watermark in a conversation.
type Clear struct {
	UID    uint64
	MinSeq uint64
}

// Witness is a conversation's history as stored, for FromSeq..ToSeq.
type Witness struct {
	ConvID           uint64
	FromSeq, ToSeq   uint64
	BucketSize       int
	Buckets          []WitnessBucket
	Slots            []WitnessSlot // one per conv_seq of the range, ascending
	Clears           []Clear       // every user's watermark, by uid
	MaxSeq           uint64        // the highest conv_seq the store records as written
	TopBucket        uint64        // the bucket MaxSeq was read from
	TopBucketCounted bool          // false: no bucket at or above the range's first exists
}

// Witness reads conv_seqs fromSeq..toSeq (at most MaxWitnessRange) of a
// conversation straight from MongoDB for uid, who must be a party or a
// member of it (ErrForbidden otherwise). It is the lab's store witness of
// the history: every position of the range with its state, the stored
// message and its tags (revoke, del_list and deletion records, is_read),
// every user's clear watermark, and the highest conv_seq written. Nothing is
// projected or cached, and a position holding something unexpected is
// reported, never an error.
func (s *Service) Witness(ctx context.Context, uid, convID, fromSeq, toSeq uint64) (Witness, error) {
	switch {
	case fromSeq == 0:
		return Witness{}, fmt.Errorf("%w: from_seq must be at least 1", model.ErrInvalid)
	case toSeq < fromSeq:
		return Witness{}, fmt.Errorf("%w: to_seq %d is below from_seq %d", model.ErrInvalid, toSeq, fromSeq)
	case toSeq-fromSeq >= MaxWitnessRange:
		return Witness{}, fmt.Errorf("%w: witness range of %d seqs exceeds the limit of %d", model.ErrInvalid, toSeq-fromSeq+1, MaxWitnessRange)
	}
	if _, err := s.access(ctx, uid, convID); err != nil {
		return Witness{}, err
	}
	return s.store.witness(ctx, convID, fromSeq, toSeq)
}

func (s *Store) witness(ctx context.Context, convID, fromSeq, toSeq uint64) (Witness, error) {
	size := s.layout.Size
	w := Witness{ConvID: convID, FromSeq: fromSeq, ToSeq: toSeq, BucketSize: int(size)}
	// Positions by the seed's arithmetic, written out here rather than
	// through Layout: the witness reports where the seed says each seq
	// lives, independently of the addressing the writer used.
	first, last := (fromSeq-1)/size, (toSeq-1)/size
	for idx := first; idx <= last; idx++ {
		var d bucketDoc
		err := s.msgs.FindOne(ctx, bson.D{{Key: "_id", Value: DocIDOf(convID, idx)}}).Decode(&d)
		exists := err == nil
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return Witness{}, dbErr("witness find "+DocIDOf(convID, idx), err)
		}
		w.Buckets = append(w.Buckets, WitnessBucket{Idx: idx, Exists: exists, Slots: len(d.Msgs), MaxSeq: uint64(d.MaxSeq)})
		for slot := uint64(0); slot < size; slot++ {
			pos := idx*size + slot + 1
			if pos < fromSeq || pos > toSeq {
				continue
			}
			ws := WitnessSlot{ConvSeq: pos, State: WitnessEmpty}
			if int(slot) < len(d.Msgs) {
				ws = witnessSlot(pos, d.Msgs[slot])
			}
			w.Slots = append(w.Slots, ws)
		}
	}
	recs, err := s.deletionsIn(ctx, convID, fromSeq, toSeq)
	if err != nil {
		return Witness{}, err
	}
	for i := range w.Slots {
		w.Slots[i].DelRecords = recs[w.Slots[i].ConvSeq]
	}
	if w.Clears, err = s.clears(ctx, convID); err != nil {
		return Witness{}, err
	}
	if w.TopBucket, w.MaxSeq, w.TopBucketCounted, err = s.topMaxSeq(ctx, convID, first); err != nil {
		return Witness{}, err
	}
	return w, nil
}

// witnessSlot decodes one stored element leniently: whatever is there is
// reported.
func witnessSlot(pos uint64, v bson.RawValue) WitnessSlot {
	ws := WitnessSlot{ConvSeq: pos, State: WitnessEmpty}
	switch v.Type {
	case 0, bsontype.Null, bsontype.Undefined:
		return ws
	case bsontype.String:
		if str, _ := v.StringValueOK(); str == purgedMarker {
			ws.State = WitnessPurged
			return ws
		}
		ws.State, ws.Detail = WitnessInvalid, "a string other than the purged marker"
		return ws
	case bsontype.EmbeddedDocument:
	default:
		ws.State, ws.Detail = WitnessInvalid, "bson type "+v.Type.String()
		return ws
	}
	var d slotDoc
	if err := v.Unmarshal(&d); err != nil {
		ws.State, ws.Detail = WitnessInvalid, "undecodable slot: "+err.Error()
		return ws
	}
	ws.Version, ws.IsRead = d.V, d.IsRead
	for _, u := range d.DelList {
		ws.DelList = append(ws.DelList, uint64(u))
	}
	if d.Revoke != nil {
		ws.Revoke = &Revoke{UserID: uint64(d.Revoke.UserID), Role: d.Revoke.Role, At: time.UnixMilli(d.Revoke.Time).UTC()}
	}
	if d.Msg != nil {
		ws.State = WitnessFilled
		ws.StoredSeq = uint64(d.Msg.Seq)
		ws.MsgID, ws.SenderUID, ws.ConvType = uint64(d.Msg.MsgID), uint64(d.Msg.SenderUID), model.ConvType(d.Msg.ConvType)
		ws.Content, ws.CreatedAt = d.Msg.Content, time.UnixMilli(d.Msg.SendTime).UTC()
	}
	return ws
}

// deletionsIn lists the deletion records of fromSeq..toSeq, uids ascending
// per seq.
func (s *Store) deletionsIn(ctx context.Context, convID, fromSeq, toSeq uint64) (map[uint64][]uint64, error) {
	cur, err := s.dels.Find(ctx, bson.D{
		{Key: "conv_id", Value: strconv.FormatUint(convID, 10)},
		{Key: "seq", Value: bson.D{{Key: "$gte", Value: int64(fromSeq)}, {Key: "$lte", Value: int64(toSeq)}}},
	})
	if err != nil {
		return nil, dbErr("witness deletions", err)
	}
	var docs []struct {
		Seq int64 `bson:"seq"`
		UID int64 `bson:"uid"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, dbErr("witness deletions", err)
	}
	out := map[uint64][]uint64{}
	for _, d := range docs {
		out[uint64(d.Seq)] = append(out[uint64(d.Seq)], uint64(d.UID))
	}
	for _, l := range out {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	}
	return out, nil
}

// clears lists every user's watermark in the conversation ("{conv}:{uid}"
// ids), by uid.
func (s *Store) clears(ctx context.Context, convID uint64) ([]Clear, error) {
	prefix := strconv.FormatUint(convID, 10) + ":"
	cur, err := s.users.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^" + regexp.QuoteMeta(prefix)}}}})
	if err != nil {
		return nil, dbErr("witness watermarks", err)
	}
	var docs []struct {
		ID     string `bson:"_id"`
		MinSeq int64  `bson:"min_seq"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, dbErr("witness watermarks", err)
	}
	out := make([]Clear, 0, len(docs))
	for _, d := range docs {
		uid, err := strconv.ParseUint(d.ID[len(prefix):], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("history: watermark id %q: %w", d.ID, err)
		}
		out = append(out, Clear{UID: uid, MinSeq: uint64(d.MinSeq)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

// witnessMaxProbes bounds the _id probes of topMaxSeq.
const witnessMaxProbes = 2 * 48

// topMaxSeq finds the highest bucket at or above from that exists (buckets
// contiguous from the first existing one at or above from: probing _ids
// from+0, +1, +3, +7, ... then bisecting) and returns its max_seq. Exact
// _id reads only (FerretDB scans for any other filter). ok is false when
// no bucket at or above from exists within the probe bound.
func (s *Store) topMaxSeq(ctx context.Context, convID, from uint64) (idx, maxSeq uint64, ok bool, err error) {
	probes := 0
	exists := func(i uint64) (bool, error) { probes++; return s.bucketExists(ctx, convID, i) }
	lo := from
	for ; probes < witnessMaxProbes; lo++ {
		e, err := exists(lo)
		if err != nil {
			return 0, 0, false, err
		}
		if e {
			break
		}
		if lo >= from+2 { // three absent in a row: nothing at or above the range
			return 0, 0, false, nil
		}
	}
	hi := lo // lo exists; hi > lo does not (once found)
	for step := uint64(1); probes < witnessMaxProbes; step *= 2 {
		e, err := exists(lo + step)
		if err != nil {
			return 0, 0, false, err
		}
		if !e {
			hi = lo + step
			break
		}
		lo += step
	}
	for hi > lo+1 && probes < witnessMaxProbes {
		mid := lo + (hi-lo)/2
		e, err := exists(mid)
		if err != nil {
			return 0, 0, false, err
		}
		if e {
			lo = mid
		} else {
			hi = mid
		}
	}
	var d struct {
		MaxSeq int64 `bson:"max_seq"`
	}
	err = s.msgs.FindOne(ctx, bson.D{{Key: "_id", Value: DocIDOf(convID, lo)}},
		options.FindOne().SetProjection(bson.D{{Key: "max_seq", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, 0, false, nil // purged away meanwhile: nothing to report
	}
	if err != nil {
		return 0, 0, false, dbErr("witness top bucket", err)
	}
	return lo, uint64(d.MaxSeq), true, nil
}
