package driver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets"
	"imlab/targets/tinode"
)

// Options of the targets.Config this driver reads (Config.Options).
const (
	// OptAPIKey is the API key signed with the server's api_key_salt;
	// without it, the environment's EnvAPIKey.
	OptAPIKey = "apikey"
	// EnvAPIKey names the API key when no option gives one.
	EnvAPIKey = "IMLAB_TINODE_APIKEY"
	// OptSenders is the number of sending sessions per user.
	OptSenders = "senders"
)

// Target is the targets.Driver of a Tinode. Provision must run before
// Session; it is safe for concurrent use after.
type Target struct {
	cfg  targets.Config
	wire tinode.Config
	// senders per user, from OptSenders (0: the default).
	senders int

	mu     sync.Mutex
	d      *Driver
	prefix string
}

// Open makes the Tinode driver of cfg (connecting nothing).
func Open(cfg targets.Config) (*Target, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	name, target, err := cfg.Endpoint()
	if err != nil {
		return nil, err
	}
	if name != targets.DriverTinode {
		return nil, fmt.Errorf("%w: driver %q is not %q", targets.ErrInvalid, name, targets.DriverTinode)
	}
	t := &Target{cfg: cfg}
	for k, v := range cfg.Options {
		switch k {
		case OptAPIKey:
			t.wire.APIKey = v
		case OptSenders:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				return nil, fmt.Errorf("%w: option %s=%q: 1..64 sending sessions per user", targets.ErrInvalid, k, v)
			}
			t.senders = n
		default:
			return nil, fmt.Errorf("%w: option %q: the tinode driver takes %s and %s", targets.ErrInvalid, k, OptAPIKey, OptSenders)
		}
	}
	if t.wire.APIKey == "" {
		t.wire.APIKey = os.Getenv(EnvAPIKey)
	}
	if t.wire.APIKey == "" {
		return nil, fmt.Errorf("%w: option %s (or %s): Tinode refuses a connection without an API key (signed with its api_key_salt)", targets.ErrInvalid, OptAPIKey, EnvAPIKey)
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("%w: target %q: %v", targets.ErrInvalid, cfg.Target, err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v0/channels"
	}
	t.wire.URL = u.String()
	t.wire.RequestTimeout = cfg.Timeout
	if err := t.wire.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", targets.ErrInvalid, err)
	}
	return t, nil
}

// Name is targets.DriverTinode.
func (t *Target) Name() string { return targets.DriverTinode }

// Capabilities: no inbox, no idempotent send, a delete log.
func (t *Target) Capabilities() targets.Capabilities { return Capabilities() }

// Warm checks that the server answers a {hi} and, once the population
// is provisioned, opens every sending session attached to its topics
// (Driver.WarmSenders).
func (t *Target) Warm(ctx context.Context) error {
	s, err := tinode.Dial(ctx, t.wire)
	if err != nil {
		return wrap(err)
	}
	s.Close()
	if d := t.Driver(); d != nil {
		return wrap(d.WarmSenders(ctx))
	}
	return nil
}

// RunHash is the login prefix of a run: 8 base-36 digits of a hash of its
// population prefix (Tinode's logins are at most 32 characters).
func RunHash(prefix string) string {
	h := fnv.New64a()
	h.Write([]byte(prefix))
	s := strconv.FormatUint(h.Sum64(), 36)
	return s[:min(len(s), MaxRunHash)]
}

// Provision creates the population (Driver.Provision) under the run's
// prefix; again with the same prefix it is a no-op.
func (t *Target) Provision(ctx context.Context, p targets.Population) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.d != nil {
		if p.Prefix == t.prefix {
			return nil
		}
		return fmt.Errorf("%w: already provisioned for run %q, not %q", targets.ErrInvalid, t.prefix, p.Prefix)
	}
	d, err := New(Config{Wire: t.wire, RunHash: RunHash(p.Prefix), TagPrefix: p.Prefix, SendersPerUser: t.senders})
	if err != nil {
		return fmt.Errorf("%w: %w", targets.ErrInvalid, err)
	}
	pop := Population{Users: p.Users}
	for _, g := range p.Groups {
		pop.Groups = append(pop.Groups, Group{ID: g.ID, Members: g.Members})
	}
	if err := d.Provision(ctx, pop); err != nil {
		d.Close()
		return wrap(err)
	}
	t.d, t.prefix = d, p.Prefix
	return nil
}

// Driver is the provisioned driver (nil before Provision).
func (t *Target) Driver() *Driver {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.d
}

// Session is device did of uid. It connects nothing: Provision may come
// after it, before the session is used.
func (t *Target) Session(_ context.Context, uid uint64, did string) (targets.Session, error) {
	h := fnv.New32a()
	h.Write([]byte(did))
	return &session{t: t, uid: uid, did: did, slot: int(h.Sum32() & 0xffff)}, nil
}

// Close ends the driver's sending sessions.
func (t *Target) Close() error {
	if d := t.Driver(); d != nil {
		d.Close()
	}
	return nil
}

// wrap classifies a driver or wire error as a *targets.Error: a definite
// refusal (any error answer, 5xx included: Tinode answers after its store
// call returned) is Failed, no answer Unknown, a bad argument Failed.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var se *SendError
	if errors.As(err, &se) {
		if se.Unknown {
			return &targets.Error{Class: targets.Unknown, Status: se.Status, Err: err}
		}
		return &targets.Error{Class: targets.Failed, Status: se.Status, Message: err.Error(), Err: err}
	}
	if errors.Is(err, ErrInvalid) {
		return &targets.Error{Class: targets.Failed, Message: err.Error(), Err: fmt.Errorf("%w: %w", targets.ErrInvalid, err)}
	}
	var sv *tinode.ServerError
	status := 0
	if errors.As(err, &sv) {
		status = sv.Code
	}
	switch tinode.OutcomeOf(err) {
	case tinode.OutcomeFailed:
		return &targets.Error{Class: targets.Failed, Status: status, Message: err.Error(), Err: err}
	default:
		return &targets.Error{Class: targets.Unknown, Status: status, Err: err}
	}
}

// session is one device of the population.
type session struct {
	t    *Target
	uid  uint64
	did  string
	slot int

	// mu guards dev and held: the seqs the device was handed (by Recv)
	// outlive its connections, so a reconnect reads only what it missed
	// and a message queued but never handed out is read again.
	mu   sync.Mutex
	dev  *Device
	held map[uint64]int64
}

// driver is the provisioned driver, with the session's user in it.
func (s *session) driver() (*Driver, error) {
	d := s.t.Driver()
	if d == nil {
		return nil, fmt.Errorf("%w: tinode: session of uid %d used before Provision", targets.ErrInvalid, s.uid)
	}
	if _, ok := d.byUID[s.uid]; !ok {
		return nil, fmt.Errorf("%w: tinode: uid %d is not in the population", targets.ErrInvalid, s.uid)
	}
	return d, nil
}

func (s *session) UID() uint64 { return s.uid }
func (s *session) DID() string { return s.did }

// Send publishes r on one of the user's sending sessions, with r's client
// message id as the client tag.
func (s *session) Send(ctx context.Context, r *targets.SendReq) (targets.SendAck, error) {
	target := r.ToUID
	if r.ConvType == targets.ConvGroup {
		target = r.GroupID
	}
	d, err := s.driver()
	if err != nil {
		return targets.SendAck{}, err
	}
	ack, err := d.Send(ctx, SendReq{From: s.uid, Slot: s.slot, ConvType: r.ConvType, Target: target, Tag: r.ClientMsgID, Content: r.Content})
	if err != nil {
		return targets.SendAck{}, wrap(err)
	}
	return targets.SendAck{MsgID: ack.MsgID, ConvID: ack.ConvID, ConvSeq: ack.ConvSeq}, nil
}

func (s *session) notOffered(what string) error {
	return targets.NotOffered(targets.DriverTinode, what)
}

func (s *session) Pull(context.Context, targets.PullOpts) (targets.PullPage, error) {
	return targets.PullPage{}, s.notOffered("an inbox pull (no per-user inbox)")
}
func (s *session) Ack(context.Context, uint64) (uint64, error) {
	return 0, s.notOffered("an inbox cursor (no per-user inbox)")
}
func (s *session) DialSender(context.Context) (targets.Sender, error) {
	return nil, s.notOffered("sends over the push connection (sends use sessions of their own)")
}

// act is the session's caller of the client mix's actions in conv.
func (s *session) act(conv uint64) (*Driver, Act, error) {
	d, err := s.driver()
	if err != nil {
		return nil, Act{}, err
	}
	return d, Act{From: s.uid, Slot: s.slot, Conv: conv}, nil
}

// ConvPull reads the messages above a conv_seq cursor ({get what="data"
// since}): Tinode has no inbox, so Seq is 0 and NextCursor a conv_seq.
func (s *session) ConvPull(ctx context.Context, o targets.ConvPullOpts) (targets.PullPage, error) {
	if o.Limit < 1 || o.Limit > targets.MaxConvPullLimit {
		return targets.PullPage{}, wrap(fmt.Errorf("%w: conv-pull limit %d: 1..%d", ErrInvalid, o.Limit, targets.MaxConvPullLimit))
	}
	d, a, err := s.act(o.ConvID)
	if err != nil {
		return targets.PullPage{}, err
	}
	p, err := d.Since(ctx, a, o.Cursor, o.Limit)
	if err != nil {
		return targets.PullPage{}, wrap(err)
	}
	out := targets.PullPage{NextCursor: o.Cursor}
	for _, m := range p.Msgs {
		out.Msgs = append(out.Msgs, targets.Msg{MsgID: m.MsgID, ConvID: m.ConvID, ConvType: d.convType(m.ConvID), ConvSeq: m.ConvSeq,
			SenderUID: m.From, Content: m.Content})
		out.NextCursor = max(out.NextCursor, m.ConvSeq)
	}
	out.HasMore = p.More
	return out, nil
}

// History reads From..To as the user sees it: a message deleted for the
// user (soft) or for everyone (hard) is absent, not a tombstone.
func (s *session) History(ctx context.Context, o targets.HistoryOpts) ([]targets.HistoryItem, error) {
	if o.To < o.From || o.To-o.From+1 > targets.MaxHistoryRange {
		return nil, wrap(fmt.Errorf("%w: history [%d..%d]: at most %d conv_seqs", ErrInvalid, o.From, o.To, targets.MaxHistoryRange))
	}
	d, a, err := s.act(o.ConvID)
	if err != nil {
		return nil, err
	}
	p, err := d.History(ctx, a, max(o.From, 1), o.To)
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]targets.HistoryItem, 0, len(p.Msgs))
	for _, m := range p.Msgs {
		out = append(out, targets.HistoryItem{ConvSeq: m.ConvSeq, MsgID: m.MsgID, SenderUID: m.From, Content: m.Content})
	}
	return out, nil
}

// Revoke deletes the message for everyone ({del} hard).
func (s *session) Revoke(ctx context.Context, convID, convSeq uint64) error {
	d, a, err := s.act(convID)
	if err != nil {
		return err
	}
	return wrap(d.DeleteMsg(ctx, a, convSeq, true))
}

// Delete deletes the message for this user only ({del} soft).
func (s *session) Delete(ctx context.Context, convID, convSeq uint64) error {
	d, a, err := s.act(convID)
	if err != nil {
		return err
	}
	return wrap(d.DeleteMsg(ctx, a, convSeq, false))
}

// Clear soft-deletes everything up to the topic's seq for this user.
func (s *session) Clear(ctx context.Context, convID uint64) (uint64, error) {
	d, a, err := s.act(convID)
	if err != nil {
		return 0, err
	}
	n, err := d.Clear(ctx, a)
	return n, wrap(err)
}

// MarkRead sets the user's read mark of the topic to to ({note read});
// Tinode keeps one mark per user and topic, so from is implied.
func (s *session) MarkRead(ctx context.Context, convID, from, to uint64) error {
	if to < from {
		return wrap(fmt.Errorf("%w: read [%d..%d]", ErrInvalid, from, to))
	}
	d, a, err := s.act(convID)
	if err != nil {
		return err
	}
	return wrap(d.MarkRead(ctx, a, to))
}

// Connect opens the device's session, attaches it to every topic of its
// user and reads what it missed: the history above the highest seq this
// device object holds (everything, the first time) comes first out of
// Recv, then the pushes.
func (s *session) Connect(ctx context.Context) (targets.Conn, error) {
	d, err := s.driver()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev == nil {
		v, err := d.Device(s.uid, s.did)
		if err != nil {
			return nil, wrap(err)
		}
		s.dev, s.held = v, map[uint64]int64{}
	}
	v := s.dev
	clear(v.last)
	for c, seq := range s.held {
		v.last[c] = seq
	}
	if err := v.Connect(ctx); err != nil {
		return nil, wrap(err)
	}
	c := &conn{v: v, s: v.s, sess: s, timeout: d.cfg.Wire.RequestTimeout}
	if err := v.CatchUp(ctx, c.enqueue); err != nil {
		v.Close()
		return nil, wrap(err)
	}
	return c, nil
}

// conn is a device's push connection: one goroutine Recvs (and owns v and
// queue); Close may come from another and only closes the wire session.
type conn struct {
	v       *Device
	s       *tinode.Session
	sess    *session
	queue   []Msg
	timeout time.Duration
}

func (c *conn) enqueue(m Msg, _ bool) { c.queue = append(c.queue, m) }

// ErrConnClosed ends Recv on a connection that ended.
var ErrConnClosed = errors.New("tinode driver: connection ended")

// Recv returns the next message: queued ones first, then the next push
// (a gap before it filled from history, queued behind it in order). With
// a deadline already past it returns what is queued and then the
// deadline's error: after Connect, that is everything the device missed.
func (c *conn) Recv(deadline time.Time) (targets.Push, error) {
	var timer <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timer = t.C
	}
	for len(c.queue) == 0 {
		select {
		case p := <-c.s.Pushes():
			ctx, cancel := context.WithTimeout(context.Background(), 2*c.timeout+time.Second)
			err := c.v.Take(ctx, p, c.enqueue)
			cancel()
			if err != nil {
				c.s.Close()
				return targets.Push{}, wrap(err)
			}
		case <-c.s.Done():
			return targets.Push{}, &targets.Error{Class: targets.Unknown, Err: fmt.Errorf("%w: %v", ErrConnClosed, c.s.Err())}
		case <-timer:
			return targets.Push{}, &targets.Error{Class: targets.Unknown, Err: context.DeadlineExceeded}
		}
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	c.sess.mu.Lock()
	c.sess.held[m.ConvID] = max(c.sess.held[m.ConvID], int64(m.ConvSeq))
	c.sess.mu.Unlock()
	return targets.Push{Type: targets.PushMsg, Msg: targets.Msg{MsgID: m.MsgID, ConvID: m.ConvID, ConvType: c.v.d.convType(m.ConvID),
		ConvSeq: m.ConvSeq, SenderUID: m.From, Content: m.Content}}, nil
}

// Ack: Tinode keeps no inbox cursor.
func (c *conn) Ack(uint64) error {
	return targets.NotOffered(targets.DriverTinode, "an inbox cursor (no per-user inbox)")
}

// Close ends the session (and a Recv in progress).
func (c *conn) Close() error { return c.s.Close() }

var _ targets.Driver = (*Target)(nil)

// WriteConvWitness reads every conversation of the run whole (ReadWitness)
// and writes it into sh: the history witness of a target without lab
// routes, read through its protocol. It answers the conversations read
// and those that could not be (each noted with why).
func (t *Target) WriteConvWitness(ctx context.Context, sh *ledger.Shard, now func() time.Duration) (read, failed int, err error) {
	d := t.Driver()
	if d == nil {
		return 0, 0, fmt.Errorf("%w: tinode: witness before Provision", targets.ErrInvalid)
	}
	w := d.ReadWitness(ctx, now)
	return w.Convs, len(w.Failed), w.Write(sh)
}
