// Package ref is the targets.Driver of the reference server: its HTTP +
// WebSocket contract (ref/api's doc) through targets/ref/client, and its
// lab routes (targets.LabDriver, targets.LabSession). It maps the
// interface onto the contract and nothing more: the ids the lab uses are
// the server's own (uids, group ids, conv_ids), a device is a lab token
// minted for (uid, did), and every error is a *targets.Error classified by
// its HTTP status (targets.ClassOfStatus). It must not import ref/... (the
// contract is JSON) nor know the generator.
package ref

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets"
	"imlab/targets/ref/client"
)

// maxProvisionConcurrency bounds the group creations in flight.
const maxProvisionConcurrency = 16

// Driver talks to one reference server. It is safe for concurrent use.
type Driver struct {
	cfg    targets.Config
	cl     *client.Client // pulls, acks, groups, lab reads (and sends without a pool of their own)
	sendCl *client.Client // sends over HTTP: cl, or a pool of their own
}

// New opens the driver's connection pools (connecting lazily).
func New(cfg targets.Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	name, target, err := cfg.Endpoint()
	if err != nil {
		return nil, err
	}
	if name != targets.DriverRef {
		return nil, fmt.Errorf("%w: driver %q is not %q", targets.ErrInvalid, name, targets.DriverRef)
	}
	for k := range cfg.Options {
		return nil, fmt.Errorf("%w: option %q: the ref driver takes no options", targets.ErrInvalid, k)
	}
	cc := client.DefaultConfig()
	cc.Target, cc.Secret, cc.MaxConns, cc.Timeout = target, cfg.Secret, cfg.Conns, cfg.Timeout
	cl, err := client.New(cc)
	if err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, cl: cl, sendCl: cl}
	if sp := cfg.SendPool; sp.Own {
		pc := cc
		pc.MaxConns, pc.Pipeline, pc.PipelineDelay = sp.Conns, sp.Pipeline, sp.PipelineDelay
		if d.sendCl, err = client.New(pc); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return d, nil
}

// Name is targets.DriverRef.
func (d *Driver) Name() string { return targets.DriverRef }

// Capabilities are ledger.DefaultCapabilities: an inbox, idempotent send,
// every action.
func (d *Driver) Capabilities() targets.Capabilities { return ledger.DefaultCapabilities() }

// Client is the driver's contract client (pulls, acks, lab reads), for
// tests and tools of this driver.
func (d *Driver) Client() *client.Client { return d.cl }

// Warm opens Conns connections of the pool, and those of the sends' own.
func (d *Driver) Warm(ctx context.Context) error {
	if err := d.cl.Warm(ctx, d.cfg.Conns); err != nil {
		return wrap(err)
	}
	if d.sendCl != d.cl {
		if err := d.sendCl.Warm(ctx, d.cfg.SendPool.Conns); err != nil {
			return fmt.Errorf("the sends' own pool: %w", wrap(err))
		}
	}
	return nil
}

// Provision creates every group (idempotently: the same members again is a
// no-op on the server), at most maxProvisionConcurrency at once. Users
// need no provisioning: a token names one.
func (d *Driver) Provision(ctx context.Context, p targets.Population) error {
	sem := make(chan struct{}, maxProvisionConcurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, g := range p.Groups {
		if ctx.Err() != nil {
			break
		}
		if len(g.Members) == 0 {
			return fmt.Errorf("%w: group %d has no members", targets.ErrInvalid, g.ID)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			tok, err := d.cl.Token(g.Members[0], g.CreatorDID)
			if err == nil {
				err = wrap(d.cl.CreateGroup(tok, g.ID, g.Members))
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("create group %d: %w", g.ID, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// Session mints the device's token.
func (d *Driver) Session(_ context.Context, uid uint64, did string) (targets.Session, error) {
	return d.session(uid, did)
}

func (d *Driver) session(uid uint64, did string) (*Session, error) {
	tok, err := d.cl.Token(uid, did)
	if err != nil {
		return nil, wrap(err)
	}
	return &Session{d: d, uid: uid, did: did, token: tok}, nil
}

// Close releases idle connections.
func (d *Driver) Close() error {
	d.cl.Close()
	if d.sendCl != d.cl {
		d.sendCl.Close()
	}
	return nil
}

// QueueLag reads GET /v1/lab/lag/now (or /v1/lab/lag).
func (d *Driver) QueueLag(context.Context) (targets.QueueLag, error) {
	q, err := d.cl.QueueLag()
	if ce := (*client.Error)(nil); errors.As(err, &ce) && ce.Status == 404 && strings.Contains(ce.Message, client.NoQueueSays) {
		return targets.QueueLag{}, fmt.Errorf("%w: %s", targets.ErrNoQueue, ce.Message)
	}
	if err != nil {
		return targets.QueueLag{}, wrap(err)
	}
	return targets.QueueLag{MaxAgeSeconds: q.MaxAgeSeconds, UnknownAge: q.UnknownAge, Records: q.Records,
		OutboxBacklog: q.OutboxBacklog, Errors: q.Errors}, nil
}

// EstimateClock samples GET /v1/lab/time (or the Date header).
func (d *Driver) EstimateClock(_ context.Context, n int) (targets.Clock, error) {
	c, err := d.cl.EstimateClock(n)
	if err != nil {
		return targets.Clock{}, err
	}
	return targets.Clock{Offset: c.Offset, Precision: c.Precision, Source: c.Source, Samples: c.Samples}, nil
}

// wrap turns a client error into a *targets.Error classified by status;
// nil stays nil and an invalid argument stays targets.ErrInvalid.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return &targets.Error{Class: targets.ClassOfStatus(ce.Status), Status: ce.Status, Code: ce.Code,
			Message: ce.Message, RetryAfter: ce.RetryAfter, Err: ce.Err}
	}
	if errors.Is(err, client.ErrInvalid) {
		return fmt.Errorf("%w: %v", targets.ErrInvalid, err)
	}
	return err
}

var (
	_ targets.Driver    = (*Driver)(nil)
	_ targets.LabDriver = (*Driver)(nil)
)

// Retention reads GET /v1/lab/retention.
func (d *Driver) Retention(context.Context) (targets.RetentionLog, error) {
	r, err := d.cl.LabRetention()
	if err != nil {
		return targets.RetentionLog{}, wrap(err)
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	out := targets.RetentionLog{Active: r.Active, MaxAge: ms(r.Settings.MaxAgeMS), PulledMinAge: ms(r.Settings.PulledMinAgeMS),
		Interval: ms(r.Settings.IntervalMS), Truncated: r.Truncated}
	for _, x := range r.Rows {
		out.Rows = append(out.Rows, targets.RetainedRow{UID: x.UID, Seq: x.Seq, MsgID: x.MsgID, ConvID: x.ConvID,
			CreatedAt: time.UnixMilli(x.CreatedAt), DeletedAt: time.UnixMilli(x.DeletedAt), Pulled: x.Reason == "pulled"})
	}
	return out, nil
}

var _ targets.RetentionReader = (*Driver)(nil)
