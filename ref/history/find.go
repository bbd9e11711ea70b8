package history

import (
	"context"
	"fmt"
	"time"

	"imlab/ref/model"
	"imlab/ref/msgid"
)

// FindMaxBuckets bounds the bucket documents one FindMessage reads
// (FindMaxBuckets × bucket size messages back from the newest).
const FindMaxBuckets = 64

// findClockSkew is how much older than its msg_id's time a message may be
// recorded (send_time is the commit time; ids come from several nodes'
// clocks). A bucket whose newest message is older than the target's id
// time minus this cannot be followed, in a lower bucket, by the target.
const findClockSkew = time.Minute

// findMaxProbes bounds the _id probes that locate the highest bucket.
const findMaxProbes = 2 * 48

// FindMessage finds a message by (conv_id, msg_id), for callers that know
// no conv_seq (an inbox row names conv_id and msg_id only; conv_seq is not
// derivable from them). Every read is an exact _id lookup (the only filter
// FerretDB v1 serves without a collection scan):
//
//  1. the highest bucket of the conversation is located by probing _ids
//     0, 1, 3, 7, ... and bisecting between the last present and the first
//     absent one (about 2·log2(buckets) projected lookups);
//  2. buckets are read newest first, at most FindMaxBuckets of them, and
//     the scan stops early once a bucket's newest message is older than the
//     msg_id's time (msg_ids are time-ordered) minus findClockSkew.
//
// It reports false when the message is not found within those bounds: the
// conversation has no bucket 0, the buckets are not contiguous from 0 (a
// history write that never happened below the top), the slot was
// physically deleted, or the message lies more than FindMaxBuckets buckets
// below the newest. A revoked or self-deleted message is still found (those
// are layers over the immutable message).
func (s *Store) FindMessage(ctx context.Context, convID, msgID uint64) (model.Message, bool, error) {
	if _, _, _, err := model.ParseConvID(convID); err != nil {
		return model.Message{}, false, err
	}
	if msgID == 0 {
		return model.Message{}, false, fmt.Errorf("%w: msg_id 0", model.ErrInvalid)
	}
	top, ok, err := s.topBucket(ctx, convID)
	if err != nil || !ok {
		return model.Message{}, false, err
	}
	notBefore := msgid.Time(msgID).Add(-findClockSkew)
	for i := uint64(0); i < FindMaxBuckets && i <= top; i++ {
		b, err := s.loadBucket(ctx, convID, top-i)
		if err != nil {
			return model.Message{}, false, err
		}
		if b == nil {
			continue
		}
		var newest time.Time
		for _, sl := range b.Slots {
			if sl.State != SlotFilled {
				continue
			}
			if sl.Msg.MsgID == msgID {
				return *sl.Msg, true, nil
			}
			if sl.Msg.CreatedAt.After(newest) {
				newest = sl.Msg.CreatedAt
			}
		}
		if !newest.IsZero() && newest.Before(notBefore) {
			break
		}
	}
	return model.Message{}, false, nil
}

// topBucket locates the highest bucket index of a conversation whose
// buckets exist contiguously from 0; false when bucket 0 does not exist.
func (s *Store) topBucket(ctx context.Context, convID uint64) (uint64, bool, error) {
	ok, err := s.bucketExists(ctx, convID, 0)
	if err != nil || !ok {
		return 0, false, err
	}
	lo, hi := uint64(0), uint64(0) // lo exists; hi (when > lo) does not
	probes := 1
	for step := uint64(1); ; step *= 2 {
		if probes >= findMaxProbes {
			return lo, true, nil
		}
		probes++
		ok, err := s.bucketExists(ctx, convID, lo+step)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			hi = lo + step
			break
		}
		lo += step
	}
	for hi-lo > 1 && probes < findMaxProbes {
		probes++
		mid := lo + (hi-lo)/2
		ok, err := s.bucketExists(ctx, convID, mid)
		if err != nil {
			return 0, false, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true, nil
}
