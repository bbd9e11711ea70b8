// Package checker reads a run's ledger and says, in Jepsen's vocabulary,
// whether the server kept its promises. It owns the definitions below and
// nothing else: it does no I/O beyond reading the ledger and never talks to
// the server.
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
//     server's ack policy.
//
// The whole ledger is read once (evidence.go: ingest) before anything is
// judged, so that no rule depends on the order of the records in the files.
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
//   - a conversation log (convLog): (conversation, conv_seq) -> one message,
//     built from the ACKs; an inbox shows a conversation's messages in
//     conv_seq order;
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
// Each finding is marked by exactly one rule (rules.go: validateX), and the
// rules run in this fixed order, each reading the model only:
//
//   - unexpected: a stored (or witnessed) msg_id that no ACK names and that
//     no send of unknown outcome explains; or a message stored by a device
//     (or held in the inbox of a uid) that is not one of its recipients; or
//     a second msg_id for one send (a retry stored twice); or one msg_id
//     ACKed for two sends.
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
//     (message, device) pairs are counted too. (ok, beside the findings,
//     counts the ACKed messages every recipient device stored at least
//     once.)
//   - skipped: a device claimed cursor C (an ack the server accepted, or an
//     ack frame sent on the WebSocket) while the uid's inbox holds a message
//     at seq ≤ C that this device never stored. The inbox is known from the
//     inbox log, so an entry overwritten after some device saw it still
//     counts.
//   - lost-in-store: an ACKed (or recovered) message missing from the stored
//     inbox of one of its recipient uids, whatever devices got by push or
//     from a cache. Listed per message; (message, uid) pairs counted. Judged
//     only for uids whose store witness was read whole.
//   - unstored-at-ack: a read-after-ACK probe found the store without what
//     the server's ack policy promises at the ACK: strict, the probed uid's
//     inbox row and the msg_content row; store, msg_content; outbox,
//     msg_content and (the mq_outbox row, or the probed uid's inbox row once
//     a consumer has confirmed and the relay removed the outbox row); queue
//     promises nothing stored, so nothing is probed against it.
//
// A run is valid iff every deciding finding is 0: all but duplicated and
// recovered decide (Deciding). Verdict.Judge re-decides with allowances
// (e.g. a scenario that names a degraded window allows some reordered).
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
// Verdict.Checks says for the pull witness, the store witness and
// read-after-ACK whether the check was made, partly made, or not made and
// why (an older ledger, the lab route answering 404, errors). An older
// ledger is judged with what it has.
package checker
