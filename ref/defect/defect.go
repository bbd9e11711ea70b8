// Package defect names the reference server's shipped defects: bugs put
// on purpose into the package where each would really live (ref/pull,
// ref/inbox, ref/hotcache, ref/send, ref/fanout, ref/schema, ref/history,
// ref/retention), so that the
// lab can prove it fails a broken server. They are negative controls,
// like the unsafe queue policy: `imlab scenario selftest` runs the
// scenario library once per defect and shows which scenario caught it.
//
// A Set is a value: it is passed through each package's Config (never
// package-level state), is empty by default, and is enabled only by a
// lab-only switch (`imlab ref --defect NAME --lab-defects`; the scenario
// runner's Config.Defects). Each package asks Has(name) at the one place
// the bug lives.
//
// This package owns the names, their documentation and the Set type. It
// must not import other imlab packages or do I/O.
package defect

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The shipped defects. Each constant's comment says where the bug lives
// and what it does; List gives the same in one line each.
const (
	// CursorOnPull (ref/pull): the device's cursor is advanced when a page
	// is served instead of when the device acks it, so a device that
	// crashes before it processed the page never gets it again.
	CursorOnPull = "cursor-on-pull"
	// SeqReuse (ref/inbox): the writer trusts the allocator: a proposal at
	// or below the fence is not refused, and a (uid, seq) collision
	// overwrites the stored row (ON DUPLICATE KEY UPDATE), so after an
	// allocator rollback a seq is reused and the older message is gone
	// from that inbox.
	SeqReuse = "seq-reuse-after-rollback"
	// InboxRowDropped (ref/inbox): about one in 16 inbox rows is left out
	// of the INSERT while the writer still returns its entry, so the hot
	// cache and push deliver a message MySQL does not hold.
	InboxRowDropped = "inbox-row-dropped"
	// AckBeforeCommit (ref/send): the strict policy answers the batch's
	// sends before its COMMIT; a commit that then fails (a reset
	// connection) loses ACKed messages, and a read right after the ACK may
	// not find the sender's own row.
	AckBeforeCommit = "ack-before-commit"
	// ZSetShortPage (ref/hotcache): a ZSet read says "covered" whatever
	// its floor, so a page is served from the ZSet although it does not
	// reach down to the cursor: a device further behind than the hot window
	// (200 per uid) skips what lies between.
	ZSetShortPage = "zset-short-page"
	// RetryStoredTwice (ref/send): a retry is not recognised: the
	// in-process dedupe is bypassed and client_msg_id is stored made unique
	// per message, so uk_sender_client never matches and a retry (same
	// client_msg_id) after a committed send is stored as a second message.
	RetryStoredTwice = "retry-stored-twice"
	// ConvSeqOrder (ref/send): the strict policy hands a batch's inbox rows
	// to the writer newest first, so messages of one conversation in one
	// batch get per-user seqs out of conv_seq order.
	ConvSeqOrder = "conv-seq-out-of-order"
	// InboxRowTwice (ref/schema + ref/inbox): offline_msg has no
	// uk_uid_msg key (the migration drops it) and the writer's
	// already-delivered lookup trusts that key, so a redelivered record
	// writes the recipient's row again under a second seq.
	InboxRowTwice = "inbox-row-twice"
	// ConsumerSkips (ref/fanout): the inbox tier's consumer acknowledges
	// about one record in 8 without writing its rows. Forward
	// reconciliation repairs them later: a scenario that lets repairs run
	// early hides the loss; one that runs them late catches it.
	ConsumerSkips = "consumer-skips-records"

	// HistoryDocIndexOffByOne (ref/history, Layout.DocIndex): the bucket of
	// a conv_seq is computed as seq/size, the seed's "-1" dropped (the slot
	// keeps (seq-1)%size), so the last message of every bucket (conv_seq
	// 100, 200, ...) is stored in the last slot of the next bucket, the
	// position of conv_seq+100. Reads go through the same address, so
	// history pages look right; the store is misaddressed (seq 100's slot
	// is empty, another position holds it), which any reader using the
	// seed's layout — a fixed release, a migration, the lab's history
	// witness — reads as a lost message.
	HistoryDocIndexOffByOne = "history-doc-index-off-by-one"
	// HistoryInsertSlotShift (ref/history, the whole-document insert): the
	// insert that creates a bucket places each of its messages at
	// seq%size instead of (seq-1)%size, one slot up. The first message of
	// a new bucket (conv_seq 1, 101, ...) then sits in the slot of the
	// next conv_seq, whose update overwrites it: the message is gone from
	// the history and its own slot reads as a hole. (A bucket created with
	// several messages at once holds each one slot up; reading those seqs
	// fails on the mismatch until the next updates overwrite them.)
	HistoryInsertSlotShift = "history-insert-slot-shift"
	// RevokeShownToRevokerOnly (ref/history, read-time projection): the
	// revoke layer is applied like a per-user tag, only for the viewer who
	// revoked: every other member still sees the revoked message's
	// content.
	RevokeShownToRevokerOnly = "revoke-shown-to-revoker-only"
	// DeleteHidesForEveryone (ref/history, read-time projection): a
	// non-empty del_list hides the message from every viewer, not only
	// from the uids in it: one member's delete-for-me deletes it for the
	// whole conversation.
	DeleteHidesForEveryone = "delete-hides-for-everyone"
	// ConvPullAcksCursor (ref/pull, ConvPull): entering a conversation
	// acknowledges the device's cursor up to the conversation page's last
	// seq (as if reading a conversation read the inbox up to there), so
	// messages of other conversations below it are skipped by the next
	// pull from the stored cursor.
	ConvPullAcksCursor = "conv-pull-acks-cursor"
	// ConvPullCursorInclusive (ref/pull, ConvPull): the conversation page
	// is read with seq >= cursor instead of seq > cursor, so the row at the
	// cursor comes back on every next page.
	ConvPullCursorInclusive = "conv-pull-cursor-inclusive"
	// RetentionMostAdvancedDevice (ref/retention): early deletion asks
	// whether "the user" pulled a row by the highest cursor among the
	// user's devices, so a row one device acknowledged is deleted while
	// another device of the user has not pulled it.
	RetentionMostAdvancedDevice = "retention-most-advanced-device"
	// RetentionExpiryFromPulledAge (ref/retention): the expiry cutoff is
	// computed from PulledMinAge (the early-deletion grace) instead of
	// MaxAge, so rows go after the grace whatever the cursors say: a
	// device away for longer than the grace loses what it had not pulled.
	RetentionExpiryFromPulledAge = "retention-expiry-from-pulled-age"

	// RedisDedupMarkBeforeCommit (ref/fanout, the redis dedup strategy):
	// the check is the seed's SET NX EX itself, run inside the inbox
	// transaction before its COMMIT ("claim the message, then write it"),
	// instead of EXISTS before and SET after COMMIT. A transaction that
	// then fails (a reset connection, a timeout, a consumer killed
	// mid-batch) leaves the marks behind, so the redelivered record finds
	// them, is taken as already delivered and is acknowledged unwritten.
	RedisDedupMarkBeforeCommit = "redis-dedup-mark-before-commit"
	// MQDedupOutsideTx (ref/fanout, the mq_dedup strategy): the dedup rows
	// are inserted on their own autocommitted connection instead of inside
	// the inbox transaction, so an inbox transaction that fails after them
	// leaves rows that say "delivered": the redelivery skips the message.
	MQDedupOutsideTx = "mq-dedup-outside-tx"
	// DLQBeforeTransientWindow (ref/fanout, Consumer.one): a delivery
	// failing with a transient error is dead-lettered once MaxAttempts are
	// spent (under two seconds of backoff) whatever the transient window:
	// a store outage shorter than the window dead-letters records that
	// waiting would have written, leaving holes until they are repaired.
	DLQBeforeTransientWindow = "dlq-before-transient-window"
	// DLQAbandonsBatch (ref/fanout, Consumer.processBatch): once one
	// delivery of a failed batch is dead-lettered, the rest of the batch is
	// given up with it but not dead-lettered: its offsets are marked, so
	// those records are neither written nor in the dead-letter topic.
	DLQAbandonsBatch = "dlq-abandons-batch"
)

// Info describes one defect.
type Info struct {
	Name  string `json:"name"`
	Where string `json:"where"`
	What  string `json:"what"`
}

var catalog = []Info{
	{CursorOnPull, "ref/pull", "the cursor advances when a page is served, not when it is acked: a device that crashes before processing it never gets it again"},
	{SeqReuse, "ref/inbox", "allocator proposals at or below the fence are accepted and a (uid, seq) collision overwrites the row: after a rollback a seq is reused"},
	{InboxRowDropped, "ref/inbox", "about 1 in 16 offline_msg rows is left out of the INSERT while the hot cache and push still deliver it"},
	{AckBeforeCommit, "ref/send", "strict answers the batch before COMMIT: a failed commit loses ACKed sends; a read right after the ACK can miss the row"},
	{ZSetShortPage, "ref/hotcache", "a ZSet read is served although the set does not reach down to the cursor (its floor is ignored)"},
	{RetryStoredTwice, "ref/send", "a retry with the same client_msg_id after a committed send is stored as a second message"},
	{ConvSeqOrder, "ref/send", "a batch's inbox rows are written newest first: per-user seqs out of conv_seq order within a conversation"},
	{InboxRowTwice, "ref/schema, ref/inbox", "offline_msg lacks uk_uid_msg and the writer trusts it: a redelivered record is written again under a second seq"},
	{ConsumerSkips, "ref/fanout", "the inbox consumer acknowledges about 1 record in 8 without writing it; only forward reconciliation puts it back"},
	{HistoryDocIndexOffByOne, "ref/history", "a conv_seq's bucket is seq/size (the -1 dropped): conv_seq 100, 200, ... are stored at the position of conv_seq+100; pages look right, the store is misaddressed"},
	{HistoryInsertSlotShift, "ref/history", "the bucket-creating insert places messages one slot up (seq%size): the first message of each new bucket is overwritten by the next one"},
	{RevokeShownToRevokerOnly, "ref/history", "a revoke is projected for the revoker only: every other member still sees the content"},
	{DeleteHidesForEveryone, "ref/history", "a delete-for-me hides the message from every member, not only the deleter"},
	{ConvPullAcksCursor, "ref/pull", "a conversation pull acknowledges the device's cursor to its last seq: other conversations' messages below it are skipped"},
	{ConvPullCursorInclusive, "ref/pull", "a conversation pull reads seq >= cursor: the row at the cursor comes back on the next page"},
	{RetentionMostAdvancedDevice, "ref/retention", "early deletion goes by the user's most advanced device: a row one device acknowledged is deleted before another pulled it"},
	{RetentionExpiryFromPulledAge, "ref/retention", "rows expire after the pulled grace instead of the retention window: a device away longer than the grace loses unpulled rows"},
	{RedisDedupMarkBeforeCommit, "ref/fanout", "the redis dedup mark is set (SET NX) inside the inbox transaction before COMMIT: a failed transaction's redelivery is skipped"},
	{MQDedupOutsideTx, "ref/fanout", "mq_dedup rows are inserted outside the inbox transaction: a failed transaction's redelivery is skipped"},
	{DLQBeforeTransientWindow, "ref/fanout", "a transient failure is dead-lettered after MaxAttempts, not after the transient window: a short outage dead-letters records"},
	{DLQAbandonsBatch, "ref/fanout", "after one dead letter the rest of its failed batch is marked done: neither written nor dead-lettered"},
}

// List is every shipped defect, by name.
func List() []Info {
	out := slices.Clone(catalog)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names is every shipped defect's name, sorted.
func Names() []string {
	var out []string
	for _, d := range List() {
		out = append(out, d.Name)
	}
	return out
}

// Known tells whether name is a shipped defect.
func Known(name string) bool {
	return slices.ContainsFunc(catalog, func(d Info) bool { return d.Name == name })
}

// ErrUnknown is wrapped by Parse for a name that is not a shipped defect.
var ErrUnknown = errors.New("defect: unknown defect")

// ErrNotLab is wrapped by Enable when defects are asked for without the
// lab switch.
var ErrNotLab = errors.New("defect: defects are refused without the lab switch")

// Set is a set of enabled defects. The zero value is empty (a correct
// server). It is immutable: share it freely.
type Set struct{ names []string } // sorted, unique

// Parse builds a Set from names (each may be a comma-separated list);
// an unknown name is an error naming the known ones.
func Parse(names ...string) (Set, error) {
	var s Set
	for _, arg := range names {
		for _, n := range strings.Split(arg, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if !Known(n) {
				return Set{}, fmt.Errorf("%w %q: want one of %s", ErrUnknown, n, strings.Join(Names(), ", "))
			}
			if !slices.Contains(s.names, n) {
				s.names = append(s.names, n)
			}
		}
	}
	sort.Strings(s.names)
	return s, nil
}

// Enable is Parse for a command line: any defect without lab (the
// lab-only switch) is refused with ErrNotLab.
func Enable(lab bool, names ...string) (Set, error) {
	s, err := Parse(names...)
	if err != nil {
		return Set{}, err
	}
	if !s.Empty() && !lab {
		return Set{}, fmt.Errorf("%w: %s would make this server lose or misorder messages on purpose; add the lab switch only on a lab instance",
			ErrNotLab, strings.Join(s.names, ", "))
	}
	return s, nil
}

// Has tells whether the defect name is enabled.
func (s Set) Has(name string) bool { return slices.Contains(s.names, name) }

// Empty tells whether no defect is enabled.
func (s Set) Empty() bool { return len(s.names) == 0 }

// Names are the enabled defects, sorted.
func (s Set) Names() []string { return slices.Clone(s.names) }

// String is the comma-separated names ("" when empty).
func (s Set) String() string { return strings.Join(s.names, ",") }

// Sampled tells whether the defects that act on "about 1 in n" items act
// on the item with this key (a deterministic spread, so a run is
// reproducible).
func Sampled(key uint64, n uint64) bool {
	key ^= key >> 33
	key *= 0xff51afd7ed558ccd
	key ^= key >> 33
	return n > 0 && key%n == 0
}
