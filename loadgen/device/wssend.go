package device

import (
	"context"
	"strconv"
	"sync"

	"imlab/targets"
)

// SenderDID prefixes the device ids of the WebSocket connections that
// carry sends with --send-via ws: connection k of a uid is SenderDID-k.
const SenderDID = "imlab-sender"

// WSSenders holds WSConnsPerUser sending WebSockets per uid (a server
// answers one connection's send frames in order, one at a time), dialled on
// first use and again after the connection ends. It owns the connections (and, through
// targets.Sender, their reader goroutines) and closes them all in Close.
type WSSenders struct {
	ctx   context.Context
	drv   targets.Driver
	mu    sync.Mutex
	slots map[senderKey]*senderSlot
}

type senderKey struct {
	uid uint64
	k   int
}

type senderSlot struct {
	mu   sync.Mutex // held while dialling, so one dial per uid at a time
	sess targets.Session
	s    targets.Sender
}

// NewWSSenders dials through drv; ctx bounds every connection.
func NewWSSenders(ctx context.Context, drv targets.Driver) *WSSenders {
	return &WSSenders{ctx: ctx, drv: drv, slots: map[senderKey]*senderSlot{}}
}

// Get returns uid's live sender k, dialling when there is none.
func (w *WSSenders) Get(uid uint64, k int) (targets.Sender, error) {
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
	if sl.sess == nil {
		sess, err := w.drv.Session(w.ctx, uid, SenderDID+"-"+strconv.Itoa(k))
		if err != nil {
			return nil, err
		}
		sl.sess = sess
	}
	s, err := sl.sess.DialSender(w.ctx)
	if err != nil {
		return nil, err
	}
	sl.s = s
	return s, nil
}

// Close closes every connection.
func (w *WSSenders) Close() {
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
