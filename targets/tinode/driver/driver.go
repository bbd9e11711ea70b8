package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"imlab/ledger"
	"imlab/targets/tinode"
)

// Group is a lab group: its id and members (lab uids), the first of which
// creates the topic and owns it.
type Group struct {
	ID      uint64
	Members []uint64
}

// Population is what Provision makes on the server.
type Population struct {
	Users  []uint64
	Groups []Group
}

// conv is one conversation: a p2p topic of two users or a group topic.
type conv struct {
	id    uint64
	group int    // index in Population.Groups, -1 for p2p
	a, b  int    // population indexes of a p2p topic's users, a < b
	name  string // a group's topic name (grp…)
}

// Driver is the lab's view of one Tinode for one run. Provision fills it;
// after that it is read only, and its methods are safe for concurrent use.
type Driver struct {
	cfg Config
	pop Population
	// byUID maps a lab uid to its population index; tid holds the Tinode
	// user id of each index, and byTID the way back.
	byUID  map[uint64]int
	tid    []string
	byTID  map[string]int
	groups []conv // by group index
	byGID  map[uint64]int
	byName map[string]int // group topic name -> group index
	// userGroups lists the group indexes of each user index.
	userGroups [][]int

	sendMu  sync.Mutex
	senders map[senderKey]*sender

	// tokMu guards tokens: each user's last login token ("": none yet).
	tokMu  sync.Mutex
	tokens []string
}

// New makes a driver; Provision must run before anything else.
func New(cfg Config) (*Driver, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, senders: map[senderKey]*sender{}}, nil
}

// Config is the driver's configuration with defaults applied.
func (d *Driver) Config() Config { return d.cfg }

// Capabilities say what a Tinode offers the checker: no per-user inbox,
// no idempotent send, the client mix's actions as Tinode has them
// (actions.go: the conversation pull by conv_seq, revoke as a hard
// delete, delete and clear as soft ones, read as the user's read mark), a
// delete log and one read mark per user and topic.
func Capabilities() ledger.Capabilities {
	c := ledger.Capabilities{Driver: "tinode"}
	for _, a := range ledger.Actions {
		c.Actions = append(c.Actions, a.String())
	}
	c.Actions = append(c.Actions, ledger.DelRangeCapability, ledger.ReadMarkCapability)
	return c
}

func (d *Driver) checkPopulation(p Population) error {
	if len(p.Users) < 2 || len(p.Users) > MaxUsers {
		return fmt.Errorf("%w: %d users: 2..%d (MaxUsers: every device attaches to a p2p topic per other user)", ErrInvalid, len(p.Users), MaxUsers)
	}
	if len(p.Groups) > MaxGroups {
		return fmt.Errorf("%w: %d groups: at most %d (MaxGroups)", ErrInvalid, len(p.Groups), MaxGroups)
	}
	d.byUID = make(map[uint64]int, len(p.Users))
	for i, u := range p.Users {
		if _, dup := d.byUID[u]; dup {
			return fmt.Errorf("%w: uid %d twice in the population", ErrInvalid, u)
		}
		d.byUID[u] = i
	}
	d.byGID = make(map[uint64]int, len(p.Groups))
	d.userGroups = make([][]int, len(p.Users))
	for gi, g := range p.Groups {
		if _, dup := d.byGID[g.ID]; dup {
			return fmt.Errorf("%w: group %d twice in the population", ErrInvalid, g.ID)
		}
		d.byGID[g.ID] = gi
		if len(g.Members) == 0 {
			return fmt.Errorf("%w: group %d has no members", ErrInvalid, g.ID)
		}
		for _, m := range g.Members {
			ui, ok := d.byUID[m]
			if !ok {
				return fmt.Errorf("%w: group %d: member %d is not in the population", ErrInvalid, g.ID, m)
			}
			if !slices.Contains(d.userGroups[ui], gi) {
				d.userGroups[ui] = append(d.userGroups[ui], gi)
			}
		}
	}
	d.pop = p
	return nil
}

// Provision creates the population on the server through the protocol: an
// account per user, every p2p topic (created by the lower user of each
// pair), and every group (created by its first member, the others
// invited). Nothing of it is ever deleted: RunHash keeps runs apart.
func (d *Driver) Provision(ctx context.Context, p Population) error {
	if err := d.checkPopulation(p); err != nil {
		return err
	}
	if err := d.createAccounts(ctx); err != nil {
		return err
	}
	d.groups = make([]conv, len(p.Groups))
	d.byName = make(map[string]int, len(p.Groups))
	err := d.forEach(ctx, len(p.Users), func(ctx context.Context, ui int) error {
		s, err := d.login(ctx, ui, "provision")
		if err != nil {
			return err
		}
		defer s.Close()
		for peer := ui + 1; peer < len(p.Users); peer++ {
			if err := attach(ctx, s, d.tid[peer]); err != nil {
				return fmt.Errorf("tinode driver: p2p topic of uids %d and %d: %w", p.Users[ui], p.Users[peer], err)
			}
		}
		for gi, g := range p.Groups {
			if g.Members[0] == p.Users[ui] {
				if err := d.createGroup(ctx, s, gi); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.finishGroups()
	return nil
}

func (d *Driver) createAccounts(ctx context.Context) error {
	n := len(d.pop.Users)
	d.tid = make([]string, n)
	d.tokens = make([]string, n)
	err := d.forEach(ctx, n, func(ctx context.Context, ui int) error {
		s, err := d.dial(ctx, "provision")
		if err != nil {
			return err
		}
		defer s.Close()
		uid := d.pop.Users[ui]
		a, err := s.CreateAccount(ctx, tinode.NewAccount{Login: d.cfg.Login(uid), Password: d.cfg.password(uid),
			Name: d.cfg.Login(uid), Authenticate: true})
		if err != nil {
			return fmt.Errorf("tinode driver: account of uid %d (login %s): %w", uid, d.cfg.Login(uid), err)
		}
		d.tid[ui] = a.UserID // each worker writes its own index
		d.setToken(ui, a.Token)
		return nil
	})
	if err != nil {
		return err
	}
	d.byTID = make(map[string]int, n)
	for i, t := range d.tid {
		d.byTID[t] = i
	}
	return nil
}

func (d *Driver) createGroup(ctx context.Context, s *tinode.Session, gi int) error {
	g := d.pop.Groups[gi]
	sub, err := s.CreateGroup(ctx, tinode.NewGroup{Name: fmt.Sprintf("im%s group %d", d.cfg.RunHash, g.ID)})
	if err != nil {
		return fmt.Errorf("tinode driver: group %d: %w", g.ID, err)
	}
	for _, m := range g.Members[1:] {
		if err := s.Invite(ctx, sub.Topic, d.tid[d.byUID[m]], "JRWPS"); err != nil {
			return fmt.Errorf("tinode driver: group %d: invite uid %d: %w", g.ID, m, err)
		}
	}
	// forEach runs one goroutine per user index and a group has one
	// creator, so each entry is written once; Provision's return orders
	// these writes before any read.
	d.groups[gi] = conv{id: uint64(gi) + 1, group: gi, name: sub.Topic}
	return nil
}

// finishGroups builds the name index once every group exists.
func (d *Driver) finishGroups() {
	for gi, g := range d.groups {
		d.byName[g.name] = gi
	}
}

// forEach runs f for 0..n-1 on at most Workers goroutines and returns the
// first error (the others are cancelled).
func (d *Driver) forEach(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range min(d.cfg.Workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// dial opens a session as device did (not logged in).
func (d *Driver) dial(ctx context.Context, did string) (*tinode.Session, error) {
	wc := d.cfg.Wire
	wc.DeviceID = did
	s, err := tinode.Dial(ctx, wc)
	if err != nil {
		return nil, fmt.Errorf("tinode driver: %w", err)
	}
	return s, nil
}

// login opens a session of user index ui as device did.
//
// It logs in with the user's token when it has one: Tinode checks a
// basic login's password with bcrypt, tens of milliseconds of its CPU
// each, which devices coming back every few seconds would pay again and
// again (and which a real client, keeping its token, does not). A token
// refused (expired, the server's key changed) falls back to the password
// and keeps the new token.
func (d *Driver) login(ctx context.Context, ui int, did string) (*tinode.Session, error) {
	s, err := d.dial(ctx, did)
	if err != nil {
		return nil, err
	}
	uid := d.pop.Users[ui]
	if tok := d.token(ui); tok != "" {
		_, err := s.LoginToken(ctx, tok)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, tinode.ErrRejected) {
			s.Close()
			return nil, fmt.Errorf("tinode driver: token login of uid %d: %w", uid, err)
		}
	}
	a, err := s.LoginBasic(ctx, d.cfg.Login(uid), d.cfg.password(uid))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("tinode driver: login of uid %d: %w", uid, err)
	}
	d.setToken(ui, a.Token)
	return s, nil
}

func (d *Driver) token(ui int) string {
	d.tokMu.Lock()
	defer d.tokMu.Unlock()
	return d.tokens[ui]
}

func (d *Driver) setToken(ui int, tok string) {
	if tok == "" {
		return
	}
	d.tokMu.Lock()
	defer d.tokMu.Unlock()
	d.tokens[ui] = tok
}
