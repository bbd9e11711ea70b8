package tinode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// History is a range of a topic's messages in ascending seq order.
type History struct {
	Since, Before int64 // the range read: seqs in [Since, Before)
	Messages      []Data
	Pages         int // {get what="data"} requests it took
}

// History reads the messages of topic with Since <= seq < before, as this
// user sees them (messages deleted for the user, soft or hard, are absent;
// DelLog says which). before == 0 means up to the topic's latest seq
// (read with Desc first). since < 1 means 1.
//
// The server answers each {get what="data"} newest first, at most its own
// per-page cap (which may be lower than the limit asked for); History asks
// again below the oldest seq of each page until a page comes back empty or
// reaches since, then returns the pages reassembled in ascending order. A
// page that is out of order, out of its range or longer than asked is
// ErrProtocol. {data} frames of the topic that arrive while a page is read
// and lie in its range are taken as part of it (the protocol gives history
// frames no request id); the rest go to Pushes. For the same reason a page
// given up on (timeout, cancelled context) holds back the next page of the
// session until its late answer is in, at most Config.RequestTimeout.
func (s *Session) History(ctx context.Context, topic string, since, before int64) (History, error) {
	since = max(since, 1)
	if before == 0 {
		d, err := s.Desc(ctx, topic)
		if err != nil {
			return History{}, err
		}
		before = d.Seq + 1
	}
	h := History{Since: since, Before: before}
	if before <= since {
		return h, nil
	}
	var pages [][]Data
	total := 0
	for cur := before; cur > since; {
		page, err := s.historyPage(ctx, topic, since, cur)
		h.Pages++
		if err != nil {
			return History{}, err
		}
		if len(page) == 0 {
			break
		}
		total += len(page)
		if total > s.cfg.MaxHistory {
			return History{}, fmt.Errorf("%w: history %s [%d,%d): more than %d messages (Config.MaxHistory)",
				ErrTruncated, topic, since, before, s.cfg.MaxHistory)
		}
		pages = append(pages, page)
		cur = page[len(page)-1].Seq
	}
	h.Messages = make([]Data, 0, total)
	for _, p := range slices.Backward(pages) {
		for _, d := range slices.Backward(p) {
			h.Messages = append(h.Messages, d)
		}
	}
	return h, nil
}

// historyPage reads one {get what="data"} page of [since, before), newest
// first as the server sends it.
func (s *Session) historyPage(ctx context.Context, topic string, since, before int64) ([]Data, error) {
	select { // one page in flight per session: the frames carry no request id
	case s.histSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: get data %s: %w", ErrNotSent, topic, ctx.Err())
	case <-s.done:
		return nil, fmt.Errorf("%w: get data %s", ErrClosed, topic)
	}
	defer func() { <-s.histSem }()
	if err := s.waitStale(ctx, topic); err != nil {
		return nil, err
	}
	id := s.newID()
	limit := s.cfg.PageLimit
	coll := &collector{id: id, topic: topic, since: since, before: before, limit: limit, answered: make(chan struct{})}
	f := &clientFrame{Get: &getMsg{ID: id, Topic: topic, What: "data",
		Data: &getRange{Since: since, Before: before, Limit: limit}}}
	a, err := s.roundTrip(ctx, "get", topic, id, f, wantDataCtrl, coll)
	if err != nil {
		return nil, err
	}
	if a.bad != nil {
		return nil, a.bad
	}
	switch a.ctrl.Code {
	case CodeNoContent:
		if len(a.data) != 0 {
			return nil, protocolf("get data %s: %d messages then 204", topic, len(a.data))
		}
		return nil, nil
	case CodeDelivered, CodeOK:
	default:
		return nil, protocolf("get data %s: answer %d %q", topic, a.ctrl.Code, a.ctrl.Text)
	}
	var p struct {
		Count *int `json:"count"`
	}
	if err := decodeParams(a.ctrl, &p); err != nil {
		return nil, err
	}
	if p.Count != nil && *p.Count != len(a.data) {
		return nil, protocolf("get data %s [%d,%d): answer counts %d messages, %d arrived",
			topic, since, before, *p.Count, len(a.data))
	}
	return a.data, nil
}

// waitStale waits until the answer of a page given up earlier has come
// (its frames carry no request id, so no page may be asked before), at
// most Config.RequestTimeout.
func (s *Session) waitStale(ctx context.Context, topic string) error {
	s.mu.Lock()
	st := s.stale
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	t := time.NewTimer(s.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-st.answered:
		return nil
	case <-s.done:
		return fmt.Errorf("%w: get data %s", ErrClosed, topic)
	case <-ctx.Done():
		return fmt.Errorf("%w: get data %s: %w", ErrNotSent, topic, ctx.Err())
	case <-t.C:
		return fmt.Errorf("%w: get data %s: the page asked with id %s was never answered; Reconnect",
			ErrNotSent, topic, st.id)
	}
}

// DelLog is the delete history of a topic as this user sees it: ranges
// deleted for everyone (hard) or for this user (soft).
type DelLog struct {
	// Clear is the latest delete transaction id seen (0: none).
	Clear int64
	// Ranges are the deleted seqs, sorted, coalesced, each with an explicit
	// Hi (exclusive).
	Ranges []SeqRange
}

// Deleted reports whether seq lies in one of l's ranges.
func (l DelLog) Deleted(seq int64) bool {
	_, found := slices.BinarySearchFunc(l.Ranges, seq, func(r SeqRange, seq int64) int {
		switch {
		case r.End() <= seq:
			return -1
		case r.Low > seq:
			return 1
		}
		return 0
	})
	return found
}

// DelLog reads every delete range of topic ({get what="del"}), in pages by
// delete transaction id. The server orders the log by transaction id and
// cuts a page after Config.MaxResults ranges, possibly inside a
// transaction; a full page is therefore followed by a page that starts at
// its last transaction again. A transaction with Config.MaxResults ranges
// or more cannot be read completely: ErrTruncated.
func (s *Session) DelLog(ctx context.Context, topic string) (DelLog, error) {
	limit := s.cfg.MaxResults
	var log DelLog
	var all []SeqRange
	for since := int64(1); ; {
		id := s.newID()
		a, err := s.roundTrip(ctx, "get", topic, id, &clientFrame{Get: &getMsg{ID: id, Topic: topic, What: "del",
			Del: &getRange{Since: since, Limit: limit}}}, wantMeta, nil)
		if err != nil {
			return DelLog{}, err
		}
		if a.meta == nil {
			if a.ctrl != nil && a.ctrl.Code == CodeNoContent {
				break
			}
			return DelLog{}, protocolf("get del %s: answer %d without a log", topic, a.ctrl.Code)
		}
		d := a.meta.Del
		if d == nil {
			return DelLog{}, protocolf("get del %s: meta without del", topic)
		}
		if d.Clear < since {
			return DelLog{}, protocolf("get del %s since %d: clear %d", topic, since, d.Clear)
		}
		for _, r := range d.DelSeq {
			if !r.valid() {
				return DelLog{}, protocolf("get del %s: bad range %+v", topic, r)
			}
			all = append(all, SeqRange{Low: r.Low, Hi: r.End()})
		}
		log.Clear = max(log.Clear, d.Clear)
		if len(d.DelSeq) < limit {
			break
		}
		if d.Clear == since {
			return DelLog{}, fmt.Errorf("%w: get del %s: transaction %d has %d ranges or more (Config.MaxResults)",
				ErrTruncated, topic, since, limit)
		}
		since = d.Clear
	}
	log.Ranges = coalesce(all)
	return log, nil
}

// coalesce sorts ranges and merges overlapping or adjacent ones.
func coalesce(rs []SeqRange) []SeqRange {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b SeqRange) int {
		return cmp.Or(cmp.Compare(a.Low, b.Low), cmp.Compare(a.Hi, b.Hi))
	})
	out := []SeqRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.Low <= last.Hi {
			last.Hi = max(last.Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// Reconnect replaces an ended (or still open) session with a new one: it
// closes s, dials with the same Config, logs in as s's user (its last
// token; basic credentials if the token is refused and s knew them) and
// attaches the topics s was attached to. A Tinode session does not survive
// its connection: requests in flight on s ended with unknown outcomes.
func (s *Session) Reconnect(ctx context.Context) (*Session, error) {
	s.Close()
	s.mu.Lock()
	auth := s.auth
	s.mu.Unlock()
	topics := s.Attached()
	n, err := Dial(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	if err := n.relogin(ctx, auth); err != nil {
		n.Close()
		return nil, fmt.Errorf("tinode: reconnect: login: %w", err)
	}
	n.mu.Lock()
	if n.auth.login == "" {
		n.auth.login, n.auth.password = auth.login, auth.password
	}
	n.mu.Unlock()
	for _, t := range topics {
		if _, err := n.Subscribe(ctx, t); err != nil {
			n.Close()
			return nil, fmt.Errorf("tinode: reconnect: attach %s: %w", t, err)
		}
	}
	return n, nil
}

func (s *Session) relogin(ctx context.Context, a authState) error {
	switch {
	case a.token != "":
		_, err := s.LoginToken(ctx, a.token)
		if err == nil || a.login == "" || !errors.Is(err, ErrRejected) {
			return err
		}
		_, err = s.LoginBasic(ctx, a.login, a.password)
		return err
	case a.login != "":
		_, err := s.LoginBasic(ctx, a.login, a.password)
		return err
	}
	return nil
}
