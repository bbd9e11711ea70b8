package ledger

import "time"

// Shift moves every time of the record by d: a record's times are offsets
// from its shard's start, and ledgers of several generators (segments of
// one run) are judged together on one time base, the earliest start. Every
// record kind with a time field is shifted here; a test holds each
// time.Duration field of Record to it.
func (r *Record) Shift(d time.Duration) {
	if d == 0 {
		return
	}
	switch r.Kind {
	case KindAttempt:
		r.Attempt.Intended += d
		r.Attempt.Started += d
		r.Attempt.Ended += d
	case KindDelivery:
		r.Delivery.At += d
	case KindCursor:
		r.Cursor.At += d
	case KindProbe:
		r.Probe.At += d
	case KindAction:
		if x := r.Act(); x != nil {
			x.Intended += d
			x.Started += d
			x.Ended += d
		}
	case KindHistory:
		switch r.HistoryPart {
		case PartSlot:
			r.Slot.At += d
		case PartWatermark:
			r.Watermark.At += d
		case PartHead:
			r.Head.At += d
		}
	case KindRetention:
		if r.IsSettings {
			r.Settings.At += d
			return
		}
		r.Deletion.CreatedAt += d
		r.Deletion.DeletedAt += d
	case KindDelRange:
		r.DelRange.At += d
	case KindContact:
		r.Contact.At += d
	}
}

// Act is the common part of an action record (nil for other kinds).
func (r *Record) Act() *Act {
	if r.Kind != KindAction {
		return nil
	}
	switch r.Action {
	case ActConvPull:
		return &r.ConvPull.Act
	case ActHistory:
		return &r.History.Act
	case ActRevoke, ActDelete:
		return &r.MsgAction.Act
	case ActClear:
		return &r.Clear.Act
	case ActRead:
		return &r.Read.Act
	}
	return nil
}
