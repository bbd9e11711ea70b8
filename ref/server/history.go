package server

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"imlab/ref/api"
	"imlab/ref/history"
	"imlab/ref/hotcache"
	"imlab/ref/model"
)

// Routes beside the contract's history routes, mounted with history.
const (
	// PurgePath is the admin physical delete: {"conv_id","conv_seq"} -> {};
	// only for uids in Config.AdminUIDs (403 otherwise). conv_id is a
	// number or a string of its digits (api.ID), as on every route.
	PurgePath = "/v1/admin/msg/purge"
	// ReadPath marks a 1:1 range read for the caller:
	// {"conv_id","from_seq","to_seq"} -> {} (conv_id as for PurgePath;
	// idempotent): every message of the range the other party sent is
	// marked; 503 and nothing marked when a conv_seq of the range is
	// committed but not in the history yet (history.Service.MarkRead).
	ReadPath = "/v1/msg/read"
)

// historyPart is the process's history: the MongoDB client, the bucketed
// store (the history tier writes it) and the service (the routes read it).
type historyPart struct {
	client *mongo.Client
	store  *history.Store
	svc    *history.Service
}

// startHistory connects to MongoDB and builds the store (checking or
// recording the bucket size) and the service.
func (p *Process) startHistory(ctx context.Context) error {
	mc := p.Cfg.Mongo
	cctx, cancel := context.WithTimeout(ctx, mc.ConnectTimeout)
	defer cancel()
	cl, err := mongo.Connect(cctx, options.Client().ApplyURI(p.Backends.MongoURI).
		SetMaxPoolSize(mc.MaxPoolSize).SetConnectTimeout(mc.ConnectTimeout).SetServerSelectionTimeout(mc.ConnectTimeout))
	if err != nil {
		return fmt.Errorf("%w: server: mongo connect: %v", model.ErrUnavailable, err)
	}
	p.onStop("mongo", func(ctx context.Context) error { return cl.Disconnect(ctx) })
	if err := cl.Ping(cctx, nil); err != nil {
		return fmt.Errorf("%w: server: mongo ping: %v", model.ErrUnavailable, err)
	}
	st, err := history.New(ctx, cl.Database(mc.Database), p.Cfg.History)
	if err != nil {
		return fmt.Errorf("server: history store: %w", err)
	}
	cr, err := hotcache.CacheRequests(p.Registry)
	if err != nil {
		return err
	}
	svc, err := history.NewService(st, history.Deps{
		Redis: p.Redis, Keys: p.Keys,
		Members:       membership{p},
		ConvSeqs:      membership{p},
		CacheRequests: cr,
	})
	if err != nil {
		return fmt.Errorf("server: history service: %w", err)
	}
	p.hist = &historyPart{client: cl, store: st, svc: svc}
	return nil
}

// HistoryService is the process's history service (nil without MongoDB).
func (p *Process) HistoryService() *history.Service {
	if p.hist == nil {
		return nil
	}
	return p.hist.svc
}

// membership answers group membership (cached) and a conversation's
// highest conv_seq from the process's send service.
type membership struct{ p *Process }

func (m membership) IsMember(ctx context.Context, convID, uid uint64) (bool, error) {
	c, err := m.p.Core(m.p.baseCtx)
	if err != nil {
		return false, err
	}
	return c.Send.IsMember(ctx, convID, uid)
}

func (m membership) MaxConvSeq(ctx context.Context, convID uint64) (uint64, error) {
	c, err := m.p.Core(m.p.baseCtx)
	if err != nil {
		return 0, err
	}
	return c.Send.MaxConvSeq(ctx, convID)
}

// historyExtraRoutes are the admin purge and the read flag.
func (p *Process) historyExtraRoutes() []api.Route {
	svc := p.hist.svc
	admins := slices.Clone(p.Cfg.AdminUIDs)
	return []api.Route{
		{Method: "POST", Path: PurgePath, Name: "admin_purge", Handle: func(ctx context.Context, c api.Caller, r *api.Request) (any, error) {
			if !slices.Contains(admins, c.UID) {
				return nil, fmt.Errorf("%w: physical delete is for admin uids only", model.ErrForbidden)
			}
			if _, err := r.Query(); err != nil {
				return nil, err
			}
			var b struct {
				ConvID  api.ID  `json:"conv_id"`
				ConvSeq *uint64 `json:"conv_seq"`
			}
			if err := r.DecodeJSON(&b); err != nil {
				return nil, err
			}
			conv := uint64(b.ConvID)
			if _, _, _, err := model.ParseConvID(conv); err != nil {
				return nil, err
			}
			if b.ConvSeq == nil || *b.ConvSeq == 0 {
				return nil, fmt.Errorf("%w: conv_seq (>= 1) is required", model.ErrInvalid)
			}
			p.Log.Info("server: admin physical delete", "admin_uid", c.UID, "conv_id", conv, "conv_seq", *b.ConvSeq)
			return struct{}{}, svc.PhysicalDelete(ctx, conv, *b.ConvSeq)
		}},
		{Method: "POST", Path: ReadPath, Name: "msg_read", Handle: func(ctx context.Context, c api.Caller, r *api.Request) (any, error) {
			if _, err := r.Query(); err != nil {
				return nil, err
			}
			var b struct {
				ConvID  api.ID  `json:"conv_id"`
				FromSeq *uint64 `json:"from_seq"`
				ToSeq   *uint64 `json:"to_seq"`
			}
			if err := r.DecodeJSON(&b); err != nil {
				return nil, err
			}
			conv := uint64(b.ConvID)
			if _, _, _, err := model.ParseConvID(conv); err != nil {
				return nil, err
			}
			if b.FromSeq == nil || b.ToSeq == nil || *b.FromSeq == 0 || *b.ToSeq < *b.FromSeq {
				return nil, fmt.Errorf("%w: from_seq >= 1 and to_seq >= from_seq are required", model.ErrInvalid)
			}
			return struct{}{}, svc.MarkRead(ctx, c.UID, conv, *b.FromSeq, *b.ToSeq)
		}},
	}
}
