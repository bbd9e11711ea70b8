package loadgen

import (
	"context"
	"errors"
	"strconv"
	"time"

	"imlab/ledger"
	"imlab/loadgen/device"
	"imlab/loadgen/schedule"
	"imlab/targets"
)

// send is the pacer's handler: one logical send with bounded retries of the
// same client_msg_id, its outcome and latencies recorded.
func (r *runner) send(worker int, t schedule.Tick, started time.Duration) {
	sender, ct, target := r.pick(t.Idx)
	req := targets.SendReq{ClientMsgID: r.runID + "-" + strconv.FormatUint(t.Idx, 10), ConvType: ct, Content: r.content(t.Idx, t.Intended)}
	if ct == 2 {
		req.GroupID = target
	} else {
		req.ToUID = target
	}
	a := ledger.Attempt{Tick: t.Idx, Dev: sender.Idx, ConvType: ct, Target: target, Intended: t.Intended, Started: started}
	l := r.m.lane(worker)
	// The start delay is known now: it goes into the second the send
	// started in, not the one its answer comes in (seconds later on a slow
	// server, which left a burst's own seconds without a start delay).
	l.record(hDelay, started-t.Intended)
	storeMax(&r.m.lastStart, int64(started))
	waited := time.Since(r.start) - started
	l.record(hQueue, waited)
	// Queued past one send timeout (the queued mode behind a slow server):
	// never transmitted, so definitely not stored.
	if waited > r.cfg.Timeout {
		a.Outcome = ledger.Fail
		r.m.notSent.Add(1)
	} else {
		r.tries(sender, &req, &a)
	}
	a.Ended = time.Since(r.start)
	r.count(l, &a)
	sh := r.led.Shard(worker)
	sh.Attempt(a)
	if a.Outcome == ledger.OK && r.convs != nil {
		r.convs.Acked(sender.UID, ct, a.ConvID, a.ConvSeq)
		if r.revokeChosen(t.Idx) {
			r.fleet.OfferRevoke(sender, a.ConvID, a.ConvSeq)
		}
	}
	if a.Outcome == ledger.OK && r.probeChosen(t.Idx) {
		r.wit.Probe(sh, &a, r.probeUIDs(a.Tick, sender.UID, a.ConvType, a.Target))
	}
}

// tries makes the tries of one send until a definite answer, a refusal,
// or the retries or the send's deadline run out, and sets a's tries,
// status, outcome and (on an ACK) the message's place.
func (r *runner) tries(sender *device.Device, req *targets.SendReq, a *ledger.Attempt) {
	deadline := a.Started + r.cfg.Timeout*time.Duration(r.cfg.Retries+2)
	// unknownTry: an earlier try of this send had no definite answer. On
	// a target without idempotent sends that try may have stored a
	// message of its own, so a later definite refusal says nothing of it:
	// the send's outcome is unknown, never failed.
	unknownTry := false
	for {
		a.Tries++
		ack, err := r.sendOnce(sender, a.Tick, req)
		if err == nil {
			a.Outcome, a.Status, a.MsgID, a.ConvID, a.ConvSeq = ledger.OK, 200, ack.MsgID, ack.ConvID, ack.ConvSeq
			return
		}
		var te *targets.Error
		if !errors.As(err, &te) {
			a.Outcome = ledger.Unknown
			return
		}
		a.Status = uint16(te.Status)
		if refusal(err) {
			r.m.refused.Add(1)
		}
		now := time.Since(r.start)
		if te.Class == targets.Retryable && now+te.RetryAfter < deadline && a.Tries < 255 {
			time.Sleep(max(te.RetryAfter, 10*time.Millisecond))
			r.m.retries.Add(1)
			continue
		}
		if te.Class == targets.Failed || te.Class == targets.Retryable {
			a.Outcome = ledger.Fail
			if unknownTry && !r.caps.IdempotentSend {
				a.Outcome = ledger.Unknown
			}
			return
		}
		if int(a.Tries) > r.cfg.Retries || now >= deadline {
			a.Outcome = ledger.Unknown
			return
		}
		unknownTry = true
		r.m.retries.Add(1)
		time.Sleep(time.Duration(a.Tries) * 10 * time.Millisecond)
	}
}

// count adds a's outcome to the run's counters, the second it was
// intended in, and (an ACK) the response and service latencies on lane l.
func (r *runner) count(l *lane, a *ledger.Attempt) {
	sec := r.m.intended(a.Intended)
	if a.Tries > 1 {
		r.m.retried.Add(1)
		if sec != nil {
			sec.retried.Add(1)
		}
	}
	if sec != nil {
		switch a.Outcome {
		case ledger.OK:
			sec.ok.Add(1)
		case ledger.Fail:
			sec.fail.Add(1)
		case ledger.Unknown:
			sec.unknown.Add(1)
		}
	}
	r.e2e.outcome(l, a.Tick, a.Outcome == ledger.OK)
	switch a.Outcome {
	case ledger.OK:
		r.m.ok.Add(1)
		storeMax(&r.m.lastAck, int64(a.Ended))
		l.record(hResponse, a.Ended-a.Intended)
		l.record(hService, a.Ended-a.Started)
	case ledger.Fail:
		r.m.fail.Add(1)
	default:
		r.m.unknown.Add(1)
	}
}

// sendOnce makes one try over the configured transport.
func (r *runner) sendOnce(sender *device.Device, tick uint64, req *targets.SendReq) (targets.SendAck, error) {
	if r.wss == nil {
		return sender.Sess.Send(context.Background(), req)
	}
	s, err := r.wss.Get(sender.UID, int(tick%uint64(r.cfg.WSConnsPerUser)))
	if err != nil {
		return targets.SendAck{}, err
	}
	return s.Send(context.Background(), req, r.cfg.Timeout)
}

// refusal says whether err is the target's answer 401 or 403: it did not
// take the lab's credentials (Summary.Refused).
func refusal(err error) bool {
	var te *targets.Error
	return errors.As(err, &te) && (te.Status == 401 || te.Status == 403)
}
