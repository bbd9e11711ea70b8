package tinodefake

import (
	"maps"
	"slices"
	"strings"
)

func (s *Server) onGet(ss *session, f *inFrame) {
	g := f.Get
	t := s.resolve(ss.user.id, g.Topic)
	if t == nil || t.members[ss.user.id] == nil {
		ss.sendLocked(ctrl(g.ID, g.Topic, 404, "not found", nil))
		return
	}
	for _, what := range strings.Fields(g.What) {
		switch what {
		case "desc":
			s.getDesc(ss, t, g.ID, g.Topic)
		case "sub":
			s.getSub(ss, t, g.ID, g.Topic)
		case "data", "del":
			if !ss.attached[t.id] {
				ss.sendLocked(ctrl(g.ID, g.Topic, 403, "permission denied", nil))
				continue
			}
			var since, before int64
			limit := DefaultPageLimit
			q := g.Data
			if what == "del" {
				q = g.Del
			}
			if q != nil {
				since, before = q.Since, q.Before
				if q.Limit > 0 {
					limit = q.Limit
				}
			}
			if what == "data" {
				s.getData(ss, t, g.ID, g.Topic, since, before, min(limit, s.cfg.MaxMessageResults))
			} else {
				s.getDel(ss, t, g.ID, g.Topic, since, before, min(limit, s.cfg.MaxResults))
			}
		}
	}
}

func (s *Server) getDesc(ss *session, t *topic, id, name string) {
	m := t.members[ss.user.id]
	d := &descOut{Created: t.created, Acs: acs{m.mode, m.mode, m.mode}, Seq: t.seq, Read: m.read, Recv: m.recv}
	for _, r := range t.dels {
		if r.forUser == "" || r.forUser == ss.user.id {
			d.Clear = max(d.Clear, r.id)
		}
	}
	ss.sendLocked(metaFrame{metaOut{ID: id, Topic: name, TS: now(), Desc: d}})
}

func (s *Server) getSub(ss *session, t *topic, id, name string) {
	var subs []subOut
	for _, uid := range slices.Sorted(maps.Keys(t.members)) {
		m := t.members[uid]
		subs = append(subs, subOut{User: uid, Acs: acs{m.mode, m.mode, m.mode}, Read: m.read, Recv: m.recv})
	}
	ss.sendLocked(metaFrame{metaOut{ID: id, Topic: name, TS: now(), Sub: subs}})
}

// visible reports whether uid sees message seq of t.
func (t *topic) visible(uid string, seq int64) bool {
	m := t.msgs[seq]
	if m == nil || m.hard {
		return false
	}
	for _, r := range t.dels {
		if r.forUser == uid && seq >= r.r.Low && seq < r.r.end() {
			return false
		}
	}
	return true
}

// getData answers newest first: the limit newest visible messages with
// since <= seq < before, then 208 with their count, or 204 if none.
func (s *Server) getData(ss *session, t *topic, id, name string, since, before int64, limit int) {
	since = max(since, 1)
	if before <= 0 || before > t.seq+1 {
		before = t.seq + 1
	}
	n := 0
	for seq := before - 1; seq >= since && n < limit; seq-- {
		if !t.visible(ss.user.id, seq) {
			continue
		}
		m := t.msgs[seq]
		ss.sendLocked(dataFrame{dataOut{Topic: name, From: m.from, TS: m.ts, Seq: m.seq, Head: m.head, Content: m.content}})
		n++
	}
	if n == 0 {
		ss.sendLocked(ctrl(id, name, 204, "no content", map[string]string{"what": "data"}))
		return
	}
	ss.sendLocked(ctrl(id, name, 208, "delivered", map[string]any{"what": "data", "count": n}))
}

// getDel answers the delete-log rows this user sees with since <= id <
// before in id order, at most limit rows (a transaction may be cut), with
// clear = the highest id among them; 204 if none.
func (s *Server) getDel(ss *session, t *topic, id, name string, since, before int64, limit int) {
	out := &delLogOut{}
	for _, r := range t.dels { // appended in id order
		if len(out.DelSeq) == limit {
			break
		}
		if r.dropped || r.id < since || (before > 0 && r.id >= before) || (r.forUser != "" && r.forUser != ss.user.id) {
			continue
		}
		out.DelSeq = append(out.DelSeq, r.r)
		out.Clear = r.id
	}
	if len(out.DelSeq) == 0 {
		ss.sendLocked(ctrl(id, name, 204, "no content", map[string]string{"what": "del"}))
		return
	}
	ss.sendLocked(metaFrame{metaOut{ID: id, Topic: name, TS: now(), Del: out}})
}
