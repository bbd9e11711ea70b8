package tinode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// TagHeadKey is the {pub} head key that carries the client tag. The server
// passes head through unchanged to every {data} copy of the message, and
// has no idempotent send: a retried {pub} is a new message with a new seq,
// so the tag is how the lab tells a retry's duplicate from a new message.
const TagHeadKey = "x-imlab-tag"

// NewAccount describes an account to create with the basic scheme.
type NewAccount struct {
	Login, Password string
	Name            string   // public.fn
	Tags            []string // discovery tags
	// Authenticate logs this session in as the new user ({acc login=true}).
	Authenticate bool
}

// Auth is the answer to an account creation or a login.
type Auth struct {
	UserID  string
	Token   string // empty for an account created without Authenticate
	Expires time.Time
}

// CreateAccount creates a user ({acc user="new" scheme="basic"}).
func (s *Session) CreateAccount(ctx context.Context, a NewAccount) (Auth, error) {
	if err := checkBasic(a.Login, a.Password); err != nil {
		return Auth{}, err
	}
	msg := &accMsg{User: "new", Scheme: "basic", Secret: basicSecret(a.Login, a.Password),
		Login: a.Authenticate, Tags: a.Tags}
	if a.Name != "" {
		msg.Desc = &accDesc{Public: map[string]string{"fn": a.Name}}
	}
	msg.ID = s.newID()
	au, err := s.authCall(ctx, "acc", msg.ID, &clientFrame{Acc: msg})
	if err != nil {
		return Auth{}, err
	}
	if a.Authenticate {
		s.setAuth(au, a.Login, a.Password)
	}
	return au, nil
}

// LoginBasic authenticates the session with a login and password.
func (s *Session) LoginBasic(ctx context.Context, login, password string) (Auth, error) {
	if err := checkBasic(login, password); err != nil {
		return Auth{}, err
	}
	id := s.newID()
	au, err := s.authCall(ctx, "login", id, &clientFrame{Login: &loginMsg{ID: id, Scheme: "basic",
		Secret: basicSecret(login, password)}})
	if err != nil {
		return Auth{}, err
	}
	s.setAuth(au, login, password)
	return au, nil
}

// LoginToken authenticates the session with a token from an earlier login.
func (s *Session) LoginToken(ctx context.Context, token string) (Auth, error) {
	if token == "" {
		return Auth{}, invalidf("login: empty token")
	}
	id := s.newID()
	au, err := s.authCall(ctx, "login", id, &clientFrame{Login: &loginMsg{ID: id, Scheme: "token", Secret: token}})
	if err != nil {
		return Auth{}, err
	}
	s.setAuth(au, "", "")
	return au, nil
}

func (s *Session) authCall(ctx context.Context, op, id string, f *clientFrame) (Auth, error) {
	a, err := s.roundTrip(ctx, op, "", id, f, wantCtrl, nil)
	if err != nil {
		return Auth{}, err
	}
	var p struct {
		User    string    `json:"user"`
		Token   string    `json:"token"`
		Expires time.Time `json:"expires"`
	}
	if err := decodeParams(a.ctrl, &p); err != nil {
		return Auth{}, errUnknownAnswer(op, "", id, err)
	}
	if !IsUserID(p.User) {
		return Auth{}, errUnknownAnswer(op, "", id, protocolf("%s: answer %d without a user id", op, a.ctrl.Code))
	}
	return Auth{UserID: p.User, Token: p.Token, Expires: p.Expires}, nil
}

func (s *Session) setAuth(a Auth, login, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.userID = a.UserID
	if a.Token != "" {
		s.auth.token = a.Token
	}
	if login != "" {
		s.auth.login, s.auth.password = login, password
	}
}

func checkBasic(login, password string) error {
	if login == "" || password == "" {
		return invalidf("basic auth: empty login or password")
	}
	if strings.ContainsRune(login, ':') {
		return invalidf("basic auth: login %q holds ':'", login)
	}
	return nil
}

func basicSecret(login, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(login + ":" + password))
}

// Sub is the answer to a subscription.
type Sub struct {
	Topic string // the topic's name for this user (a new group's grp… name)
	Mode  string // access mode granted, if the server said (only on a new subscription)
}

// Subscribe subscribes the user to topic if needed and attaches the
// session to it ({sub}). For a p2p topic, topic is the peer's user id; the
// first {sub} creates the topic. A session already attached (304) is
// success.
func (s *Session) Subscribe(ctx context.Context, topic string) (Sub, error) {
	if !IsUserID(topic) && !IsGroup(topic) {
		return Sub{}, invalidf("sub: topic %q is neither a user id nor a group", topic)
	}
	id := s.newID()
	a, err := s.roundTrip(ctx, "sub", topic, id, &clientFrame{Sub: &subMsg{ID: id, Topic: topic}}, wantCtrl, nil)
	if err != nil && !IsCode(err, 304) {
		return Sub{}, err
	}
	sub := Sub{Topic: topic}
	if a.ctrl != nil {
		sub.Mode = ctrlMode(a.ctrl)
	}
	s.setAttached(topic, true)
	return sub, nil
}

// NewGroup describes a group topic to create.
type NewGroup struct {
	Name string // public.fn
	Tags []string
}

// CreateGroup creates a group topic owned by this session's user and
// attaches to it ({sub topic="new"}). It returns the topic's name.
// Members join with their own Subscribe (the server's default access for a
// group lets any authenticated user join) or are added by Invite.
func (s *Session) CreateGroup(ctx context.Context, g NewGroup) (Sub, error) {
	id := s.newID()
	m := &subMsg{ID: id, Topic: "new" + id}
	if g.Name != "" || len(g.Tags) > 0 {
		m.Set = &subSet{Tags: g.Tags}
		if g.Name != "" {
			m.Set.Desc = &setDesc{Public: map[string]string{"fn": g.Name}}
		}
	}
	a, err := s.roundTrip(ctx, "sub", m.Topic, id, &clientFrame{Sub: m}, wantCtrl, nil)
	if err != nil {
		return Sub{}, err
	}
	if !IsGroup(a.ctrl.Topic) {
		return Sub{}, errUnknownAnswer("sub", m.Topic, id, protocolf("new group: answer names topic %q", a.ctrl.Topic))
	}
	s.setAttached(a.ctrl.Topic, true)
	return Sub{Topic: a.ctrl.Topic, Mode: ctrlMode(a.ctrl)}, nil
}

// Invite subscribes user to group topic with the given access mode ("" for
// the topic's default) on the authority of this session's user ({set sub}).
// The invited user still attaches with Subscribe.
func (s *Session) Invite(ctx context.Context, topic, user, mode string) error {
	if !IsGroup(topic) || !IsUserID(user) {
		return invalidf("invite: topic %q, user %q", topic, user)
	}
	id := s.newID()
	_, err := s.roundTrip(ctx, "set", topic, id, &clientFrame{Set: &setMsg{ID: id, Topic: topic,
		Sub: &setSub{User: user, Mode: mode}}}, wantCtrl, nil)
	return err
}

// Leave detaches the session from topic ({leave}); unsub also ends the
// user's subscription (all the user's sessions).
func (s *Session) Leave(ctx context.Context, topic string, unsub bool) error {
	id := s.newID()
	_, err := s.roundTrip(ctx, "leave", topic, id, &clientFrame{Leave: &leaveMsg{ID: id, Topic: topic, Unsub: unsub}}, wantCtrl, nil)
	if err == nil || IsCode(err, 304) {
		s.setAttached(topic, false)
		return nil
	}
	return err
}

func (s *Session) setAttached(topic string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.attached[topic] = struct{}{}
	} else {
		delete(s.attached, topic)
	}
}

func ctrlMode(c *Ctrl) string {
	var p struct {
		Acs *wireAcs `json:"acs"`
	}
	if json.Unmarshal(c.Params, &p) == nil && p.Acs != nil {
		return p.Acs.Mode
	}
	return ""
}

// Message is what Publish sends.
type Message struct {
	// Tag goes in head[TagHeadKey]; empty: none.
	Tag string
	// Content is any JSON value (a string is plain text).
	Content any
	// Head holds further head keys (optional).
	Head map[string]any
	// NoEcho: the publishing session gets no {data} copy.
	NoEcho bool
}

// PubAck is the server's acceptance of a {pub}: ctrl 202 with params.seq.
type PubAck struct {
	Seq int64
	TS  time.Time // the server's timestamp of the answer
	ID  string    // the request id the {pub} carried
}

// Publish sends a message to topic ({pub}) and waits for its answer. The
// error classifies the outcome (OutcomeOf): a *ServerError is the server
// saying it failed; an *UnknownError means it may or may not have stored
// the message. A retry after an unknown outcome is a new message to the
// server.
func (s *Session) Publish(ctx context.Context, topic string, m Message) (PubAck, error) {
	if topic == "" {
		return PubAck{}, invalidf("pub: empty topic")
	}
	if m.Content == nil {
		return PubAck{}, invalidf("pub %s: nil content", topic)
	}
	head := m.Head
	if m.Tag != "" {
		head = make(map[string]any, len(m.Head)+1)
		for k, v := range m.Head {
			head[k] = v
		}
		head[TagHeadKey] = m.Tag
	}
	id := s.newID()
	a, err := s.roundTrip(ctx, "pub", topic, id, &clientFrame{Pub: &pubMsg{ID: id, Topic: topic, NoEcho: m.NoEcho,
		Head: head, Content: m.Content}}, wantCtrl, nil)
	if err != nil {
		return PubAck{ID: id}, err
	}
	var p struct {
		Seq int64 `json:"seq"`
	}
	if err := decodeParams(a.ctrl, &p); err != nil {
		return PubAck{ID: id}, errUnknownAnswer("pub", topic, id, err)
	}
	if a.ctrl.Code != CodeAccepted || p.Seq <= 0 {
		return PubAck{ID: id}, errUnknownAnswer("pub", topic, id,
			protocolf("pub %s: answer %d %q without a seq", topic, a.ctrl.Code, a.ctrl.Text))
	}
	return PubAck{Seq: p.Seq, TS: a.ctrl.TS, ID: id}, nil
}

// Note kinds this client sends.
const (
	NoteRecv = "recv" // the message was received by the client
	NoteRead = "read" // the message was read (implies recv)
)

// Note reports a recv or read mark ({note}); the server answers nothing
// and silently drops a note it finds invalid, so a mark is known to have
// landed only when Desc or Members shows it.
func (s *Session) Note(ctx context.Context, topic, what string, seq int64) error {
	if what != NoteRecv && what != NoteRead {
		return invalidf("note %s: what %q", topic, what)
	}
	if seq <= 0 {
		return invalidf("note %s: seq %d", topic, seq)
	}
	return s.writeOnly(ctx, "note", topic, &clientFrame{Note: &noteMsg{Topic: topic, What: what, Seq: seq}})
}

// DeleteMessages deletes the messages in ranges ({del what="msg"}): hard
// for every user (needs the D permission), soft for this user only. It
// returns the delete transaction's id.
func (s *Session) DeleteMessages(ctx context.Context, topic string, ranges []SeqRange, hard bool) (int64, error) {
	if len(ranges) == 0 {
		return 0, invalidf("del %s: no ranges", topic)
	}
	for _, r := range ranges {
		if !r.valid() {
			return 0, invalidf("del %s: bad range %+v", topic, r)
		}
	}
	id := s.newID()
	a, err := s.roundTrip(ctx, "del", topic, id, &clientFrame{Del: &delMsg{ID: id, Topic: topic, What: "msg",
		Hard: hard, DelSeq: ranges}}, wantCtrl, nil)
	if err != nil {
		return 0, err
	}
	var p struct {
		Del int64 `json:"del"`
	}
	if err := decodeParams(a.ctrl, &p); err != nil {
		return 0, errUnknownAnswer("del", topic, id, err)
	}
	if p.Del <= 0 {
		return 0, errUnknownAnswer("del", topic, id, protocolf("del %s: answer without a delete id", topic))
	}
	return p.Del, nil
}

// TopicDesc is the topic as this user sees it ({get what="desc"}).
type TopicDesc struct {
	Seq   int64  // the topic's latest seq
	Read  int64  // this user's read mark
	Recv  int64  // this user's recv mark
	Clear int64  // the latest delete transaction id this user sees
	Mode  string // this user's access mode
}

// Desc queries topic's description.
func (s *Session) Desc(ctx context.Context, topic string) (TopicDesc, error) {
	id := s.newID()
	a, err := s.roundTrip(ctx, "get", topic, id, &clientFrame{Get: &getMsg{ID: id, Topic: topic, What: "desc"}}, wantMeta, nil)
	if err != nil {
		return TopicDesc{}, err
	}
	if a.meta == nil || a.meta.Desc == nil {
		return TopicDesc{}, errUnknownAnswer("get", topic, id, protocolf("get desc %s: no desc in the answer", topic))
	}
	d := a.meta.Desc
	td := TopicDesc{Seq: d.Seq, Read: d.Read, Recv: d.Recv, Clear: d.Clear}
	if d.Acs != nil {
		td.Mode = d.Acs.Mode
	}
	return td, nil
}

// Member is one subscriber of a topic with its marks.
type Member struct {
	User       string
	Read, Recv int64
	Mode       string
}

// Members lists topic's subscribers ({get what="sub"}).
func (s *Session) Members(ctx context.Context, topic string) ([]Member, error) {
	id := s.newID()
	a, err := s.roundTrip(ctx, "get", topic, id, &clientFrame{Get: &getMsg{ID: id, Topic: topic, What: "sub"}}, wantMeta, nil)
	if err != nil {
		return nil, err
	}
	if a.meta == nil {
		return nil, nil // 204: none
	}
	out := make([]Member, 0, len(a.meta.Sub))
	for _, w := range a.meta.Sub {
		m := Member{User: w.User, Read: w.Read, Recv: w.Recv}
		if w.Acs != nil {
			m.Mode = w.Acs.Mode
		}
		out = append(out, m)
	}
	return out, nil
}

// IsUserID reports whether s looks like a user id ("usr" + base64).
func IsUserID(s string) bool { return len(s) > 3 && strings.HasPrefix(s, "usr") }

// IsGroup reports whether s names a group topic ("grp…" or a channel "chn…").
func IsGroup(s string) bool {
	return len(s) > 3 && (strings.HasPrefix(s, "grp") || strings.HasPrefix(s, "chn"))
}

// ConvKey is the lab's name for the conversation that user sees as topic:
// the same on both sides of a p2p topic ("p2p:" + the two user ids in
// lexical order), the topic name for a group. It is not the server's
// internal topic name.
func ConvKey(user, topic string) string {
	if IsUserID(topic) {
		a, b := user, topic
		if b < a {
			a, b = b, a
		}
		return "p2p:" + a + ":" + b
	}
	return topic
}
