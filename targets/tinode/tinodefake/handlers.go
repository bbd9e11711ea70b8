package tinodefake

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

type user struct {
	id, login, password string
	public              json.RawMessage
}

type member struct {
	mode       string
	read, recv int64
}

type message struct {
	seq     int64
	from    string
	ts      time.Time
	head    map[string]json.RawMessage
	content json.RawMessage
	hard    bool // hard-deleted: content gone for everyone
}

// delRow is one range of the delete log; a transaction (one {del}) may
// write several rows with the same id.
type delRow struct {
	id      int64
	forUser string // "" for everyone (hard), else the user who soft-deleted
	r       rng
	// dropped: applied, but left out of the delete log (DropDelLog).
	dropped bool
}

type rng struct {
	Low int64 `json:"low"`
	Hi  int64 `json:"hi,omitempty"`
}

func (r rng) end() int64 {
	if r.Hi == 0 {
		return r.Low + 1
	}
	return r.Hi
}

type topic struct {
	id      string // grp… for a group, p2p:<a>:<b> for a p2p topic
	group   bool
	owner   string
	a, b    string // p2p: the two users
	created time.Time
	members map[string]*member
	// seq is the in-memory counter the next publish continues from; it is
	// normally the highest stored or consumed seq (see CommitTimeout).
	seq   int64
	msgs  map[int64]*message
	dels  []delRow
	delID int64
}

// name is t's name for user uid.
func (t *topic) name(uid string) string {
	if t.group {
		return t.id
	}
	if uid == t.a {
		return t.b
	}
	return t.a
}

// P2PID is the fake's internal id of the p2p topic between users a and b
// (the name its fault knobs take).
func P2PID(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return "p2p:" + a + ":" + b
}

// Client frames, as the API document describes them.
type inFrame struct {
	Hi *struct {
		ID, Ver, UA, Dev string
	}
	Acc *struct {
		ID, User, Scheme, Secret string
		Login                    bool
		Tags                     []string
		Desc                     *struct{ Public json.RawMessage }
	}
	Login *struct{ ID, Scheme, Secret string }
	Sub   *struct {
		ID, Topic string
	}
	Leave *struct {
		ID, Topic string
		Unsub     bool
	}
	Pub *struct {
		ID, Topic string
		NoEcho    bool
		Head      map[string]json.RawMessage
		Content   json.RawMessage
	}
	Get *struct {
		ID, Topic, What string
		Data, Del       *struct {
			Since, Before int64
			Limit         int
		}
	}
	Set *struct {
		ID, Topic string
		Sub       *struct{ User, Mode string }
	}
	Del *struct {
		ID, Topic, What string
		Hard            bool
		DelSeq          []rng
	}
	Note *struct {
		Topic, What string
		Seq         int64
	}
}

func (f *inFrame) id() string {
	switch {
	case f.Hi != nil:
		return f.Hi.ID
	case f.Acc != nil:
		return f.Acc.ID
	case f.Login != nil:
		return f.Login.ID
	case f.Sub != nil:
		return f.Sub.ID
	case f.Leave != nil:
		return f.Leave.ID
	case f.Pub != nil:
		return f.Pub.ID
	case f.Get != nil:
		return f.Get.ID
	case f.Set != nil:
		return f.Set.ID
	case f.Del != nil:
		return f.Del.ID
	}
	return ""
}

type ctrlOut struct {
	ID     string    `json:"id,omitempty"`
	Topic  string    `json:"topic,omitempty"`
	Params any       `json:"params,omitempty"`
	Code   int       `json:"code"`
	Text   string    `json:"text"`
	TS     time.Time `json:"ts"`
}

type ctrlFrame struct {
	Ctrl ctrlOut `json:"ctrl"`
}

func ctrl(id, topic string, code int, text string, params any) ctrlFrame {
	return ctrlFrame{ctrlOut{ID: id, Topic: topic, Params: params, Code: code, Text: text, TS: now()}}
}

type dataOut struct {
	Topic   string                     `json:"topic"`
	From    string                     `json:"from,omitempty"`
	TS      time.Time                  `json:"ts"`
	Seq     int64                      `json:"seq"`
	Head    map[string]json.RawMessage `json:"head,omitempty"`
	Content json.RawMessage            `json:"content"`
}

type dataFrame struct {
	Data dataOut `json:"data"`
}

type acs struct {
	Want  string `json:"want"`
	Given string `json:"given"`
	Mode  string `json:"mode"`
}

type metaFrame struct {
	Meta metaOut `json:"meta"`
}

type metaOut struct {
	ID    string     `json:"id,omitempty"`
	Topic string     `json:"topic"`
	TS    time.Time  `json:"ts"`
	Desc  *descOut   `json:"desc,omitempty"`
	Sub   []subOut   `json:"sub,omitempty"`
	Del   *delLogOut `json:"del,omitempty"`
}

type descOut struct {
	Created time.Time `json:"created"`
	Acs     acs       `json:"acs"`
	Seq     int64     `json:"seq,omitempty"`
	Read    int64     `json:"read,omitempty"`
	Recv    int64     `json:"recv,omitempty"`
	Clear   int64     `json:"clear,omitempty"`
}

type subOut struct {
	User string `json:"user"`
	Acs  acs    `json:"acs"`
	Read int64  `json:"read,omitempty"`
	Recv int64  `json:"recv,omitempty"`
}

type delLogOut struct {
	Clear  int64 `json:"clear"`
	DelSeq []rng `json:"delseq"`
}

// Access modes given by default.
const (
	modeOwner = "JRWPASDO"
	modeGroup = "JRWPS"
	modeP2P   = "JRWPAD"
)

func (s *Server) handle(ss *session, b []byte) {
	var f inFrame
	err := json.Unmarshal(b, &f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.gone {
		return
	}
	if err != nil {
		ss.sendLocked(ctrl("", "", 400, "malformed", nil))
		return
	}
	id := f.id()
	if f.Hi != nil {
		s.onHi(ss, id, f.Hi.Ver)
		return
	}
	if !ss.hi {
		if f.Note == nil {
			ss.sendLocked(ctrl(id, "", 409, "command out of sequence", nil))
		}
		return
	}
	switch {
	case f.Acc != nil:
		a := f.Acc
		var public json.RawMessage
		if a.Desc != nil {
			public = a.Desc.Public
		}
		s.onAcc(ss, id, a.User, a.Scheme, a.Secret, a.Login, public)
	case f.Login != nil:
		s.onLogin(ss, id, f.Login.Scheme, f.Login.Secret)
	case ss.user == nil:
		if f.Note == nil {
			ss.sendLocked(ctrl(id, topicOf(&f), 401, "authentication required", nil))
		}
	case f.Sub != nil:
		s.onSub(ss, id, f.Sub.Topic)
	case f.Leave != nil:
		s.onLeave(ss, id, f.Leave.Topic, f.Leave.Unsub)
	case f.Pub != nil:
		s.onPub(ss, id, f.Pub.Topic, f.Pub.NoEcho, f.Pub.Head, f.Pub.Content)
	case f.Get != nil:
		s.onGet(ss, &f)
	case f.Set != nil:
		s.onSet(ss, &f)
	case f.Del != nil:
		s.onDel(ss, id, f.Del.Topic, f.Del.What, f.Del.Hard, f.Del.DelSeq)
	case f.Note != nil:
		s.onNote(ss, f.Note.Topic, f.Note.What, f.Note.Seq)
	default:
		ss.sendLocked(ctrl(id, "", 400, "malformed", nil))
	}
}

func topicOf(f *inFrame) string {
	switch {
	case f.Sub != nil:
		return f.Sub.Topic
	case f.Leave != nil:
		return f.Leave.Topic
	case f.Pub != nil:
		return f.Pub.Topic
	case f.Get != nil:
		return f.Get.Topic
	case f.Set != nil:
		return f.Set.Topic
	case f.Del != nil:
		return f.Del.Topic
	}
	return ""
}

func (s *Server) onHi(ss *session, id, ver string) {
	if ver == "" && !ss.hi {
		ss.sendLocked(ctrl(id, "", 400, "malformed", nil))
		return
	}
	ss.hi = true
	ss.sendLocked(ctrl(id, "", 201, "created", map[string]any{"ver": Ver, "build": "imlab-fake",
		"maxMessageSize": MaxMessageSize, "maxSubscriberCount": 128, "maxTagCount": 16}))
}

func decodeBasic(secret string) (login, password string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		return "", "", false
	}
	login, password, ok = strings.Cut(string(raw), ":")
	return login, password, ok && login != "" && password != ""
}

func (s *Server) onAcc(ss *session, id, newUser, scheme, secret string, login bool, public json.RawMessage) {
	if !strings.HasPrefix(newUser, "new") || scheme != "basic" {
		ss.sendLocked(ctrl(id, "", 400, "malformed", nil))
		return
	}
	l, p, ok := decodeBasic(secret)
	if !ok {
		ss.sendLocked(ctrl(id, "", 400, "malformed", nil))
		return
	}
	if login && ss.user != nil {
		ss.sendLocked(ctrl(id, "", 409, "already authenticated", nil))
		return
	}
	if s.logins[l] != nil {
		ss.sendLocked(ctrl(id, "", 409, "duplicate credential", map[string]string{"what": "auth"}))
		return
	}
	u := &user{id: "usr" + randomID(8), login: l, password: p, public: public}
	s.users[u.id], s.logins[l] = u, u
	params := map[string]any{"user": u.id, "desc": map[string]any{"public": public}}
	if login {
		for k, v := range s.issueToken(ss, u) {
			params[k] = v
		}
	}
	ss.sendLocked(ctrl(id, "", 200, "ok", params))
}

func (s *Server) issueToken(ss *session, u *user) map[string]any {
	tok := base64.StdEncoding.EncodeToString([]byte(randomID(24)))
	s.tokens[tok] = u
	ss.user = u
	return map[string]any{"user": u.id, "authlvl": "auth", "token": tok,
		"expires": now().Add(14 * 24 * time.Hour)}
}

func (s *Server) onLogin(ss *session, id, scheme, secret string) {
	if ss.user != nil {
		ss.sendLocked(ctrl(id, "", 409, "already authenticated", nil))
		return
	}
	var u *user
	switch scheme {
	case "basic":
		l, p, ok := decodeBasic(secret)
		if !ok {
			ss.sendLocked(ctrl(id, "", 400, "malformed", nil))
			return
		}
		if cand := s.logins[l]; cand != nil && cand.password == p {
			u = cand
		}
	case "token":
		u = s.tokens[secret]
	default:
		ss.sendLocked(ctrl(id, "", 401, "unknown authentication scheme", nil))
		return
	}
	if u == nil {
		ss.sendLocked(ctrl(id, "", 401, "authentication failed", nil))
		return
	}
	ss.sendLocked(ctrl(id, "", 200, "ok", s.issueToken(ss, u)))
}

// resolve finds the topic uid names name.
func (s *Server) resolve(uid, name string) *topic {
	if strings.HasPrefix(name, "usr") {
		return s.topics[P2PID(uid, name)]
	}
	return s.topics[name]
}

func (s *Server) onSub(ss *session, id, name string) {
	uid := ss.user.id
	switch {
	case strings.HasPrefix(name, "new"):
		t := &topic{id: "grp" + randomID(8), group: true, owner: uid, created: now(),
			members: map[string]*member{uid: {mode: modeOwner}}, msgs: map[int64]*message{}}
		s.topics[t.id] = t
		ss.attached[t.id] = true
		ss.sendLocked(ctrl(id, t.id, 200, "ok", map[string]any{"acs": acs{modeOwner, modeOwner, modeOwner}, "tmpname": name}))
		return
	case strings.HasPrefix(name, "usr"):
		if name == uid {
			ss.sendLocked(ctrl(id, name, 403, "permission denied", nil))
			return
		}
		if s.users[name] == nil {
			ss.sendLocked(ctrl(id, name, 404, "user not found", nil))
			return
		}
		if s.topics[P2PID(uid, name)] == nil {
			// Both users are subscribed when the topic is created; the
			// peer still attaches with its own {sub}.
			a, b, _ := strings.Cut(strings.TrimPrefix(P2PID(uid, name), "p2p:"), ":")
			s.topics[P2PID(uid, name)] = &topic{id: P2PID(uid, name), a: a, b: b, created: now(),
				members: map[string]*member{name: {mode: modeP2P}}, msgs: map[int64]*message{}}
		}
	case strings.HasPrefix(name, "grp"):
		if s.topics[name] == nil {
			ss.sendLocked(ctrl(id, name, 404, "topic not found", nil))
			return
		}
	default:
		ss.sendLocked(ctrl(id, name, 400, "malformed", nil))
		return
	}
	t := s.resolve(uid, name)
	if ss.attached[t.id] {
		ss.sendLocked(ctrl(id, name, 304, "already subscribed", nil))
		return
	}
	var params any
	if t.members[uid] == nil {
		mode := modeGroup
		if !t.group {
			mode = modeP2P
		}
		t.members[uid] = &member{mode: mode}
		params = map[string]any{"acs": acs{mode, mode, mode}}
	}
	ss.attached[t.id] = true
	ss.sendLocked(ctrl(id, name, 200, "ok", params))
}

func (s *Server) onLeave(ss *session, id, name string, unsub bool) {
	t := s.resolve(ss.user.id, name)
	if t == nil || !ss.attached[t.id] {
		ss.sendLocked(ctrl(id, name, 304, "not joined", nil))
		return
	}
	delete(ss.attached, t.id)
	if unsub && t.group && t.owner != ss.user.id {
		delete(t.members, ss.user.id)
		for o := range s.sessions {
			if o.user == ss.user {
				delete(o.attached, t.id)
			}
		}
	}
	ss.sendLocked(ctrl(id, name, 200, "ok", nil))
}

func (s *Server) onSet(ss *session, f *inFrame) {
	m := f.Set
	t := s.resolve(ss.user.id, m.Topic)
	if t == nil {
		ss.sendLocked(ctrl(m.ID, m.Topic, 404, "topic not found", nil))
		return
	}
	if m.Sub == nil || m.Sub.User == "" {
		ss.sendLocked(ctrl(m.ID, m.Topic, 200, "ok", nil))
		return
	}
	me := t.members[ss.user.id]
	if !t.group || me == nil || !strings.ContainsRune(me.mode, 'A') {
		ss.sendLocked(ctrl(m.ID, m.Topic, 403, "permission denied", nil))
		return
	}
	if s.users[m.Sub.User] == nil {
		ss.sendLocked(ctrl(m.ID, m.Topic, 404, "user not found", nil))
		return
	}
	mode := m.Sub.Mode
	if mode == "" {
		mode = modeGroup
	}
	if t.members[m.Sub.User] == nil {
		t.members[m.Sub.User] = &member{}
	}
	t.members[m.Sub.User].mode = mode
	ss.sendLocked(ctrl(m.ID, m.Topic, 200, "ok", map[string]any{"user": m.Sub.User, "acs": acs{mode, mode, mode}}))
}

func (s *Server) onPub(ss *session, id, name string, noEcho bool, head map[string]json.RawMessage, content json.RawMessage) {
	t := s.resolve(ss.user.id, name)
	if t == nil || !ss.attached[t.id] {
		ss.sendLocked(ctrl(id, name, 409, "must attach first", nil))
		return
	}
	if m := t.members[ss.user.id]; m == nil || !strings.ContainsRune(m.mode, 'W') {
		ss.sendLocked(ctrl(id, name, 403, "permission denied", nil))
		return
	}
	if len(content) == 0 || string(content) == "null" {
		ss.sendLocked(ctrl(id, name, 400, "malformed", nil))
		return
	}
	if len(content) > MaxMessageSize {
		ss.sendLocked(ctrl(id, name, 413, "too large", nil))
		return
	}
	msg := &message{seq: t.seq + 1, from: ss.user.id, ts: now(), head: head, content: content}
	if s.pubFault(ss, t, id, name, noEcho, msg) {
		return
	}
	if t.msgs[msg.seq] != nil { // the counter fell behind storage: duplicate key
		ss.sendLocked(ctrl(id, name, 500, "internal error", nil))
		return
	}
	t.seq = msg.seq
	s.store(ss, t, msg, noEcho)
	ss.sendLocked(ctrl(id, name, 202, "accepted", map[string]int64{"seq": msg.seq}))
}

// store saves msg and broadcasts it to every session attached to t
// (except the publisher's with noEcho); the publisher's marks move to it.
func (s *Server) store(from *session, t *topic, msg *message, noEcho bool) {
	t.msgs[msg.seq] = msg
	if m := t.members[msg.from]; m != nil {
		m.read, m.recv = max(m.read, msg.seq), max(m.recv, msg.seq)
	}
	for o := range s.sessions {
		if !o.attached[t.id] || (noEcho && o == from) || o.user == nil {
			continue
		}
		o.sendLocked(dataFrame{dataOut{Topic: t.name(o.user.id), From: msg.from, TS: msg.ts, Seq: msg.seq,
			Head: msg.head, Content: msg.content}})
	}
}

func (s *Server) onDel(ss *session, id, name, what string, hard bool, ranges []rng) {
	t := s.resolve(ss.user.id, name)
	if what != "" && what != "msg" {
		ss.sendLocked(ctrl(id, name, 501, "not implemented", nil))
		return
	}
	if t == nil || !ss.attached[t.id] {
		ss.sendLocked(ctrl(id, name, 409, "must attach first", nil))
		return
	}
	if len(ranges) == 0 {
		ss.sendLocked(ctrl(id, name, 400, "malformed", nil))
		return
	}
	for _, r := range ranges {
		if r.Low < 1 || (r.Hi != 0 && r.Hi <= r.Low) || r.Low > t.seq || r.end() > t.seq+1 {
			ss.sendLocked(ctrl(id, name, 400, "malformed", nil))
			return
		}
	}
	// A hard delete without the D permission is applied as a soft delete
	// for the requester and answered as a success (as the tested server
	// does).
	if m := t.members[ss.user.id]; hard && (m == nil || !strings.ContainsRune(m.mode, 'D')) {
		hard = false
	}
	t.delID++
	forUser := ss.user.id
	if hard {
		forUser = ""
	}
	dropped := s.dropDelFault(t)
	for _, r := range ranges {
		if r.Hi == r.Low+1 {
			r.Hi = 0
		}
		t.dels = append(t.dels, delRow{id: t.delID, forUser: forUser, r: r, dropped: dropped})
		if hard {
			for seq := r.Low; seq < r.end(); seq++ {
				if msg := t.msgs[seq]; msg != nil {
					msg.hard, msg.head, msg.content = true, nil, nil
				}
			}
		}
	}
	ss.sendLocked(ctrl(id, name, 200, "ok", map[string]int64{"del": t.delID}))
}

// onNote stores recv/read marks; invalid notes are dropped silently and
// nothing is ever answered.
func (s *Server) onNote(ss *session, name, what string, seq int64) {
	t := s.resolve(ss.user.id, name)
	if t == nil || seq <= 0 || seq > t.seq {
		return
	}
	m := t.members[ss.user.id]
	if m == nil {
		return
	}
	switch what {
	case "recv":
		m.recv = max(m.recv, seq)
	case "read":
		m.read = max(m.read, seq)
		m.recv = max(m.recv, seq)
	}
}
