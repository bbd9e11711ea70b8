package checker

import (
	"maps"
	"slices"
	"time"

	"imlab/checker/conv"
	"imlab/ledger"
)

// This file hands the conversation model (package conv) what the inbox
// steps know of the messages, and answers what it asks back (conv.Ledger:
// HistoryMsg, PulledMsg here; ConvOf, Inbox, Retained in convpull.go;
// Sends, Unknown in target.go).

// buildConversations runs the conversation steps of the model, after the
// inbox steps: each ACKed message at its conv_seq (by msg_id), then each
// recovered message where its copies put it, then the rest of the
// conversation model's steps (conv.Model.Build: the effects, the delete
// ranges, the history witness, the history pages); on a target with an
// inbox, the conversation pulls (their entries into the inbox logs).
func (m *model) buildConversations() {
	ev := m.ev
	m.cv = conv.NewModel(&ev.cv, ev.target, ev.devUID, m)
	for _, msg := range slices.Sorted(maps.Keys(ev.acks)) {
		a := ev.acks[msg]
		m.cv.Ack(conv.Placed{Msg: msg, Conv: a.conv, ConvSeq: a.convSeq, Sender: ev.devUID[a.dev], Tag: a.tick, AckEnd: a.ended})
	}
	for _, msg := range slices.Sorted(maps.Keys(m.recConv)) {
		at, tick := m.recConv[msg], m.recovered[msg]
		m.cv.Recovered(conv.Placed{Msg: msg, Conv: at.conv, ConvSeq: at.convSeq, Sender: ev.devUID[ev.unknown[tick].dev], Tag: tick})
	}
	m.cv.Build()
	for i := range ev.cv.Pulls {
		if ev.target.Inbox { // else the conversation model took them
			m.convPull(&ev.cv.Pulls[i])
		}
	}
}

// convPull takes a conversation pull's answer on a target with an inbox:
// each entry is an observation of the device's uid's inbox, read from the
// store at the page's end.
func (m *model) convPull(p *ledger.ConvPull) {
	if p.Outcome != ledger.OK {
		return
	}
	uid := m.ev.devUID[p.Dev]
	const src = "conv-pull of device"
	for _, it := range p.Items {
		m.observe(uid, it.Seq, it.MsgID, p.ConvID, p.Ended, src, uint64(p.Dev))
		m.matchAck(it.MsgID, p.ConvID, it.ConvSeq, src, uint64(p.Dev))
		switch x := m.explain(it.MsgID, 0); {
		case x.by == byNothing:
			m.unexpected = append(m.unexpected, unexplained{msg: it.MsgID, why: x.why, src: src, id: uint64(p.Dev), seq: it.Seq})
		case !slices.Contains(x.rcpt, uid):
			m.unexpected = append(m.unexpected, unexplained{msg: it.MsgID, why: whyNotRecipient, src: src, id: uint64(p.Dev), rcpt: x.rcpt, other: uid})
		}
	}
}

// HistoryMsg keeps a message the history holds that the ledger cannot
// account for (or that a refused or retried send explains).
func (m *model) HistoryMsg(msg, tag, conv uint64, src string, id uint64) {
	x := m.explain(msg, tag)
	m.stray(x, msg, seenAt{src: src, id: id, conv: conv})
	if x.by == byNothing {
		m.unexpected = append(m.unexpected, unexplained{msg: msg, tick: tag, other: x.other, why: x.why, src: src, id: id, conv: conv})
	}
}

// PulledMsg keeps an entry of a conversation pull on a target without an
// inbox (its cursor and entries are conv_seqs) that disagrees with its
// ACK, that no send explains, or of a conversation uid is no party to.
func (m *model) PulledMsg(msg, conv, convSeq, uid uint64, src string, dev uint32) {
	m.matchAck(msg, conv, convSeq, src, uint64(dev))
	switch x := m.explain(msg, 0); {
	case x.by == byNothing:
		m.unexpected = append(m.unexpected, unexplained{msg: msg, why: x.why, src: src, id: uint64(dev), conv: conv})
	case !slices.Contains(x.rcpt, uid):
		m.unexpected = append(m.unexpected, unexplained{msg: msg, why: whyNotRecipient, src: src, id: uint64(dev), rcpt: x.rcpt, other: uid, conv: conv})
	}
}

// readBy is when the read that should have carried conv_seq seq of
// conversation conv to device dev had happened (on a target with a delete
// log, package conv's readpast.go): the device's first copy of a later
// conv_seq of the conversation, or, when there is none, the end of the
// run's drain (conv.Model.DrainEnd).
func (m *model) readBy(dev uint32, conv, seq uint64) time.Duration {
	if p := m.devs[dev].passes[conv]; p != nil {
		if at, ok := p.FirstAbove(seq); ok {
			return at
		}
	}
	return m.cv.DrainEnd()
}
