package ledger

import (
	"encoding/binary"
	"fmt"
	"time"
)

// This file holds the records version 3 adds: the clients' conversation
// actions and their answers (KindAction), the conversation history as
// stored (KindHistory), the server's retention (KindRetention), and the
// extended kinds behind the escape kind 15 (KindDelRange).

// Version 3 record kinds.
const (
	KindAction    Kind = 12 // a conversation action and its answer; sub-kind: Action
	KindHistory   Kind = 13 // the history witness; sub-kind: historySlot, historyWatermark, historyHead
	KindRetention Kind = 14 // the server's retention; sub-kind: retentionDeletion, retentionSettings
	// kindExt escapes to an extended kind: the tag is followed by the kind
	// (a uvarint, 16 or more) and the payload's length (a uvarint), so a
	// reader skips an extended kind it does not know.
	kindExt Kind = 15
	// KindDelRange (extended): a range of conv_seqs the server says it
	// deleted (a target's delete log, e.g. Tinode's {get what:"del"}).
	KindDelRange Kind = 16
)

// Action is a conversation action of a device (the sub-kind of a
// KindAction record).
type Action uint8

// Actions. Their names (String) are what Capabilities.Actions lists.
const (
	ActConvPull Action = 1 // a page of one conversation's inbox entries above a cursor (GET /v1/conv/pull)
	ActHistory  Action = 2 // a page of one conversation's history by conv_seq (GET /v1/history)
	ActRevoke   Action = 3 // revoke one message for everyone (POST /v1/msg/revoke)
	ActDelete   Action = 4 // delete one message for the caller (POST /v1/msg/delete)
	ActClear    Action = 5 // clear the conversation for the caller (POST /v1/conv/clear)
	ActRead     Action = 6 // mark conv_seqs read (POST /v1/msg/read)
)

// Actions lists every action, in order.
var Actions = []Action{ActConvPull, ActHistory, ActRevoke, ActDelete, ActClear, ActRead}

func (a Action) String() string {
	switch a {
	case ActConvPull:
		return "conv-pull"
	case ActHistory:
		return "history"
	case ActRevoke:
		return "revoke"
	case ActDelete:
		return "delete"
	case ActClear:
		return "clear"
	case ActRead:
		return "read"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Limits of the version 3 records.
const (
	// MaxPageItems bounds the items of one conversation pull or history
	// page (the reference answers at most 50 and its history range;
	// Tinode at most max_results, 1024 by default).
	MaxPageItems = 1024
	// MaxDelList bounds the uids of a history slot's del_list.
	MaxDelList = 4096
)

// Act is what every conversation action records: the device, the
// conversation, when (offsets from the shard's start, like an attempt's:
// intended, started, ended) and how it ended. Outcome is OK for a 2xx
// answer, Fail for a definite refusal (4xx: nothing happened), Unknown for
// a timeout, a lost connection or a 5xx (it may or may not have happened).
// Status is the last HTTP status (0: a transport error).
type Act struct {
	Dev      uint32
	ConvID   uint64
	Intended time.Duration
	Started  time.Duration
	Ended    time.Duration
	Outcome  Outcome
	Status   uint16
}

// PulledItem is one entry of a conversation pull's answer.
type PulledItem struct {
	Seq     uint64 // inbox seq
	MsgID   uint64
	ConvSeq uint64
}

// ConvPull is one page of a conversation pull: the device asked for the
// conversation's entries of its inbox above Cursor (an inbox seq), at
// most Limit. The answer (Outcome OK) is Items in the order received,
// HasMore and NextCursor. SyncRead says the device read its stored sync
// cursor right before (SyncBefore) and right after (SyncAfter) the page,
// without acknowledging anything in between (e.g. POST /v1/sync/ack
// {"pull_seq":0}, which answers the stored cursor and never lowers it), so
// the checker can hold the page to leaving it alone.
type ConvPull struct {
	Act
	Cursor     uint64
	Limit      uint32
	Items      []PulledItem
	HasMore    bool
	NextCursor uint64
	SyncRead   bool
	SyncBefore uint64
	SyncAfter  uint64
}

// ReadMark is a history item's is_read as the page showed it.
type ReadMark uint8

// Read marks.
const (
	ReadAbsent ReadMark = 0 // the item carried no is_read (a group, or a target without it)
	ReadNo     ReadMark = 1
	ReadYes    ReadMark = 2
)

// PageItem is one item of a history page, as the caller saw it (projected
// for them). Tag is the send the content names (the loadgen's tick, the
// same number Delivery.Tick and Witness.Tick carry; 0 when the content
// names none or is not shown). A tombstone carries ConvSeq only.
type PageItem struct {
	ConvSeq   uint64
	MsgID     uint64
	Sender    uint64
	Tag       uint64
	Revoked   bool
	Tombstone bool
	Read      ReadMark
}

// HistoryPage is one page of a conversation's history by conv_seq: the
// device asked for From..To and got Items (Outcome OK) in the order
// received.
type HistoryPage struct {
	Act
	From, To uint64
	Items    []PageItem
}

// MsgAction is a revoke (ActRevoke) or a delete-for-me (ActDelete) of the
// message at ConvSeq.
type MsgAction struct {
	Act
	ConvSeq uint64
}

// Clear is a clear of the conversation for the caller; MinSeq is the
// watermark the answer said is in force (Outcome OK only).
type Clear struct {
	Act
	MinSeq uint64
}

// MarkRead marks the conversation's conv_seqs From..To read by the caller.
type MarkRead struct {
	Act
	From, To uint64
}

// Slot is one conv_seq of a conversation's history as the store holds it,
// unprojected (the history witness): the message (MsgID, Sender, Tag: the
// send its stored content names), whether it is revoked, physically
// deleted (Purged: no message stays; MsgID 0), marked read, and the uids
// that deleted it for themselves (the del_list, and the per-user deletion
// records past its bound). A conv_seq the store holds nothing for has no
// slot record. At is when it was read.
type Slot struct {
	ConvID  uint64
	ConvSeq uint64
	MsgID   uint64
	Sender  uint64
	Tag     uint64
	Revoked bool
	Purged  bool
	IsRead  bool
	DelList []uint64
	At      time.Duration
}

// Watermark is one uid's clear watermark in a conversation as stored
// (history shows that uid only the conv_seqs above MinSeq).
type Watermark struct {
	ConvID uint64
	UID    uint64
	MinSeq uint64
	At     time.Duration
}

// ConvHead is the highest conv_seq the server says it has allocated in a
// conversation (the reference's conv_counter, Tinode's topic seq): the
// history witness knows every conv_seq up to it, stored or not.
type ConvHead struct {
	ConvID uint64
	MaxSeq uint64
	At     time.Duration
}

// RetentionReason says why retention deleted an inbox row.
type RetentionReason uint8

// Retention reasons.
const (
	RetentionPulled  RetentionReason = 1 // every device had pulled past it (early deletion)
	RetentionExpired RetentionReason = 2 // older than the retention window
)

// Deletion is one inbox row the server's retention deleted: (UID, Seq)
// holding MsgID, created at CreatedAt and deleted at DeletedAt. Both are
// offsets on the ledger's time base (the producer converts the server's
// clock with the offset it measured); CreatedAt may be negative (a row
// older than the run).
type Deletion struct {
	UID       uint64
	Seq       uint64
	MsgID     uint64
	CreatedAt time.Duration
	DeletedAt time.Duration
	Reason    RetentionReason
}

// RetentionSettings are the retention rules in force from At on: rows go
// once older than MaxAge, or once every device has pulled past them and
// they are older than PulledMinAge; a pass runs every Interval.
type RetentionSettings struct {
	MaxAge       time.Duration
	PulledMinAge time.Duration
	Interval     time.Duration
	At           time.Duration
}

// DelRange is a range of conv_seqs From..To of a conversation that the
// server says it deleted (a target's delete log), for everyone (UID 0) or
// for one uid only; At is when it was read.
type DelRange struct {
	ConvID   uint64
	From, To uint64
	UID      uint64
	At       time.Duration
}

// Sub-kinds of KindHistory and KindRetention.
const (
	historySlot       = 1
	historyWatermark  = 2
	historyHead       = 3
	retentionDeletion = 1
	retentionSettings = 2
)

// Flags of the version 3 records.
const (
	pullHasMore  = 1
	pullSyncRead = 2
	itemRevoked  = 1
	itemTomb     = 2
	itemReadBits = 2 // ReadMark << itemReadBits
	slotRevoked  = 1
	slotPurged   = 2
	slotRead     = 4
)

func b2u(b bool, bit uint64) uint64 {
	if b {
		return bit
	}
	return 0
}

// micro appends d as zigzag microseconds, delta-coded against the shard's
// previous time.
func (s *Shard) micro(d time.Duration) {
	at := d.Microseconds()
	s.sv(at - s.st.prevAt)
	s.st.prevAt = at
}

// act opens an action record: the tag and the fields every action has.
// The caller holds s.mu.
func (s *Shard) act(a Action, x Act) {
	ix := s.conv(x.ConvID)
	s.tag(KindAction, uint8(a))
	s.uv(uint64(x.Outcome))
	s.uv(uint64(x.Dev))
	s.uv(ix)
	s.sv(int64(x.Intended) - s.st.prevActIntended)
	s.st.prevActIntended = int64(x.Intended)
	s.sv(int64(x.Started - x.Intended))
	s.sv(int64(x.Ended - x.Started))
	s.uv(uint64(x.Status))
}

// ConvPull appends a conversation pull and its answer. More than
// MaxPageItems items is an error.
func (s *Shard) ConvPull(p ConvPull) error {
	if len(p.Items) > MaxPageItems {
		return fmt.Errorf("%w: conversation pull of %d items (max %d)", ErrInvalid, len(p.Items), MaxPageItems)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.act(ActConvPull, p.Act)
	s.uv(p.Cursor)
	s.uv(uint64(p.Limit))
	s.uv(b2u(p.HasMore, pullHasMore) | b2u(p.SyncRead, pullSyncRead))
	s.uv(p.NextCursor)
	if p.SyncRead {
		s.uv(p.SyncBefore)
		s.uv(p.SyncAfter)
	}
	s.uv(uint64(len(p.Items)))
	for _, it := range p.Items {
		s.uv(it.Seq)
		s.sv(int64(it.MsgID - s.st.prevMsgID))
		s.st.prevMsgID = it.MsgID
		s.uv(it.ConvSeq)
	}
	s.emit()
	return nil
}

// HistoryPage appends a history page and its answer. More than
// MaxPageItems items is an error.
func (s *Shard) HistoryPage(p HistoryPage) error {
	if len(p.Items) > MaxPageItems {
		return fmt.Errorf("%w: history page of %d items (max %d)", ErrInvalid, len(p.Items), MaxPageItems)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.act(ActHistory, p.Act)
	s.uv(p.From)
	s.uv(p.To)
	s.uv(uint64(len(p.Items)))
	for _, it := range p.Items {
		s.uv(it.ConvSeq)
		s.sv(int64(it.MsgID - s.st.prevMsgID))
		s.st.prevMsgID = it.MsgID
		s.uv(it.Sender)
		s.uv(it.Tag)
		s.uv(b2u(it.Revoked, itemRevoked) | b2u(it.Tombstone, itemTomb) | uint64(it.Read)<<itemReadBits)
	}
	s.emit()
	return nil
}

// Revoke appends a revoke and its answer.
func (s *Shard) Revoke(a MsgAction) { s.msgAction(ActRevoke, a) }

// Delete appends a delete-for-me and its answer.
func (s *Shard) Delete(a MsgAction) { s.msgAction(ActDelete, a) }

func (s *Shard) msgAction(k Action, a MsgAction) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.act(k, a.Act)
	s.uv(a.ConvSeq)
	s.emit()
}

// Clear appends a clear and its answer.
func (s *Shard) Clear(c Clear) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.act(ActClear, c.Act)
	s.uv(c.MinSeq)
	s.emit()
}

// MarkRead appends a mark-read and its answer.
func (s *Shard) MarkRead(r MarkRead) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.act(ActRead, r.Act)
	s.uv(r.From)
	s.uv(r.To)
	s.emit()
}

// Slot appends one history slot as stored. A del_list longer than
// MaxDelList is an error.
func (s *Shard) Slot(x Slot) error {
	if len(x.DelList) > MaxDelList {
		return fmt.Errorf("%w: slot %d of conv %d has a del_list of %d uids (max %d)", ErrInvalid, x.ConvSeq, x.ConvID, len(x.DelList), MaxDelList)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.conv(x.ConvID)
	s.tag(KindHistory, historySlot)
	s.uv(ix)
	s.uv(x.ConvSeq)
	s.sv(int64(x.MsgID - s.st.prevMsgID))
	s.st.prevMsgID = x.MsgID
	s.uv(x.Sender)
	s.uv(x.Tag)
	s.uv(b2u(x.Revoked, slotRevoked) | b2u(x.Purged, slotPurged) | b2u(x.IsRead, slotRead))
	s.uv(uint64(len(x.DelList)))
	for _, u := range x.DelList {
		s.uv(u)
	}
	s.micro(x.At)
	s.emit()
	return nil
}

// Watermark appends one clear watermark as stored.
func (s *Shard) Watermark(w Watermark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.conv(w.ConvID)
	s.tag(KindHistory, historyWatermark)
	s.uv(ix)
	s.uv(w.UID)
	s.uv(w.MinSeq)
	s.micro(w.At)
	s.emit()
}

// ConvHead appends a conversation's highest allocated conv_seq.
func (s *Shard) ConvHead(h ConvHead) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.conv(h.ConvID)
	s.tag(KindHistory, historyHead)
	s.uv(ix)
	s.uv(h.MaxSeq)
	s.micro(h.At)
	s.emit()
}

// Deletion appends one row retention deleted.
func (s *Shard) Deletion(d Deletion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag(KindRetention, retentionDeletion)
	s.uv(uint64(d.Reason))
	s.uv(d.UID)
	s.uv(d.Seq)
	s.sv(int64(d.MsgID - s.st.prevMsgID))
	s.st.prevMsgID = d.MsgID
	s.sv(d.CreatedAt.Microseconds())
	s.micro(d.DeletedAt)
	s.emit()
}

// Retention appends the retention settings in force.
func (s *Shard) Retention(r RetentionSettings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag(KindRetention, retentionSettings)
	s.sv(r.MaxAge.Microseconds())
	s.sv(r.PulledMinAge.Microseconds())
	s.sv(r.Interval.Microseconds())
	s.micro(r.At)
	s.emit()
}

// DelRange appends a deleted range (an extended record).
func (s *Shard) DelRange(r DelRange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p []byte
	p = binary.AppendUvarint(p, r.ConvID)
	p = binary.AppendUvarint(p, r.From)
	p = binary.AppendUvarint(p, r.To)
	p = binary.AppendUvarint(p, r.UID)
	p = binary.AppendUvarint(p, zz(r.At.Microseconds()))
	s.ext(KindDelRange, p)
}

// ext appends an extended record of kind k with payload p. The caller
// holds s.mu.
func (s *Shard) ext(k Kind, p []byte) {
	s.tag(kindExt, 0)
	s.uv(uint64(k))
	s.uv(uint64(len(p)))
	s.buf = append(s.buf, p...)
	s.emit()
}
