// Package ledger owns the on-disk record of a load run: every send attempt
// and its outcome (with the ACK's msg_id, conv_id and conv_seq when there is
// one), the population (devices, groups) from which recipients follow, every
// delivery each device stored, every cursor each device acknowledged, the
// witness pulls made after the final drain, the store witness (every inbox
// read from the store of record through the server's lab route), the
// read-after-ACK probes, the clients' conversation actions and their
// answers, the conversation history as stored, the server's retention
// deletions, and notes that say which of those pieces of evidence could be
// gathered.
//
// Format: a run directory holds shard files ledger-NNN.bin. Each starts with
// the 8-byte magic "IMLEDG01", a uvarint length and a JSON Header, then
// records: one tag byte (kind in the low nibble, a sub-kind in the high
// nibble) followed by uvarint / zigzag-varint fields. Fields that move
// slowly are delta-coded against the previous record of the shard (tick,
// intended time, msg_id, time of observation, each device's last seq), and
// conversation ids are replaced by a per-shard dictionary index (a conv
// record defines the next index the first time an id appears). A shard ends
// with an end record holding its record count; a shard cut short (a crash)
// reads up to its last whole record and is reported as truncated.
//
// Versions: the header's "version" field (absent: 1). Version 2 adds the
// stored (kind 9), probe (kind 10) and note (kind 11) records. Version 3
// adds:
//
//   - the header's "target" (Capabilities): what the server under test
//     offers (a per-user inbox, idempotent send, which conversation actions,
//     a delete log); absent: the reference server (DefaultCapabilities);
//   - on an attempt (sub-kind bits above the outcome): TriedUnknown, a try
//     before the last one ended of unknown outcome; and the conversation of
//     a send not ACKed when the driver knows it;
//   - action records (kind 12, sub-kind Action): a device's conversation
//     actions and their answers, each with its device, conversation,
//     intended/started/ended times, outcome (ok, fail, unknown) and last
//     status: a conversation pull (cursor, limit -> items seq/msg_id/
//     conv_seq, has_more, next_cursor, and the device's sync cursor read
//     before and after), a history page (from..to -> items conv_seq/msg_id/
//     sender/content tag/revoked/tombstone/is_read), revoke and
//     delete-for-me (conv_seq), clear (-> min_seq), mark read (from..to);
//   - history witness records (kind 13): the history store as stored,
//     without projection, read after the final drain: a slot per stored
//     conv_seq (msg_id, sender, content tag, revoked, purged, is_read, the
//     uids in its del_list), each uid's clear watermark per conversation, and
//     a conversation's highest allocated conv_seq;
//   - retention records (kind 14): each inbox row the server's retention
//     deleted (uid, seq, msg_id, created and deleted, pulled or expired),
//     and the retention settings in force;
//   - extended records (kind 15, then the extended kind and the payload's
//     length, so a reader skips a kind it does not know): the delete ranges
//     of a target's delete log (KindDelRange, 16); a device's first
//     contact with the target (KindContact, 17: the generator makes every
//     device known before the load, as a real client registers before it
//     goes offline, and the checker counts a device for retention only
//     from its first contact).
//
// A ledger of an older version reads as before and simply has none of the
// newer records. Every time in a record is an offset from its shard's start
// (Record.Shift moves them all onto another base).
//
// A shard is an append-only log written through a buffered writer; its
// methods serialize on a mutex so several goroutines may share a shard, and
// the records of one goroutine keep their order. The ledger must not know
// about HTTP or about what the checker concludes.
package ledger

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Magic opens every shard file.
const Magic = "IMLEDG01"

// Version is the format version this package writes (Header.Version).
const Version = 3

// MaxNoteBytes bounds a note's JSON text.
const MaxNoteBytes = 4096

// MaxShards bounds the number of shard files of a run.
const MaxShards = 4096

// MaxGroupMembers bounds a group record (the contract's limit).
const MaxGroupMembers = 500

// maxDIDLen bounds a device id.
const maxDIDLen = 64

// ErrCorrupt marks a shard that cannot be decoded.
var ErrCorrupt = errors.New("ledger: corrupt")

// ErrInvalid marks a bad argument.
var ErrInvalid = errors.New("ledger: invalid")

// Kind is a record kind (low nibble of the tag byte).
type Kind uint8

// Record kinds.
const (
	KindDevice   Kind = 1
	KindGroup    Kind = 2
	KindAttempt  Kind = 3
	KindDelivery Kind = 4
	KindCursor   Kind = 5
	KindWitness  Kind = 6
	KindEnd      Kind = 7
	kindConv     Kind = 8
	// Version 2.
	KindStored Kind = 9  // an inbox entry read from the store of record
	KindProbe  Kind = 10 // a read-after-ACK probe
	KindNote   Kind = 11 // which evidence was gathered (JSON)
)

// Outcome of a send attempt, in Jepsen's terms.
type Outcome uint8

// Outcomes.
const (
	OK      Outcome = 1 // ACKed: the server promised it
	Fail    Outcome = 2 // definitely not done (a 4xx refusal)
	Unknown Outcome = 3 // timeout, connection error, 5xx: may or may not have happened
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Fail:
		return "fail"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Via tells how a device got a message.
type Via uint8

// Delivery paths.
const (
	Push Via = 1 // WebSocket frame
	Pull Via = 2 // sync/pull page
)

// DeviceKind is a device's behaviour in the population.
type DeviceKind uint8

// Device behaviours.
const (
	Online  DeviceKind = 1 // WebSocket for the whole run
	Offline DeviceKind = 2 // comes back now and then and pulls to the end
	Crashy  DeviceKind = 3 // pulls like Offline but crashes before acking, or before storing
)

func (k DeviceKind) String() string {
	switch k {
	case Online:
		return "online"
	case Offline:
		return "offline"
	case Crashy:
		return "crashy"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// CursorStatus tells what became of a cursor acknowledgement.
type CursorStatus uint8

// Cursor statuses. Accepted and Sent (over WebSocket, no answer) count as
// the device's claim; Refused does not.
const (
	Accepted CursorStatus = 1
	Refused  CursorStatus = 2
	Sent     CursorStatus = 3
)

// Device is one member of the population.
type Device struct {
	Dev  uint32
	UID  uint64
	Kind DeviceKind
	DID  string
}

// Group is a group conversation's membership.
type Group struct {
	GroupID uint64
	Members []uint64
}

// Attempt is one logical send (retries of the same client_msg_id included).
type Attempt struct {
	// Tick is the pacer's index, and the send's client tag: the
	// client_msg_id derives from it, and the content carries it (a
	// driver for a target without idempotent send puts it in the
	// message's head) so that every copy of the message names its send.
	Tick     uint64
	Dev      uint32 // sending device
	ConvType uint8  // 1 = 1:1, 2 = group
	Target   uint64 // to_uid (1:1) or group_id
	Intended time.Duration
	Started  time.Duration
	Ended    time.Duration
	Outcome  Outcome
	Tries    uint8
	Status   uint16 // last HTTP status, 0 for a transport error; not kept (200) when OK
	MsgID    uint64 // OK only
	// ConvID: OK, the ACK's; otherwise (version 3) the conversation the
	// send was for when the driver knows it (0: not known).
	ConvID  uint64
	ConvSeq uint64 // OK only
	// TriedUnknown (version 3): a try before the last one ended of unknown
	// outcome (timeout, connection lost, 5xx), so a Fail outcome does not
	// say that nothing happened.
	TriedUnknown bool
}

// Attempt sub-kind bits above the outcome (version 3).
const (
	attemptTriedUnknown = 4
	attemptConv         = 8 // a non-OK attempt carries its conversation
)

// Delivery is a message that a device stored.
type Delivery struct {
	Dev     uint32
	Via     Via
	Seq     uint64
	MsgID   uint64
	ConvID  uint64
	ConvSeq uint64
	Tick    uint64        // from the content; 0 if the content is not this run's
	At      time.Duration // kept to the microsecond
}

// Cursor is an acknowledgement of a device's cursor.
type Cursor struct {
	Dev    uint32
	Seq    uint64
	Status CursorStatus
	At     time.Duration // kept to the microsecond
}

// Witness is one inbox entry seen by the checker's full pull of a uid.
type Witness struct {
	UID     uint64
	Seq     uint64
	MsgID   uint64
	ConvID  uint64
	ConvSeq uint64
	// Tick is the send the entry's content names (0: not one of this
	// run's sends). Written with sub-kind 1; a record of sub-kind 0 (older
	// ledgers) has none.
	Tick uint64
}

// Probe found-flags: what a read-after-ACK probe found in the store for
// one uid.
const (
	FoundInbox   uint8 = 1 // the uid's offline_msg row of the message
	FoundContent uint8 = 2 // the msg_content row
	FoundOutbox  uint8 = 4 // the mq_outbox row (any status)
)

// ProbeStatus tells whether a probe could read the store.
type ProbeStatus uint8

// Probe statuses.
const (
	ProbeRead   ProbeStatus = 1 // the store answered; Found says what it holds
	ProbeFailed ProbeStatus = 2 // no answer (Status: the HTTP status, 0 for a transport error)
)

// Probe is one read-after-ACK probe: right after the ACK of MsgID, the
// store of record was read for UID (the sender, or a recipient).
type Probe struct {
	Tick   uint64
	MsgID  uint64
	UID    uint64
	Status ProbeStatus
	Found  uint8  // FoundInbox | FoundContent | FoundOutbox
	HTTP   uint16 // ProbeFailed: the last HTTP status (0: transport error)
	// At is when the probe's answer came (an offset from the shard's
	// start like every time of the ledger, kept to the microsecond); the
	// ACK's Ended is when the ACK came.
	At time.Duration
}

// Note is what a run says about the evidence it gathered, so that the
// checker can name a check it could not make. Check names which evidence
// ("pull-witness", "store-witness", "read-after-ack"; version 3:
// "history-witness", the history store read as stored, and "retention",
// the server's deletion log read whole); Made is false when the evidence
// could not be gathered at all (Reason says why); Errors counts the uids,
// conversations or probes that failed when the rest succeeded. One note
// per check sums it up (UID 0, Conv 0); a store witness that failed for
// some uids adds one note per such uid, a history witness that failed for
// some conversations one note per such conversation.
type Note struct {
	Check string `json:"check"`
	// UID, when not 0, makes the note about one uid (a store witness
	// that failed for that uid only).
	UID    uint64 `json:"uid,omitempty"`
	Made   bool   `json:"made"`
	Reason string `json:"reason,omitempty"`
	// Policy is the server's ack policy as the lab route reported it.
	Policy string `json:"policy,omitempty"`
	UIDs   int    `json:"uids,omitempty"`
	Probes int    `json:"probes,omitempty"`
	Errors int    `json:"errors,omitempty"`
	// Version 3.
	// Conv, when not 0, makes the note about one conversation (a history
	// witness that failed for that conversation only).
	Conv uint64 `json:"conv,omitempty"`
	// Convs counts the conversations a history witness read.
	Convs int `json:"convs,omitempty"`
	// Drained (history-witness): the producer saw the history tier drained
	// (nothing left to write: its consumers' lag 0) before it read the
	// store. A history witness whose summary note does not say so is not
	// judged: a history still being written would show messages missing
	// that are only late. For InboxTierCheck: the inbox tier (its queue
	// and outbox) had drained before the final pulls and the witness;
	// when it had not, Reason says what was still on its way.
	Drained bool `json:"drained,omitempty"`
}

// InboxTierCheck is the note that says whether everything on its way to
// an inbox (queued, or in an outbox) had arrived before the final pulls
// and the pull witness: a message missing while the tier had not drained
// may be late rather than lost. Runs before it wrote none (the checker
// then says nothing of the tier).
const InboxTierCheck = "inbox-tier"

// Record is one decoded record; Kind says which field is set (for
// KindAction, Action says which of ConvPull, History, MsgAction, Clear and
// Read; for KindHistory, HistoryPart which of Slot, Watermark and Head;
// for KindRetention, IsSettings which of Settings and Deletion; for
// KindDelRange, DelRange; for KindContact, Contact).
type Record struct {
	Kind     Kind
	Device   Device
	Group    Group
	Attempt  Attempt
	Delivery Delivery
	Cursor   Cursor
	Witness  Witness // KindWitness and KindStored
	Probe    Probe
	Note     Note
	Count    uint64 // KindEnd: records in the shard before it
	// Version 3.
	Action      Action // KindAction
	ConvPull    ConvPull
	History     HistoryPage
	MsgAction   MsgAction // ActRevoke, ActDelete
	Clear       Clear
	Read        MarkRead
	HistoryPart HistoryPart // KindHistory
	Slot        Slot
	Watermark   Watermark
	Head        ConvHead
	IsSettings  bool // KindRetention: Settings (true) or Deletion
	Deletion    Deletion
	Settings    RetentionSettings
	DelRange    DelRange
	Contact     Contact // KindContact
}

// HistoryPart says which record of the history witness a KindHistory
// record is.
type HistoryPart uint8

// History witness parts.
const (
	PartSlot      HistoryPart = historySlot
	PartWatermark HistoryPart = historyWatermark
	PartHead      HistoryPart = historyHead
)

// state is the delta-coding context shared by writer and reader.
type state struct {
	prevTick     uint64
	prevDTick    uint64
	prevIntended int64
	prevMsgID    uint64
	prevAt       int64
	devSeq       map[uint32]uint64
	// Version 3: intended times of actions, apart from the attempts'.
	prevActIntended int64
}

func newState() state { return state{devSeq: map[uint32]uint64{}} }

// Shard is one append-only ledger file.
type Shard struct {
	mu    sync.Mutex
	f     *os.File
	bw    *bufio.Writer
	buf   []byte
	st    state
	convs map[uint64]uint64
	n     uint64
	err   error
}

// Ledger is the set of shards of one run.
type Ledger struct {
	dir    string
	shards []*Shard
}

// ShardPath names shard i in dir.
func ShardPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("ledger-%03d.bin", i))
}

// Shards returns how many shards the ledger has.
func (l *Ledger) Shards() int { return len(l.shards) }

// Shard returns shard i mod Shards().
func (l *Ledger) Shard(i int) *Shard { return l.shards[i%len(l.shards)] }

// Flush pushes buffered records of every shard to the files.
func (l *Ledger) Flush() error {
	var errs []error
	for _, s := range l.shards {
		s.mu.Lock()
		if s.err == nil {
			if err := s.bw.Flush(); err != nil {
				s.err = err
			}
		}
		errs = append(errs, s.err)
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Close writes each shard's end record, flushes, syncs and closes. It
// returns the first error any shard met.
func (l *Ledger) Close() error {
	var errs []error
	for _, s := range l.shards {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

func (s *Shard) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return s.err
	}
	if s.err == nil {
		s.buf = append(s.buf[:0], byte(KindEnd))
		s.buf = binary.AppendUvarint(s.buf, s.n)
		s.bw.Write(s.buf)
		if err := s.bw.Flush(); err != nil {
			s.err = err
		} else if err := s.f.Sync(); err != nil {
			s.err = err
		}
	}
	if err := s.f.Close(); err != nil && s.err == nil {
		s.err = err
	}
	s.f = nil
	if s.err != nil {
		return fmt.Errorf("ledger: %w", s.err)
	}
	return nil
}

// Err returns the first write error of the shard.
func (s *Shard) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func zz(d int64) uint64 { return uint64(d<<1) ^ uint64(d>>63) }

func unzz(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func (s *Shard) uv(v uint64) { s.buf = binary.AppendUvarint(s.buf, v) }
func (s *Shard) sv(d int64)  { s.buf = binary.AppendUvarint(s.buf, zz(d)) }
func (s *Shard) tag(k Kind, sub uint8) {
	s.buf = append(s.buf[:0], byte(k)|sub<<4)
}

// conv returns the dictionary index of id, first writing a conv record
// when id is new to the shard.
func (s *Shard) conv(id uint64) uint64 {
	if ix, ok := s.convs[id]; ok {
		return ix
	}
	ix := uint64(len(s.convs))
	s.convs[id] = ix
	var b [1 + binary.MaxVarintLen64]byte
	b[0] = byte(kindConv)
	n := binary.PutUvarint(b[1:], id)
	s.bw.Write(b[:1+n])
	return ix
}

func (s *Shard) emit() {
	if s.f == nil {
		if s.err == nil {
			s.err = errors.New("write after close")
		}
		return
	}
	if _, err := s.bw.Write(s.buf); err != nil && s.err == nil {
		s.err = err
	}
	s.n++
}

// Device appends a device record.
func (s *Shard) Device(d Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	did := d.DID
	if len(did) > maxDIDLen {
		did = did[:maxDIDLen]
	}
	s.tag(KindDevice, uint8(d.Kind))
	s.uv(uint64(d.Dev))
	s.uv(d.UID)
	s.uv(uint64(len(did)))
	s.buf = append(s.buf, did...)
	s.emit()
}

// Group appends a group record. Members beyond MaxGroupMembers are an error.
func (s *Shard) Group(g Group) error {
	if len(g.Members) > MaxGroupMembers {
		return fmt.Errorf("%w: group %d has %d members (max %d)", ErrInvalid, g.GroupID, len(g.Members), MaxGroupMembers)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag(KindGroup, 0)
	s.uv(g.GroupID)
	s.uv(uint64(len(g.Members)))
	for _, m := range g.Members {
		s.uv(m)
	}
	s.emit()
	return nil
}

// Attempt appends a send attempt.
func (s *Shard) Attempt(a Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ix uint64
	if a.Outcome == OK {
		ix = s.conv(a.ConvID)
	}
	sub := uint8(a.Outcome) | uint8(b2u(a.TriedUnknown, attemptTriedUnknown))
	if a.Outcome != OK && a.ConvID != 0 {
		ix = s.conv(a.ConvID)
		sub |= attemptConv
	}
	s.tag(KindAttempt, sub)
	s.sv(int64(a.Tick - s.st.prevTick))
	s.st.prevTick = a.Tick
	s.uv(uint64(a.Dev))
	s.uv(uint64(a.ConvType))
	s.uv(a.Target)
	s.sv(int64(a.Intended) - s.st.prevIntended)
	s.st.prevIntended = int64(a.Intended)
	s.sv(int64(a.Started - a.Intended))
	s.sv(int64(a.Ended - a.Started))
	s.uv(uint64(a.Tries))
	if a.Outcome != OK {
		s.uv(uint64(a.Status))
		if sub&attemptConv != 0 {
			s.uv(ix)
		}
	} else {
		s.sv(int64(a.MsgID - s.st.prevMsgID))
		s.st.prevMsgID = a.MsgID
		s.uv(ix)
		s.uv(a.ConvSeq)
	}
	s.emit()
}

// Delivery appends a stored message. The records of one device must come
// from one goroutine at a time (their order is the device's order).
func (s *Shard) Delivery(d Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.conv(d.ConvID)
	s.tag(KindDelivery, uint8(d.Via))
	s.uv(uint64(d.Dev))
	s.sv(int64(d.Seq - s.st.devSeq[d.Dev]))
	s.st.devSeq[d.Dev] = d.Seq
	s.sv(int64(d.MsgID - s.st.prevMsgID))
	s.st.prevMsgID = d.MsgID
	s.uv(ix)
	s.uv(d.ConvSeq)
	s.sv(int64(d.Tick - s.st.prevDTick))
	s.st.prevDTick = d.Tick
	at := d.At.Microseconds()
	s.sv(at - s.st.prevAt)
	s.st.prevAt = at
	s.emit()
}

// Cursor appends a cursor acknowledgement.
func (s *Shard) Cursor(c Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag(KindCursor, uint8(c.Status))
	s.uv(uint64(c.Dev))
	s.uv(c.Seq)
	at := c.At.Microseconds()
	s.sv(at - s.st.prevAt)
	s.st.prevAt = at
	s.emit()
}

// Witness appends one inbox entry seen by a witness pull.
func (s *Shard) Witness(w Witness) { s.entry(KindWitness, 1, w) }

// Stored appends one inbox entry read from the store of record (the store
// witness). Same fields as Witness.
func (s *Shard) Stored(w Witness) { s.entry(KindStored, 0, w) }

// entry appends a witnessed inbox entry of kind k.
func (s *Shard) entry(k Kind, sub uint8, w Witness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.conv(w.ConvID)
	s.tag(k, sub)
	s.uv(w.UID)
	s.uv(w.Seq)
	s.sv(int64(w.MsgID - s.st.prevMsgID))
	s.st.prevMsgID = w.MsgID
	s.uv(ix)
	s.uv(w.ConvSeq)
	s.uv(w.Tick)
	s.emit()
}

// Probe appends a read-after-ACK probe.
func (s *Shard) Probe(p Probe) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag(KindProbe, uint8(p.Status))
	s.uv(p.Tick)
	s.sv(int64(p.MsgID - s.st.prevMsgID))
	s.st.prevMsgID = p.MsgID
	s.uv(p.UID)
	s.uv(uint64(p.Found))
	s.uv(uint64(p.HTTP))
	at := p.At.Microseconds()
	s.sv(at - s.st.prevAt)
	s.st.prevAt = at
	s.emit()
}

// Note appends a note on the evidence. A note whose JSON is longer than
// MaxNoteBytes is an error.
func (s *Shard) Note(n Note) error {
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("ledger: note: %w", err)
	}
	if len(b) > MaxNoteBytes {
		return fmt.Errorf("%w: note of %d bytes (max %d)", ErrInvalid, len(b), MaxNoteBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag(KindNote, 0)
	s.uv(uint64(len(b)))
	s.buf = append(s.buf, b...)
	s.emit()
	return nil
}
