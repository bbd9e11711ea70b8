// Package history owns the MongoDB bucketed conversation history of seed 004:
// one document per 100 conv_seqs of a conversation (the bucket size is
// configurable and recorded with the data), position addressing
// (doc_id = "{conv_id}:{(conv_seq-1)/size}", slot (conv_seq-1)%size), the
// idempotent update-then-insert writer, reads that fetch only the needed
// slots, the per-message Redis cache, read-time projection for the viewing
// user, revoke, per-user delete, clear-by-watermark and physical delete.
//
// It must not touch MySQL, Kafka or any Redis key other than
// rkeys.HistoryMsg, and it holds no business rule of the send path: it trusts
// that (conv_id, conv_seq) names one message (uk_conv_seq in msg_content).
//
// # Storage layout
//
// Collection "{prefix}_msgs", one document per bucket:
//
//	{_id: "9223372041149743106:3", conv_id: "9223372041149743106", idx: 3,
//	 max_seq: 350, msgs: [slot × size]}
//
// The seed's doc_id is the document's _id: unique by construction, and the
// only filter FerretDB v1 passes down to its storage is an exact
// {_id: "<string>"}; every hot-path filter here is exactly that. (FerretDB's
// SQLite backend serves even that one from an index only with the one the
// lab's compose adds: see README.md.)
// A slot is {msg, revoke, del_list, is_read, v}: msg is the immutable message
// (null until written), revoke {user_id, role, time} is set once by the
// sender, del_list holds the uids that deleted the message for themselves
// (at most Config.DelListMax; past it a per-user record in "{prefix}_deletions"
// takes over), is_read is the 1:1 read flag (one field, on the slot only: the
// seed's duplicated inner IsRead does not exist here), and v counts the
// slot's mutations so that the cache never goes back in time. A physically
// deleted slot is replaced by the string "purged": any later $set of
// msgs.N.msg (a replayed batch) then fails with PathNotViable (code 28) on
// MongoDB and FerretDB alike, and the writer skips that slot, so a purge
// survives replays.
//
// Numbers: conv_id is a uint64 whose bit 63 marks 1:1 conversations, so it is
// stored as its decimal string (in _id and conv_id). msg_id, conv_seq,
// sender_uid and uids are stored as int64 holding the uint64 bit pattern
// (int64(v), read back with uint64()); all of them are below 2^63 in this
// system, so they also sort and compare correctly. Times are unix
// milliseconds (int64).
//
// "{prefix}_meta" holds {_id: "bucket", size}: the bucket size the data was
// written with. New refuses a configured size that differs from the recorded
// one (or, when the meta document is missing, from the length of an existing
// document's msgs array): changing it would re-address every message.
//
// "{prefix}_user_state" holds {_id: "{conv_id}:{uid}", min_seq}: the clear
// watermark, raised with $max in one write; reads start above it.
//
// # Read paths
//
// ReadMode "native" fetches the needed slots with an aggregation
// ($match on _id, $project with $map over the slot list and $arrayElemAt),
// so only those slots cross the wire. FerretDB v1 rejects $map and
// $arrayElemAt (NotImplemented, code 238) and $slice projections, so
// "fallback" fetches the whole bucket by _id and picks the slots in Go.
// "auto" (the default) tries native once and switches to fallback for the
// life of the Store on NotImplemented. The native pipeline is unit-tested
// for its shape only: it has not run against a real mongod here.
package history
