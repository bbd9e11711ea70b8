// Package conv is the checker's conversation model and the rules judged
// against it. It owns: the conversation records of the ledger as they said
// them (Evidence: conversation pulls, history pages, revokes, deletes,
// clears, mark-reads, the history witness, the target's delete log); per
// conversation, the log (conversation, conv_seq) -> one message and the
// per-user views its actions make; and the findings defined below, each
// marked by one rule (ValidateX), which package checker runs at its place in
// the one fixed order its package doc lists, and the checks of that
// evidence (Checks: history witness, delete log, history pages,
// conversation pulls). It must not touch: the ledger's files (package
// checker reads them and hands each record to Evidence.Ingest), the inbox
// and device models and the account of messages (what explains a msg_id,
// the sends, a uid's inbox log, what retention deleted: it asks package
// checker through Ledger), the verdict; it does no I/O and imports no
// imlab package but ledger.
//
// # Evidence
//
// The ledger (version 3) holds, beside what package checker reads:
//   - the devices' conversation actions and their answers:
//     conversation pulls, history pages, revokes, deletes for oneself,
//     clears, mark-reads, each with its [start, end] and its outcome;
//   - the history witness: the conversation history as stored,
//     without projection, read after the final drain (every stored conv_seq
//     with its msg_id, sender, content tag, revoked, purged, is_read and
//     del_list; every clear watermark), and its note, which must say that
//     the history tier had drained before the read;
//   - on a target with a delete log (Tinode), that log read after the
//     final drain: ranges of conv_seqs deleted for everyone or for one uid.
//
// # The model
//
// The model is built after package checker's inbox steps, in one fixed
// order: each ACKed message at its conv_seq (Ack, by msg_id), then each
// recovered message where its copies put it (Recovered); then (Build) the
// effects; the delete ranges; the history witness (its slots into the
// conversation logs, each message it holds told to the ledger); the
// history pages (their messages into the logs); on a target without an
// inbox, the conversation pulls (their entries into the logs). The rules
// only read it.
//
// A conversation (conversation, conv.go) is its log (convLog, model.go), the
// message the model puts at each conv_seq (the ACK's; else a recovered
// message where its copies put it), and the actions that change how a user
// sees it: a revoke (for everyone), a delete-for-me, a clear (hides
// conv_seqs at or below the min_seq it answered) and a mark-read (for the
// recipient of a 1:1 message). An action answered 2xx that ended before a
// read began must show in it; one refused (4xx) never does; one unanswered
// (timeout, 5xx), or answered but overlapping the read, may or may not
// (holds: yes, perhaps, no); one that started after the read ended must not.
// A mark-read must show only on messages a page showed before it began (it
// marks what the history holds at the time).
//
// A conversation's log reports a conv_seq holding a second message
// (history-overwritten) and a message at a second conv_seq
// (history-duplicated). A user's view of a conversation over a read's
// [start, end] is the log with what that user cleared or deleted, a revoke
// on a target where it is a delete for everyone, and a purge hidden
// (mayHide); on a target with a delete log a device reads a conversation
// only from the next conv_seq it holds (readpast.go), so a delete hides a
// message from a device only if it was sent before that read (HiddenFrom,
// which package checker's lost asks).
//
// # Findings
//
// In the order they run:
//
//   - history-lost: an ACKed (or recovered) message whose conv_seq the
//     history store holds nothing for, and no delete range covers, once the
//     history tier has drained (history witness). A purged slot is a
//     physical delete, not a loss. On a target with a delete log, a
//     conv_seq a deletion answered ok covers that the log left out is
//     delete-log-dropped instead: the witness reads a conversation as one
//     of its members, whose history honours that member's deletes, so the
//     message's absence may be the deletion's, and what is wrong is the
//     log.
//   - delete-log-dropped: on a target with a delete log (Tinode), a
//     deletion answered ok before the history witness read the log that
//     the log does not hold as the uid it applies to reads it (ranges for
//     everyone or for that uid): a delete for oneself (that uid's log), a
//     clear (that uid's log, the messages at conv_seqs up to the min_seq it
//     answered), a revoke, a delete for everyone there (every member's log:
//     a range for everyone). Told apart from a lost message by the answered deletion
//     that covers it: without one, a conv_seq missing from the history and
//     from the log is history-lost. As with the delete ranges, the witness
//     does not name the member it read as, so a dropped deletion by any
//     member covers a message missing from its read. Judged for the
//     conversations the history witness judges (check delete-log).
//   - history-mismatch: a message the history store holds at its conv_seq
//     with another sender or content tag, or in a state no action explains
//     at the time of the read: revoked (or not) when a revoke must not (or
//     must) show; a uid in its del_list who never deleted it, or one missing
//     whose delete was answered; is_read against the recipient's
//     mark-reads; or a uid's clear watermark below the min_seq a clear
//     answered, or above every answer with no clear unanswered (counted per
//     conversation and uid).
//   - history-overwritten: one (conversation, conv_seq) seen holding two
//     msg_ids across the ACKs, the history witness and the pages read (both
//     are listed).
//   - history-duplicated: one msg_id seen at two conv_seqs of a
//     conversation across the same.
//   - history-view: a history page a device read that does not show the
//     model as that user sees it over the page's [start, end]: items out of
//     conv_seq order or outside the range asked; a message shown that the
//     user cleared (at or below the min_seq) or deleted, with another sender
//     or content, revoked when no revoke may show or not revoked when one
//     must, showing a revoked message's content, or is_read against the
//     recipient's mark-reads; a message hidden (a tombstone, or left out
//     between items shown) that was ACKed before the page began and that no
//     delete or clear of that user (nor, on a target with a delete log, a
//     revoke) sent before the page ended, and no purge, may hide; a range
//     of the delete log alone hides nothing (the action that made it must
//     have been sent by then).
//     Other users' actions change nothing but revokes. Holes (tombstones)
//     where no ACK carries the conv_seq are allowed.
//   - conv-pull: a conversation pull that is not exactly the
//     conversation's entries of the uid's inbox above its cursor: an entry
//     at or below the cursor, out of seq order, past the limit, or of
//     another conversation; an entry of the conversation above the cursor
//     (and below the page's last seq, or any when has_more is false) that a
//     read of the store (a pulled delivery, an earlier conversation pull)
//     showed before the page began and retention had not deleted by its
//     end, left out; a next_cursor other than its last seq; or the device's
//     sync cursor, read just before and after the page, moved. Its entries
//     are also observations of the inbox log (seq-conflict, double-stored,
//     ack-mismatch, unexpected judge them). On a target without an inbox
//     the pull reads the conversation above a conv_seq cursor, and is
//     judged the same in conv_seqs against the conversation: an ACKed
//     message above the cursor, ACKed before the page began, is left out
//     though nothing the uid did (nor a delete for everyone) sent before
//     the page ended may hide it.
//   - refused-after-heal: liveness, judged when the run states when its last
//     fault healed and a bound (package checker's Options.Liveness, given
//     by Model.Liveness): a conversation that kept refusing sends (failed,
//     or unanswered) from the heal on, past the bound: no send to it was
//     accepted from the heal until one started more than the bound after
//     the heal was refused. Counted in refused
//     sends past the bound; its conversations listed.
//   - unexplained-gap: in a conversation the history witness read whole, a
//     conv_seq up to the highest known (the server's head, the highest
//     stored, the highest ACKed) that holds no message, where the model has
//     none and no delete range covers it, beyond as many such conv_seqs as
//     the conversation has sends of unknown outcome whose message was never
//     found (each may have taken a conv_seq and stored nothing). A send
//     refused with a definite error explains no gap. Counted in conv_seqs.
package conv
