package history

import (
	"context"
	"errors"
	"strconv"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// Per-user state beside the buckets: deletion records past the del_list
// bound, and the clear watermark. Both are keyed by _id only, so that
// FerretDB serves them without a scan.

func deletionID(convID, seq, uid uint64) string {
	return strconv.FormatUint(convID, 10) + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.FormatUint(uid, 10)
}

func userStateID(convID, uid uint64) string {
	return strconv.FormatUint(convID, 10) + ":" + strconv.FormatUint(uid, 10)
}

// addDeletionRecord records that uid deleted (conv, seq) for themselves;
// idempotent.
func (s *Store) addDeletionRecord(ctx context.Context, convID, seq, uid uint64) error {
	id := deletionID(convID, seq, uid)
	_, err := s.dels.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{
		{Key: "conv_id", Value: strconv.FormatUint(convID, 10)},
		{Key: "seq", Value: int64(seq)},
		{Key: "uid", Value: int64(uid)},
	}}}, options.Update().SetUpsert(true))
	if err != nil {
		return dbErr("record deletion "+id, err)
	}
	return nil
}

// deletionRecords returns which of seqs uid deleted past the del_list
// bound: one query.
func (s *Store) deletionRecords(ctx context.Context, convID, uid uint64, seqs []uint64) (map[uint64]bool, error) {
	out := make(map[uint64]bool)
	if len(seqs) == 0 {
		return out, nil
	}
	ids := make(bson.A, len(seqs))
	for i, seq := range seqs {
		ids[i] = deletionID(convID, seq, uid)
	}
	cur, err := s.dels.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return nil, dbErr("find deletions", err)
	}
	var docs []struct {
		Seq int64 `bson:"seq"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, dbErr("find deletions", err)
	}
	for _, d := range docs {
		out[uint64(d.Seq)] = true
	}
	return out, nil
}

// deleteRecordsOf removes the deletion records of one message (after a
// physical delete nothing is left to hide).
func (s *Store) deleteRecordsOf(ctx context.Context, convID, seq uint64) error {
	_, err := s.dels.DeleteMany(ctx, bson.D{
		{Key: "conv_id", Value: strconv.FormatUint(convID, 10)},
		{Key: "seq", Value: int64(seq)},
	})
	if err != nil {
		return dbErr("delete deletion records", err)
	}
	return nil
}

type userState struct {
	MinSeq int64 `bson:"min_seq"`
}

// minSeq is uid's clear watermark in the conversation (0: never cleared).
func (s *Store) minSeq(ctx context.Context, convID, uid uint64) (uint64, error) {
	var st userState
	err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: userStateID(convID, uid)}}).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("read watermark", err)
	}
	return uint64(st.MinSeq), nil
}

// raiseMinSeq raises uid's watermark to at least target in one write and
// returns the watermark in force.
func (s *Store) raiseMinSeq(ctx context.Context, convID, uid, target uint64) (uint64, error) {
	id := userStateID(convID, uid)
	var st userState
	// $max is a read-modify-replace on FerretDB v1: under the document's
	// lock until answered (write).
	err := s.write(ctx, id, func(ctx context.Context) error {
		err := s.users.FindOneAndUpdate(ctx,
			bson.D{{Key: "_id", Value: id}},
			bson.D{{Key: "$max", Value: bson.D{{Key: "min_seq", Value: int64(target)}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
		).Decode(&st)
		if err != nil {
			return dbErr("raise watermark", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return uint64(st.MinSeq), nil
}
