// Package checker reads a run's ledger and says, in Jepsen's vocabulary,
// whether the server kept its promises. It owns: the ledger read once (the
// evidence), the account of every msg_id (which send explains it), the
// per-uid inbox logs and per-device logs, the definitions below but the
// conversation model's, the order every rule runs in, and the verdict. The
// conversation model (the conversation log and its per-user views) and its
// findings are package checker/conv's, which this package builds after its
// inbox steps and asks for the rules and views it defines. It must not
// touch: the ledger's files beyond reading them, the server (it never talks
// to one); it does no other I/O.
//
// # Evidence
//
// A "device" is one (uid, did) of the population; a message's recipients
// are both parties of a 1:1 conversation, sender included, or every member
// of the group; a recipient device is every device of a recipient uid. The
// ledger (package ledger) holds:
//   - attempts and their outcomes (ok = ACKed, fail, unknown);
//   - deliveries: what each device stored, by push or pull, in order;
//   - cursors each device claimed;
//   - the pull witness: a full sync/pull of each uid from seq 0 after the
//     final drain by a device outside the population (it may be served from
//     the hot cache);
//   - the store witness: every uid's inbox read from the store of record
//     (MySQL, the lab route, bypassing every cache) after the final drain;
//   - read-after-ACK probes: right after some ACKs, the store read for the
//     sender (and recipients) through the lab route;
//   - notes saying which of the last three could be gathered, and the
//     server's ack policy;
//   - (version 3) the conversation's records (the devices' conversation
//     actions and their answers, the history witness, the target's delete
//     log: package checker/conv's doc) and the server's retention (package
//     checker/retention's doc).
//
// The whole ledger is read once (evidence.go: ingest, which hands the
// conversation's and retention's records to their packages) before
// anything is judged, so that no rule depends on the order of the records
// in the files.
//
// # The model
//
// The model (model.go) is built from the evidence in one fixed order, and
// the rules only read it:
//   - a message's explanation (explain): the ledger accounts for a msg_id
//     by its ACK, or by the send of unknown outcome its content names (the
//     message is then recovered); otherwise it is unexplained;
//   - a per-uid inbox log (inboxLog): (uid, seq) -> one message, each
//     message at most once. Every observation of an inbox entry is put into
//     it (the witnesses' entries in ledger order, then every device's
//     deliveries); put itself reports a seq already holding another message
//     (a seq conflict) and a message already at another seq (double-stored);
//   - the conversations (package checker/conv: the log (conversation,
//     conv_seq) -> one message and the per-user views its actions make),
//     built after the inbox steps; an inbox shows them in conv_seq order;
//   - a per-device log (deviceLog): the first copy of each message a device
//     stored, the repeated copies, and the last conv_seq per conversation
//     in the order the device stored.
//
// An ACK is a promise that the message reaches every recipient's inbox,
// stored as the ACK says (conv_id, conv_seq), with what the ack policy
// promises already stored at the ACK.
//
// # Findings
//
// Each finding is marked by exactly one rule (rules.go: validateX; those
// of package checker/conv or checker/retention by its ValidateX, defined in
// its package doc), and the rules run in this fixed order, each reading the
// model only:
//
//   - unexpected: a stored (or witnessed, or in the history) msg_id that no
//     ACK names and that no send of unknown outcome explains; or a message
//     stored by a device (or held in the inbox of a uid) that is not one of
//     its recipients; or a second msg_id for one send (a retry stored twice,
//     on a target whose send is idempotent, or of a send tried once); or
//     one msg_id ACKed for two sends. A message whose content names a send
//     refused with a definite error is failed-but-stored instead, and a
//     second message of a retried send on a target without idempotent send
//     is retry-duplicate instead.
//   - recovered: a send whose outcome was unknown (timeout, 5xx, connection
//     lost) whose message was stored by some device or witness anyway. Not
//     an anomaly.
//   - double-stored: one msg_id at two seqs of one uid's inbox (what
//     uk_uid_msg forbids), seen in any observation: deliveries, pull
//     witness, store witness. Not a duplicate delivery.
//   - seq-conflict: one (uid, seq) seen holding two msg_ids across all
//     observations (a reused seq). Both msg_ids are listed.
//   - ack-mismatch: a delivery or witnessed entry of an ACKed msg_id whose
//     conv_id or conv_seq differs from the ACK's.
//   - duplicated: a device stored the same (msg_id, seq) more than once.
//     Counted, allowed. A second msg_id for the same send (same
//     client_msg_id, read from the content) is not a duplicate but an
//     unexpected message, and one msg_id at two seqs is double-stored.
//   - reordered: within one device and one conversation, after dropping
//     repeated msg_ids, the conv_seq of the messages in the order the device
//     stored them does not strictly increase; or, within one witnessed
//     inbox (pull or store witness) and one conversation, conv_seq does not
//     strictly increase in seq order.
//   - lost: an ACKed message (or a recovered one) that some recipient
//     device never stored, after the final drain. Listed per message; the
//     (message, device) pairs are counted too. When the run's inbox-tier
//     note says the tier (queue, outbox) had not drained by the end of the
//     final drain, each says it may be late rather than lost; it still
//     counts, since it never arrived within the run. On a target with a
//     delete log (Tinode), a device's miss of a message deleted for its uid
//     (revoked there for everyone, or deleted or cleared by that uid) is
//     excused only when the delete was sent before the read that should
//     have carried the message to that device: the device's first copy of
//     a later conv_seq of the conversation (a device reads a conversation
//     only from the next conv_seq it holds, so by then it had read this
//     one), or, when it stored none, the end of the run's drain (dated by
//     the history witness's first read; a ledger without one does not date
//     it, and any delete of the run excuses). A delete sent after that read
//     leaves the message lost, and a range of the delete log alone excuses
//     nothing: it says the conv_seq was deleted by the end of the run, not
//     when. Nor is a miss of a row retention deleted before the device
//     was known (GoneBeforeKnown). (ok: ACKed messages all devices stored.)
//   - skipped: a device claimed cursor C (an ack the server accepted, or an
//     ack frame sent on the WebSocket) while the uid's inbox holds a message
//     at seq ≤ C that this device never stored. The inbox is known from the
//     inbox log, so an entry overwritten after some device saw it still
//     counts; one retention deleted before the device was known does not.
//   - lost-in-store: an ACKed (or recovered) message missing from the stored
//     inbox of one of its recipient uids, whatever devices got by push or
//     from a cache. Listed per message; (message, uid) pairs counted. Judged
//     only for uids whose store witness was read whole, and not for a row
//     the server's retention says it deleted (the retention findings judge
//     that deletion).
//   - unstored-at-ack: a read-after-ACK probe found the store without what
//     the server's ack policy promises at the ACK: strict, the probed uid's
//     inbox row and the msg_content row; store, msg_content; outbox,
//     msg_content and (the mq_outbox row, or the probed uid's inbox row once
//     a consumer has confirmed and the relay removed the outbox row); queue
//     promises nothing stored, so nothing is probed against it. A missing
//     inbox row that retention's log says was deleted before the probe's
//     answer came is no finding (a late probe after an early deletion).
//   - history-lost: defined in package checker/conv.
//   - delete-log-dropped: defined in package checker/conv.
//   - history-mismatch: defined in package checker/conv.
//   - history-overwritten: defined in package checker/conv.
//   - history-duplicated: defined in package checker/conv.
//   - history-view: defined in package checker/conv.
//   - conv-pull: defined in package checker/conv.
//   - retention-unpulled: defined in package checker/retention.
//   - retention-early: defined in package checker/retention.
//   - failed-but-stored: a send answered with a definite error (a refusal,
//     no try of it of unknown outcome) whose message a device stored, a
//     witness saw or the history holds anyway: failure must mean that
//     nothing happened, or the answer must say unknown.
//   - refused-after-heal: defined in package checker/conv.
//   - unexplained-gap: defined in package checker/conv.
//   - retry-duplicate: on a target without idempotent send, a send retried
//     (more than one try) that the server stored as more than one message,
//     told apart by the client tag every copy carries. Reported plainly and
//     never counted as lost or unexpected, but it does not decide validity:
//     the target does not promise a retry is stored once (its capabilities
//     say so), and a verdict holds a server to what it promises; the copies
//     are listed for whoever judges that promise missing.
//
// A run is valid iff every deciding finding is 0: all but duplicated,
// recovered and retry-duplicate decide (Deciding). Verdict.Judge re-decides with allowances
// (e.g. a scenario that names a degraded window allows some reordered).
//
// # Targets
//
// What every target shares is the conversation: an ordered log
// (conversation, conv_seq) -> message. The reference server adds a
// per-user inbox log with a sync pull and per-device cursors. The ledger's
// header states what the target offers (ledger.Capabilities; absent: the
// reference): without an inbox (Tinode: per-topic seq, per-(user, topic)
// read marks, catch-up by "get data since"), the inbox log is not built,
// the inbox check and the pull witness, store witness and read-after-ACK
// checks are not exercised, and skipped, double-stored, seq-conflict,
// lost-in-store and unstored-at-ack are NOT MADE with that reason, while
// lost, duplicated, unexpected, recovered, reordered and ack-mismatch (per
// device and conversation) and every conversation finding are made. Without
// idempotent send (the retries check), a second message of a retried send
// is retry-duplicate instead of unexpected. An action the target does not
// offer leaves its check not exercised.
//
// Followed messages (Options.Follow: msg_ids named from outside the
// ledger, e.g. the ones forward reconciliation repaired) are each, by the
// definitions above, delivered (ACKed or recovered, stored by every
// recipient device in the end, however late), lost (in the lost finding)
// or unexplained (no ACK and no send of unknown outcome names them);
// Verdict.Followed counts them and says how late the delivered ACKed ones
// reached their last recipient device. Following decides nothing.
//
// A check whose evidence is absent is named, never silently passed:
// Verdict.Checks says for each piece of evidence (pull witness, store
// witness, read-after-ACK, history witness, history pages, conversation
// pulls, retention, the target's inbox and retries, the liveness bound)
// whether the check was made, partly made, or not made and
// why (an older ledger, the lab route answering 404, a history not drained,
// errors). A check not made because the run did not exercise what it judges
// (the target does not offer it, the run did none of it, the ledger
// predates its records) says so (Unexercised) and is no gap in the evidence
// (Unmade leaves it out); a finding no made check feeds says why in its
// NotMade and its count of 0 says nothing; one a partly made check feeds
// is in JudgedPartly. An older ledger is judged with what it has.
package checker
