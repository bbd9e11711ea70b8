// Package driver drives a Tinode server as a target of the lab: it maps
// the lab's population, sends, deliveries and end-of-run evidence onto
// Tinode's protocol through the wire client of package tinode.
//
// It owns: provisioning through the protocol (one account per lab uid,
// login "im"+RunHash+"u"+uid, so that runs never collide on a server that
// keeps its accounts; one group topic per lab group, created by its first
// member, the others invited; a p2p topic per pair of users, created by
// the first send between them), the lab's names for Tinode's (conversation
// ids and msg_ids, below), sends with a client tag, device sessions that
// receive pushes and catch up from history, and the history witness
// (every topic read whole at the end into ledger slots, heads and delete
// ranges). It must not start, stop or kill a server, nor talk to a
// server's database: a Tinode is reached only as a client reaches it.
//
// # Names
//
// A conversation id is dense and derived from the population, so every
// process of a run agrees on it without asking the server: group g (the
// lab's group id, index i in the population's groups) is conv i+1; the
// p2p topic of the users at population indexes a < b is conv
// 1 + Groups + a*Users + b. A msg_id is conv<<24 | seq: Tinode numbers
// messages per topic (seq from 1, dense at allocation) and has no global
// message id, so (conv, seq) is the message. A topic past seq 2^24-1 is
// refused by name (MaxSeq).
//
// # What an answer means on Tinode
//
//   - ACK: {ctrl} 202 with the topic's seq. Tinode answers after its
//     store call returned: the message is in the database.
//   - An error answer (4xx, and 5xx too) is a definite failure: Tinode
//     answers only after the store call returned with its error, so the
//     lab holds it to "nothing stored" (failed-but-stored when a copy
//     turns up anyway).
//   - No answer (timeout, connection lost) is an unknown outcome.
//   - No idempotent send: a retry is a new message with a new seq. The
//     tick goes into the message head (tinode.TagHeadKey) and every copy
//     carries it, so the checker tells a retry's second message
//     (retry-duplicate, reported, not deciding) from a loss.
package driver
