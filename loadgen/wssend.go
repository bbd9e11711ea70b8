package loadgen

import (
	"context"
	"sync"

	"imlab/loadgen/client"
)

// SenderDID is the device id of the WebSocket connections that carry sends
// with --send-via ws.
const SenderDID = "imlab-sender"

// wsSenders holds one sending WebSocket per uid, dialled on first use and
// again after the connection ends. It owns the connections (and, through
// client.Sender, their reader goroutines) and closes them all in Close.
type wsSenders struct {
	ctx   context.Context
	cl    *client.Client
	mu    sync.Mutex
	slots map[uint64]*senderSlot
}

type senderSlot struct {
	mu    sync.Mutex // held while dialling, so one dial per uid at a time
	token string
	s     *client.Sender
}

func newWSSenders(ctx context.Context, cl *client.Client) *wsSenders {
	return &wsSenders{ctx: ctx, cl: cl, slots: map[uint64]*senderSlot{}}
}

// get returns uid's live sender, dialling when there is none.
func (w *wsSenders) get(uid uint64) (*client.Sender, error) {
	w.mu.Lock()
	sl := w.slots[uid]
	if sl == nil {
		sl = &senderSlot{}
		w.slots[uid] = sl
	}
	w.mu.Unlock()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.s != nil {
		select {
		case <-sl.s.Done():
			_ = sl.s.Close()
			sl.s = nil
		default:
			return sl.s, nil
		}
	}
	if sl.token == "" {
		tok, err := w.cl.Token(uid, SenderDID)
		if err != nil {
			return nil, err
		}
		sl.token = tok
	}
	s, err := w.cl.DialSender(w.ctx, sl.token)
	if err != nil {
		return nil, err
	}
	sl.s = s
	return s, nil
}

// Close closes every connection.
func (w *wsSenders) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, sl := range w.slots {
		sl.mu.Lock()
		if sl.s != nil {
			_ = sl.s.Close()
			sl.s = nil
		}
		sl.mu.Unlock()
	}
}
