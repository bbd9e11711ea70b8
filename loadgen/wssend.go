package loadgen

import (
	"context"
	"strconv"
	"sync"

	"imlab/targets/ref/client"
)

// SenderDID prefixes the device ids of the WebSocket connections that
// carry sends with --send-via ws: connection k of a uid is SenderDID-k.
const SenderDID = "imlab-sender"

// wsSenders holds WSConnsPerUser sending WebSockets per uid (a server
// answers one connection's send frames in order, one at a time), dialled on
// first use and again after the connection ends. It owns the connections (and, through
// client.Sender, their reader goroutines) and closes them all in Close.
type wsSenders struct {
	ctx   context.Context
	cl    *client.Client
	mu    sync.Mutex
	slots map[senderKey]*senderSlot
}

type senderKey struct {
	uid uint64
	k   int
}

type senderSlot struct {
	mu    sync.Mutex // held while dialling, so one dial per uid at a time
	token string
	s     *client.Sender
}

func newWSSenders(ctx context.Context, cl *client.Client) *wsSenders {
	return &wsSenders{ctx: ctx, cl: cl, slots: map[senderKey]*senderSlot{}}
}

// get returns uid's live sender k, dialling when there is none.
func (w *wsSenders) get(uid uint64, k int) (*client.Sender, error) {
	w.mu.Lock()
	key := senderKey{uid, k}
	sl := w.slots[key]
	if sl == nil {
		sl = &senderSlot{}
		w.slots[key] = sl
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
		tok, err := w.cl.Token(uid, SenderDID+"-"+strconv.Itoa(k))
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
