// Package tinode is the lab's client of Tinode (github.com/tinode/chat), a
// third-party IM server, over its JSON-over-WebSocket protocol, written
// from the protocol's public API document (docs/API.md of that project)
// and nothing else: no code of the server is copied, linked or vendored.
//
// It owns the protocol: one Session per connection ({hi} handshake with
// version, user agent and device id; the API key on the upgrade), request
// ids and the matching of answers to requests, the classification of every
// result (OutcomeOf: ok, failed, unknown), paging, and the typed values the
// lab reads (PubAck, Data, History, DelLog, TopicDesc, Member). It must not
// know the lab's generator, ledger, checker or scenarios, start or stop a
// server, or talk to a server's database: the lab sees Tinode only as a
// client would.
//
// # Protocol subset
//
//   - {hi} ver/ua/dev → {ctrl} 201 with params.ver and the server's limits.
//   - {acc user="new" scheme="basic"} (login:password, public.fn, tags,
//     login=true to authenticate at once) → {ctrl} 200 params.user/token.
//   - {login} scheme "basic" or "token" → {ctrl} 200 params.user/token.
//   - {sub} of a user id (the p2p topic with that user; each side names it
//     by the other's id; ConvKey gives the lab one name for both), of "new…"
//     (a group is created, the creator owns it), of an existing group (any
//     authenticated user may join on the server's default group access, or
//     is added by the owner with {set sub user=… mode=…}: Invite).
//   - {pub} with an id and head[TagHeadKey] = the client tag → {ctrl} 202
//     params.seq; every attached session gets a {data} copy (noecho spares
//     the publisher's).
//   - {get what="data" since before limit}, {get what="del" since limit},
//     {get what="desc"}, {get what="sub"}.
//   - {del what="msg" delseq hard}, {note what="recv"/"read" seq}, {leave}.
//
// # What the lab can and cannot know through this protocol
//
//   - No idempotent send. A {pub} carries no client message id the server
//     keeps; a retry after an unknown outcome is a new message with a new
//     seq. The client tag in the head, passed through to every copy, is how
//     a retry's duplicate is recognised: counted as such, not hidden.
//   - An ACK is {ctrl} 202 with the topic's seq. The protocol does not say
//     what the server made durable before it: the lab learns that only by
//     reading history back after faults.
//   - An error answer (4xx, 5xx) is reported as the server's definite
//     failure (OutcomeFailed); a timeout, a cancelled wait or a lost
//     connection after the request was written is OutcomeUnknown, never a
//     failure. A 5xx whose message was nevertheless stored and delivered is
//     a finding for the checker, which this package makes visible rather
//     than judges. An answer that arrives after its request was reported
//     unknown is delivered on Pushes (PushLate, with the request id of the
//     *UnknownError).
//   - History comes newest first, in pages of at most the server's cap
//     (100 messages on the tested version whatever the limit asked, not
//     configurable there), with no request id on the {data} frames.
//     History pages down from the top of the range until a page is empty
//     or reaches the bottom, and checks each page's order, range and count.
//     Seqs are per topic and dense at allocation, but a seq may have no
//     message: deleted (the delete log explains it) or never stored (only
//     an unexplained gap shows it).
//   - Deletes are numbered transactions of seq ranges, soft (for one user)
//     or hard (for all). A hard delete asked without the D permission is
//     answered as a success and applied as a soft one, for the requester
//     only: DelLog of another user tells which it was. {get what="del"} pages by transaction id and the
//     server cuts a page after store_config.max_results rows, possibly
//     inside a transaction; Config.MaxResults must not exceed it.
//   - Read/recv marks are set by {note}, which the server never answers
//     and drops silently when invalid; a mark is known only once Desc or
//     Members shows it. The publisher's own marks move to its message.
//   - Sessions do not survive their connection: Reconnect opens a new one,
//     logs in with the last token and attaches the same topics again. A
//     server may also detach a session from a topic on its own (205
//     "evicted", on Pushes as PushNotice); the next {pub} there is refused
//     409 "must attach first" until Subscribe.
//
// # Tested version
//
// Tinode v0.25.3 (wire protocol "0.25"), PostgreSQL adapter, standalone
// (cluster off). Server config keys that matter to the lab:
// store_config.adapters.<db>.sql_timeout (seconds: the deadline after which a
// statement that may still commit is reported failed),
// store_config.max_results, cluster_config.self = "" (cluster off),
// api_key_salt (the API key the lab sends must be signed with it), listen,
// auth_config.basic.min_login_length / min_password_length (a login or
// password outside the policy is refused 422; on the tested version a
// login holds 4 to 32 letters, digits, '_' or '.', a password at least 6
// characters), and
// acc_validation (no required credentials, or account creation needs an
// e-mail round trip the lab cannot do).
package tinode
