package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"imlab/targets/tinode"
)

// This file holds the client mix's actions as Tinode has them, each made
// on one of the user's sending sessions (attached to the topic):
//
//   - a conversation pull: {get what="data" since=N}, the messages above
//     the conv_seq cursor N (Tinode has no inbox: the cursor is the
//     topic's seq);
//   - a history page: {get what="data"} of a conv_seq range, newest first,
//     reassembled ascending; messages deleted for the user are absent;
//   - revoke: {del what="msg" hard=true} by the sender, gone for everyone;
//   - delete for the user: {del what="msg"} soft, gone for that user only;
//   - clear: a soft delete of every conv_seq up to the topic's seq;
//   - read: {note what="read" seq=N}, the user's read mark of the topic.

// convTopic is conversation conv as user index ui names it: the peer's
// user id of a p2p topic, a group's topic name; an error when the user is
// no party to it.
func (d *Driver) convTopic(ui int, conv uint64) (Topic, error) {
	if d.isGroupConv(conv) {
		gi := int(conv - 1)
		if !slices.Contains(d.userGroups[ui], gi) {
			return Topic{}, fmt.Errorf("%w: uid %d is not a member of conv %d (group %d)", ErrInvalid, d.pop.Users[ui], conv, d.pop.Groups[gi].ID)
		}
		return Topic{Name: d.groups[gi].name, Conv: conv}, nil
	}
	n := uint64(len(d.pop.Users))
	base := 1 + uint64(len(d.pop.Groups))
	if conv < base {
		return Topic{}, fmt.Errorf("%w: conv %d is no conversation of the population", ErrInvalid, conv)
	}
	lo, hi := (conv-base)/n, (conv-base)%n
	if lo >= hi || hi >= n {
		return Topic{}, fmt.Errorf("%w: conv %d is no conversation of the population", ErrInvalid, conv)
	}
	peer := int(lo)
	switch ui {
	case int(lo):
		peer = int(hi)
	case int(hi):
	default:
		return Topic{}, fmt.Errorf("%w: uid %d is no party to conv %d", ErrInvalid, d.pop.Users[ui], conv)
	}
	return Topic{Name: d.tid[peer], Conv: conv}, nil
}

// Act is one action's caller: lab uid From on its sending session Slot, in
// conversation Conv.
type Act struct {
	From uint64
	Slot int
	Conv uint64
}

// actSession is the sending session of a's user attached to a's topic.
func (d *Driver) actSession(ctx context.Context, a Act) (*tinode.Session, Topic, error) {
	ui, ok := d.byUID[a.From]
	if !ok {
		return nil, Topic{}, fmt.Errorf("%w: uid %d is not in the population", ErrInvalid, a.From)
	}
	t, err := d.convTopic(ui, a.Conv)
	if err != nil {
		return nil, Topic{}, err
	}
	s, err := d.senderFor(ctx, ui, a.Slot, t.Name)
	if err != nil {
		return nil, Topic{}, err
	}
	return s, t, nil
}

// Page is a conversation's messages as the user sees them, ascending.
type Page struct {
	Msgs []Msg
	// Head is the topic's seq when the page was asked for (0: not read).
	Head uint64
	// More: the range read ended below Head (a pull's limit cut it).
	More bool
}

// History reads conv_seqs from..to of a's conversation as its user sees
// them.
func (d *Driver) History(ctx context.Context, a Act, from, to uint64) (Page, error) {
	if from < 1 || to < from || to > MaxSeq {
		return Page{}, fmt.Errorf("%w: history of conv %d [%d..%d]", ErrInvalid, a.Conv, from, to)
	}
	s, t, err := d.actSession(ctx, a)
	if err != nil {
		return Page{}, err
	}
	h, err := s.History(ctx, t.Name, int64(from), int64(to)+1)
	if err != nil {
		return Page{}, err
	}
	return d.page(t, h, 0)
}

// Since reads at most limit messages of a's conversation above conv_seq
// cursor, and the topic's seq (Head), read first.
func (d *Driver) Since(ctx context.Context, a Act, cursor uint64, limit int) (Page, error) {
	if limit < 1 || cursor > MaxSeq {
		return Page{}, fmt.Errorf("%w: pull of conv %d above %d, limit %d", ErrInvalid, a.Conv, cursor, limit)
	}
	s, t, err := d.actSession(ctx, a)
	if err != nil {
		return Page{}, err
	}
	desc, err := s.Desc(ctx, t.Name)
	if err != nil {
		return Page{}, err
	}
	before := min(desc.Seq+1, int64(cursor)+1+int64(limit))
	h, err := s.History(ctx, t.Name, int64(cursor)+1, before)
	if err != nil {
		return Page{}, err
	}
	p, err := d.page(t, h, max(desc.Seq, 0))
	p.More = before <= desc.Seq
	return p, err
}

func (d *Driver) page(t Topic, h tinode.History, head int64) (Page, error) {
	p := Page{Head: uint64(head)}
	for _, m := range h.Messages {
		if err := checkSeq(t.Name, m.Seq); err != nil {
			return Page{}, err
		}
		p.Msgs = append(p.Msgs, d.msgOf(t.Conv, m))
	}
	return p, nil
}

// DeleteMsg deletes conv_seq seq of a's conversation: hard (for everyone,
// the sender's revoke) or soft (for a's user only).
func (d *Driver) DeleteMsg(ctx context.Context, a Act, seq uint64, hard bool) error {
	if seq < 1 || seq > MaxSeq {
		return fmt.Errorf("%w: delete conv %d conv_seq %d", ErrInvalid, a.Conv, seq)
	}
	s, t, err := d.actSession(ctx, a)
	if err != nil {
		return err
	}
	if hard {
		// Tinode applies a hard delete of a user without the D permission
		// as a soft one for that user and answers it as a success: the
		// driver asks only a user that holds it, and refuses otherwise.
		desc, err := s.Desc(ctx, t.Name)
		if err != nil {
			return err
		}
		if !strings.ContainsRune(desc.Mode, 'D') {
			return &SendError{Conv: a.Conv, Status: 403, Err: fmt.Errorf("%w: revoke in conv %d: uid %d's access mode %q on topic %s has no D (Tinode would delete for the user only)",
				ErrNoDelete, a.Conv, a.From, desc.Mode, t.Name)}
		}
	}
	_, err = s.DeleteMessages(ctx, t.Name, []tinode.SeqRange{{Low: int64(seq)}}, hard)
	return err
}

// ErrNoDelete is a revoke the driver refused: the user cannot delete for
// everyone on the topic.
var ErrNoDelete = errors.New("tinode driver: no permission to delete for everyone")

// Clear soft-deletes, for a's user, every conv_seq up to the topic's seq
// and answers that seq: the user's history then shows only conv_seqs above
// it. A topic with no message yet is cleared up to 0 (nothing deleted).
func (d *Driver) Clear(ctx context.Context, a Act) (uint64, error) {
	s, t, err := d.actSession(ctx, a)
	if err != nil {
		return 0, err
	}
	desc, err := s.Desc(ctx, t.Name)
	if err != nil {
		return 0, err
	}
	if desc.Seq < 1 {
		return 0, nil
	}
	if _, err := s.DeleteMessages(ctx, t.Name, []tinode.SeqRange{{Low: 1, Hi: desc.Seq + 1}}, false); err != nil {
		return 0, err
	}
	return uint64(desc.Seq), nil
}

// MarkRead sets a's user's read mark of the topic to seq ({note} is
// answered by nothing: a mark the server dropped shows only in the
// members' marks the witness reads).
func (d *Driver) MarkRead(ctx context.Context, a Act, seq uint64) error {
	if seq < 1 || seq > MaxSeq {
		return fmt.Errorf("%w: read mark of conv %d at %d", ErrInvalid, a.Conv, seq)
	}
	s, t, err := d.actSession(ctx, a)
	if err != nil {
		return err
	}
	return s.Note(ctx, t.Name, tinode.NoteRead, int64(seq))
}
