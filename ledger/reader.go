package ledger

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// ShardInfo describes one shard file after reading.
type ShardInfo struct {
	Path      string
	Header    Header
	Records   uint64
	Bytes     int64
	Closed    bool // the end record was found and its count matched
	Truncated bool // the file ended inside a record or without an end record
}

// maxHeaderLen bounds a shard header.
const maxHeaderLen = 1 << 16

// Files lists the shard files of a run directory in order.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "ledger-*.bin"))
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	sort.Strings(files)
	return files, nil
}

// ReadDir decodes every shard of dir in turn and calls fn for each record
// (the Record is reused between calls; copy what you keep). A shard cut
// short is read up to its last whole record and reported Truncated; a
// record that cannot be decoded is ErrCorrupt.
func ReadDir(dir string, fn func(shard int, r *Record) error) ([]ShardInfo, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no ledger-*.bin in %s", ErrInvalid, dir)
	}
	infos := make([]ShardInfo, 0, len(files))
	for i, p := range files {
		info, err := ReadFile(p, func(r *Record) error { return fn(i, r) })
		infos = append(infos, info)
		if err != nil {
			return infos, err
		}
	}
	return infos, nil
}

// ReadFile decodes one shard file.
func ReadFile(path string, fn func(r *Record) error) (ShardInfo, error) {
	info := ShardInfo{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return info, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		info.Bytes = fi.Size()
	}
	d := &decoder{r: bufio.NewReaderSize(f, 256<<10), st: newState()}
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(d.r, magic); err != nil || string(magic) != Magic {
		return info, fmt.Errorf("%w: %s: bad magic", ErrCorrupt, path)
	}
	hl, err := binary.ReadUvarint(d.r)
	if err != nil || hl > maxHeaderLen {
		return info, fmt.Errorf("%w: %s: bad header length", ErrCorrupt, path)
	}
	hb := make([]byte, hl)
	if _, err := io.ReadFull(d.r, hb); err != nil {
		return info, fmt.Errorf("%w: %s: short header", ErrCorrupt, path)
	}
	if err := json.Unmarshal(hb, &info.Header); err != nil {
		return info, fmt.Errorf("%w: %s: header: %v", ErrCorrupt, path, err)
	}
	if info.Header.Version == 0 {
		info.Header.Version = 1
	}
	if info.Header.Version > Version {
		return info, fmt.Errorf("%w: %s: format version %d is newer than this reader's %d", ErrCorrupt, path, info.Header.Version, Version)
	}
	var rec Record
	for {
		err := d.next(&rec)
		if errors.Is(err, io.EOF) {
			info.Truncated = true // no end record
			return info, nil
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			info.Truncated = true
			return info, nil
		}
		if err != nil {
			return info, fmt.Errorf("%w: %s: record %d: %v", ErrCorrupt, path, info.Records, err)
		}
		if rec.Kind == KindEnd {
			info.Closed = rec.Count == info.Records
			if !info.Closed {
				return info, fmt.Errorf("%w: %s: end record counts %d, read %d", ErrCorrupt, path, rec.Count, info.Records)
			}
			return info, nil
		}
		info.Records++
		if rec.Kind == kindExt {
			continue // an extended kind this reader does not know
		}
		if err := fn(&rec); err != nil {
			return info, err
		}
	}
}

type decoder struct {
	r     *bufio.Reader
	st    state
	convs []uint64
}

func (d *decoder) uv() (uint64, error) {
	v, err := binary.ReadUvarint(d.r)
	if errors.Is(err, io.EOF) {
		return 0, io.ErrUnexpectedEOF // inside a record
	}
	return v, err
}

func (d *decoder) sv() (int64, error) {
	u, err := d.uv()
	return unzz(u), err
}

func (d *decoder) conv(ix uint64) (uint64, error) {
	if ix >= uint64(len(d.convs)) {
		return 0, fmt.Errorf("conv index %d undefined", ix)
	}
	return d.convs[ix], nil
}

// next decodes one record into r. io.EOF means a clean end between records.
func (d *decoder) next(r *Record) error {
	for {
		tag, err := d.r.ReadByte()
		if err != nil {
			return err // io.EOF between records
		}
		k, sub := Kind(tag&0x0f), tag>>4
		if k == kindConv {
			id, err := d.uv()
			if err != nil {
				return err
			}
			d.convs = append(d.convs, id)
			continue
		}
		*r = Record{Kind: k}
		var e errs
		if err := d.record(r, k, sub, &e); err != nil {
			return err
		}
		return e.err
	}
}

// record decodes the fields of a record of kind k and sub-kind sub. An
// error is a malformed record; a short one is in e.
func (d *decoder) record(r *Record, k Kind, sub uint8, e *errs) error {
	switch k {
	case KindDevice:
		return d.device(r, sub, e)
	case KindGroup:
		return d.group(r, e)
	case KindAttempt:
		d.attempt(&r.Attempt, sub, e)
	case KindDelivery:
		d.delivery(&r.Delivery, sub, e)
	case KindCursor:
		c := &r.Cursor
		c.Status, c.Dev, c.Seq = CursorStatus(sub), uint32(e.u(d)), e.u(d)
		c.At = d.micro(e)
	case KindWitness, KindStored:
		w := &r.Witness
		w.UID, w.Seq, w.MsgID, w.ConvID, w.ConvSeq = e.u(d), e.u(d), d.msgID(e), e.c(d), e.u(d)
		if sub >= 1 || k == KindStored {
			w.Tick = e.u(d)
		}
	case KindProbe:
		p := &r.Probe
		p.Status, p.Tick, p.MsgID, p.UID = ProbeStatus(sub), e.u(d), d.msgID(e), e.u(d)
		p.Found, p.HTTP = uint8(e.u(d)), uint16(e.u(d))
		p.At = d.micro(e)
	case KindNote:
		return d.note(r, e)
	case KindAction:
		return d.action(r, Action(sub), e)
	case KindHistory:
		return d.history(r, HistoryPart(sub), e)
	case KindRetention:
		d.retention(r, sub, e)
	case kindExt:
		skip, err := d.ext(r, e)
		if err != nil {
			return err
		}
		if skip {
			r.Kind = kindExt // counted, not passed on
		}
	case KindEnd:
		r.Count = e.u(d)
	default:
		return fmt.Errorf("unknown record kind %d", k)
	}
	return nil
}

func (d *decoder) device(r *Record, sub uint8, e *errs) error {
	r.Device.Kind = DeviceKind(sub)
	r.Device.Dev = uint32(e.u(d))
	r.Device.UID = e.u(d)
	n := e.u(d)
	if e.err != nil {
		return nil
	}
	if n > maxDIDLen {
		return fmt.Errorf("device id length %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return io.ErrUnexpectedEOF
	}
	r.Device.DID = string(b)
	return nil
}

func (d *decoder) group(r *Record, e *errs) error {
	r.Group.GroupID = e.u(d)
	n := e.u(d)
	if e.err == nil && n > MaxGroupMembers {
		return fmt.Errorf("group of %d members", n)
	}
	for i := uint64(0); i < n && e.err == nil; i++ {
		r.Group.Members = append(r.Group.Members, e.u(d))
	}
	return nil
}

func (d *decoder) attempt(a *Attempt, sub uint8, e *errs) {
	a.Outcome = Outcome(sub & 3)
	a.TriedUnknown = sub&attemptTriedUnknown != 0
	d.st.prevTick += uint64(e.s(d))
	a.Tick = d.st.prevTick
	a.Dev, a.ConvType, a.Target = uint32(e.u(d)), uint8(e.u(d)), e.u(d)
	d.st.prevIntended += e.s(d)
	a.Intended = time.Duration(d.st.prevIntended)
	a.Started = a.Intended + time.Duration(e.s(d))
	a.Ended = a.Started + time.Duration(e.s(d))
	a.Tries = uint8(e.u(d))
	if a.Outcome != OK {
		a.Status = uint16(e.u(d))
		if sub&attemptConv != 0 {
			a.ConvID = e.c(d)
		}
		return
	}
	a.Status = 200
	a.MsgID, a.ConvID, a.ConvSeq = d.msgID(e), e.c(d), e.u(d)
}

func (d *decoder) delivery(v *Delivery, sub uint8, e *errs) {
	v.Via = Via(sub)
	v.Dev = uint32(e.u(d))
	v.Seq = d.st.devSeq[v.Dev] + uint64(e.s(d))
	d.st.devSeq[v.Dev] = v.Seq
	v.MsgID, v.ConvID, v.ConvSeq = d.msgID(e), e.c(d), e.u(d)
	d.st.prevDTick += uint64(e.s(d))
	v.Tick = d.st.prevDTick
	v.At = d.micro(e)
}

func (d *decoder) note(r *Record, e *errs) error {
	n := e.u(d)
	if e.err != nil {
		return nil
	}
	if n > MaxNoteBytes {
		return fmt.Errorf("note of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return io.ErrUnexpectedEOF
	}
	if err := json.Unmarshal(b, &r.Note); err != nil {
		return fmt.Errorf("note: %v", err)
	}
	return nil
}

// act decodes the fields every action has.
func (d *decoder) act(x *Act, e *errs) {
	x.Outcome = Outcome(e.u(d))
	x.Dev = uint32(e.u(d))
	x.ConvID = e.c(d)
	d.st.prevActIntended += e.s(d)
	x.Intended = time.Duration(d.st.prevActIntended)
	x.Started = x.Intended + time.Duration(e.s(d))
	x.Ended = x.Started + time.Duration(e.s(d))
	x.Status = uint16(e.u(d))
}

// items reads an item count, bounded by MaxPageItems.
func (d *decoder) items(e *errs) (int, error) {
	n := e.u(d)
	if e.err == nil && n > MaxPageItems {
		return 0, fmt.Errorf("page of %d items", n)
	}
	return int(n), nil
}

func (d *decoder) msgID(e *errs) uint64 {
	d.st.prevMsgID += uint64(e.s(d))
	return d.st.prevMsgID
}

func (d *decoder) micro(e *errs) time.Duration {
	d.st.prevAt += e.s(d)
	return time.Duration(d.st.prevAt) * time.Microsecond
}

// action decodes a KindAction record of action a.
func (d *decoder) action(r *Record, a Action, e *errs) error {
	r.Action = a
	switch a {
	case ActConvPull:
		p := &r.ConvPull
		d.act(&p.Act, e)
		p.Cursor, p.Limit = e.u(d), uint32(e.u(d))
		flags := e.u(d)
		p.HasMore, p.SyncRead = flags&pullHasMore != 0, flags&pullSyncRead != 0
		p.NextCursor = e.u(d)
		if p.SyncRead {
			p.SyncBefore, p.SyncAfter = e.u(d), e.u(d)
		}
		n, err := d.items(e)
		if err != nil {
			return err
		}
		for i := 0; i < n && e.err == nil; i++ {
			p.Items = append(p.Items, PulledItem{Seq: e.u(d), MsgID: d.msgID(e), ConvSeq: e.u(d)})
		}
	case ActHistory:
		p := &r.History
		d.act(&p.Act, e)
		p.From, p.To = e.u(d), e.u(d)
		n, err := d.items(e)
		if err != nil {
			return err
		}
		for i := 0; i < n && e.err == nil; i++ {
			it := PageItem{ConvSeq: e.u(d), MsgID: d.msgID(e), Sender: e.u(d), Tag: e.u(d)}
			flags := e.u(d)
			it.Revoked, it.Tombstone, it.Read = flags&itemRevoked != 0, flags&itemTomb != 0, ReadMark(flags>>itemReadBits)
			p.Items = append(p.Items, it)
		}
	case ActRevoke, ActDelete:
		d.act(&r.MsgAction.Act, e)
		r.MsgAction.ConvSeq = e.u(d)
	case ActClear:
		d.act(&r.Clear.Act, e)
		r.Clear.MinSeq = e.u(d)
	case ActRead:
		d.act(&r.Read.Act, e)
		r.Read.From, r.Read.To = e.u(d), e.u(d)
	default:
		return fmt.Errorf("unknown action %d", a)
	}
	return nil
}

// history decodes a KindHistory record.
func (d *decoder) history(r *Record, part HistoryPart, e *errs) error {
	r.HistoryPart = part
	switch part {
	case PartSlot:
		x := &r.Slot
		x.ConvID, x.ConvSeq, x.MsgID, x.Sender, x.Tag = e.c(d), e.u(d), d.msgID(e), e.u(d), e.u(d)
		flags := e.u(d)
		x.Revoked, x.Purged, x.IsRead = flags&slotRevoked != 0, flags&slotPurged != 0, flags&slotRead != 0
		n := e.u(d)
		if e.err == nil && n > MaxDelList {
			return fmt.Errorf("del_list of %d uids", n)
		}
		for i := uint64(0); i < n && e.err == nil; i++ {
			x.DelList = append(x.DelList, e.u(d))
		}
		x.At = d.micro(e)
	case PartWatermark:
		w := &r.Watermark
		w.ConvID, w.UID, w.MinSeq = e.c(d), e.u(d), e.u(d)
		w.At = d.micro(e)
	case PartHead:
		h := &r.Head
		h.ConvID, h.MaxSeq = e.c(d), e.u(d)
		h.At = d.micro(e)
	default:
		return fmt.Errorf("unknown history witness part %d", part)
	}
	return nil
}

// retention decodes a KindRetention record.
func (d *decoder) retention(r *Record, sub uint8, e *errs) {
	if sub == retentionSettings {
		r.IsSettings = true
		x := &r.Settings
		x.MaxAge = time.Duration(e.s(d)) * time.Microsecond
		x.PulledMinAge = time.Duration(e.s(d)) * time.Microsecond
		x.Interval = time.Duration(e.s(d)) * time.Microsecond
		x.At = d.micro(e)
		return
	}
	x := &r.Deletion
	x.Reason = RetentionReason(e.u(d))
	x.UID, x.Seq, x.MsgID = e.u(d), e.u(d), d.msgID(e)
	x.CreatedAt = time.Duration(e.s(d)) * time.Microsecond
	x.DeletedAt = d.micro(e)
}

// maxExtLen bounds an extended record's payload.
const maxExtLen = 1 << 20

// ext decodes an extended record; skip is true for a kind this reader
// does not know (its payload is read past).
func (d *decoder) ext(r *Record, e *errs) (skip bool, err error) {
	k, n := Kind(e.u(d)), e.u(d)
	if e.err != nil {
		return false, e.err
	}
	if n > maxExtLen {
		return false, fmt.Errorf("extended record of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return false, io.ErrUnexpectedEOF
	}
	p := &payload{b: b}
	switch k {
	case KindDelRange:
		r.Kind = KindDelRange
		x := &r.DelRange
		x.ConvID, x.From, x.To, x.UID = p.u(), p.u(), p.u(), p.u()
		x.At = time.Duration(unzz(p.u())) * time.Microsecond
	case KindContact:
		r.contact(p)
	default:
		return true, nil
	}
	if p.err != nil {
		return false, fmt.Errorf("extended record %d: %v", k, p.err)
	}
	return false, nil
}

// payload reads uvarints from an extended record's bytes.
type payload struct {
	b   []byte
	err error
}

func (p *payload) u() uint64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.err = errors.New("short payload")
		return 0
	}
	p.b = p.b[n:]
	return v
}

// errs keeps the first decoding error so field reads stay linear.
type errs struct{ err error }

func (e *errs) u(d *decoder) uint64 {
	if e.err != nil {
		return 0
	}
	v, err := d.uv()
	e.err = err
	return v
}

func (e *errs) s(d *decoder) int64 {
	if e.err != nil {
		return 0
	}
	v, err := d.sv()
	e.err = err
	return v
}

func (e *errs) c(d *decoder) uint64 {
	ix := e.u(d)
	if e.err != nil {
		return 0
	}
	id, err := d.conv(ix)
	e.err = err
	return id
}
