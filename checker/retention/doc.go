// Package retention judges the server's retention of inbox rows (ledger
// version 3: every row it deleted, and the settings in force). It owns: the
// retention records as the ledger said them (Evidence), what retention had
// deleted by when (Retained, RetainedMsg, RetainedMsgBy: the inbox rules of
// package checker ask it, since a deleted row is no loss), the devices'
// acknowledged cursors by time, when the target had heard of each device,
// and the findings below, each marked by one rule (ValidateX) that package
// checker runs at its place in the one fixed order its package doc lists. It must not touch: the ledger's files
// (package checker reads them and hands each record to Evidence.Ingest),
// the inbox, device and conversation models, the verdict; it does no I/O
// and imports no imlab package but ledger.
//
// The ledger (version 3) holds the server's retention: every inbox row it
// deleted (uid, seq, msg_id, created, deleted, pulled or expired) and its
// settings; and each device's first contact (ledger.KindContact: the
// generator makes every device known before the load, as a real client
// registers its device before it ever goes offline). A ledger without
// contacts (older generators) shows a device known from its first delivery,
// accepted acknowledgement or answered conversation pull.
//
// # Findings
//
// In the order they run:
//
//   - retention-unpulled: a row retention deleted, younger than its maximum
//     age, while some device of its uid had not acknowledged a cursor at or
//     past it (AckInFlight allows for an acknowledgement in flight). Only a
//     device the ledger shows known to the target by the deletion counts:
//     the server's rule waits for the devices it has heard of, and a device
//     first heard of after the deletion (an offline device whose first visit
//     a slow run put late) would otherwise fail a correct server. A
//     device away during an early-deletion pass that then misses the row
//     is also lost (the lost finding covers "it still receives everything").
//   - retention-early: a row retention deleted younger than its rules
//     allow: younger than the pulled minimum age whatever the reason, or
//     younger than the maximum age as expired.
package retention
