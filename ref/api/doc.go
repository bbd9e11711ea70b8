// Package api is the HTTP surface of the reference server: fasthttp routes,
// strict JSON in and out, the named limits, the mapping of model.Err*
// sentinels to statuses, /metrics, /healthz and the /v1/ws upgrade.
//
// It owns no business rule: it authenticates, parses, bounds and encodes,
// and calls ref/send, ref/pull and ref/push through the small interfaces in
// config.go (the lab routes call ref/pull's StoreReader as LabStore and
// ref/history's Service as LabHistory). It must not touch storage.
//
// # Authentication
//
// Every /v1 route needs "Authorization: Bearer <token>" (ref/auth: HS256,
// claims uid and did). Missing or bad tokens get 401 unauthenticated with
// WWW-Authenticate: Bearer. The caller's uid and did come only from the
// token: no route takes a uid, so a token for uid A can never read,
// acknowledge or receive uid B's inbox. /metrics, /healthz and the Deps.Open
// routes are open.
//
// # Routes
//
//	POST /v1/msg/send     {"client_msg_id":"c-1","conv_type":1,"to_uid":2,"content":"hi"}
//	                      {"client_msg_id":"c-2","conv_type":2,"group_id":7,"content":"hi"}
//	                      -> {"msg_id","msg_id_str","conv_id","conv_id_str","conv_seq",
//	                      "server_time"} (unix ms); a retried client_msg_id gets the
//	                      first answer. group_id may be a string of its digits.
//	GET  /v1/sync/pull    ?cursor=&limit=&full=  cursor absent: the device's stored
//	                      cursor; limit 1..500 (absent: the read path's default,
//	                      pull.Config.DefaultLimit, 100); full=1 asks for the whole
//	                      backlog even past the unread threshold.
//	                      -> {"msgs":[item...],"has_more","next_cursor"}
//	                         (+ "truncated":true,"summary":[{"conv_id","conv_id_str",
//	                         "conv_type","unread","min_seq","max_seq"}] past the threshold)
//	                      item = {"seq","msg_id","msg_id_str","conv_id","conv_id_str",
//	                         "conv_type","conv_seq","sender_uid","created_at" (unix ms),
//	                         "content"} (+ "missing":true when the body is gone;
//	                         content "")
//	                      Header X-Imlab-Source: cache|mysql (informational).
//	POST /v1/sync/ack     {"pull_seq":123} -> {"pull_seq"} the stored cursor
//	                      (monotonic); 409 cursor_beyond_served past what the device
//	                      was served.
//	GET  /v1/conv/pull    ?conv_id=&cursor=&limit=  conv_id required; cursor is the
//	                      inbox seq (default 0); limit 1..50 (absent: the read
//	                      path's default, pull.Config.DefaultConvLimit, 50). Answer as
//	                      sync/pull.
//	POST /v1/group/create {"group_id":7,"members":[1,2,3]} 1..500 members -> {}
//	                      (idempotent for the same members; 409 conflict otherwise).
//	GET  /v1/history      ?conv_id=&from_seq=&to_seq= (to_seq defaults to from_seq;
//	                      the service bounds the range) -> {"msgs":[{"conv_seq",
//	                      "msg_id","sender_uid","created_at","content"[,"revoked"]
//	                      [,"tombstone"][,"is_read"],"msg_id_str"}]} projected for
//	                      the caller.
//	POST /v1/msg/revoke   {"conv_id","conv_seq"} -> {}   (idempotent; the sender only,
//	                      403 otherwise; within the revoke window unless revoked
//	                      already)
//	POST /v1/msg/delete   {"conv_id","conv_seq"} -> {}   (idempotent, for the caller only)
//	POST /v1/conv/clear   {"conv_id"} -> {"min_seq"}  the caller's watermark in force
//	                      (raised to the conversation's last committed conv_seq,
//	                      never lowered; a retry answers it again)
//	                      Revoke and delete (and ref/server's msg/read): a conv_seq
//	                      the send path committed but the history tier has not
//	                      written yet is 503 unavailable and changes nothing
//	                      (retry); one that holds no message and never will (a
//	                      hole, physically deleted, past the end) is 404 not_found
//	                      for revoke and delete, and skipped by msg/read, whose
//	                      200 means every message of its range is marked.
//	                      The four history routes are mounted with
//	                      Deps.History = HistoryRoutes(history service); without
//	                      it they answer 501 not_implemented.
//	GET  /v1/...          Deps.Open routes: unauthenticated GET, empty query, for
//	                      operational data without user content (ref/server
//	                      mounts the queue lag snapshot at /v1/lab/lag and its
//	                      wall clock, {"unix_nano"}, at /v1/lab/time; with its
//	                      lab routes on, LAB ONLY, /v1/lab/deadletters: the
//	                      dead-letter topic's records, each with its group, tier,
//	                      class, reason, attempts, retried_ms, window_ms, source
//	                      and message ids, and for the inbox tier whether every
//	                      recipient's inbox holds the message now, "repaired").
//	GET  /v1/lab/inbox    ?after=&limit=  LAB ONLY, mounted only with Deps.Lab
//	                      (imlab ref --lab-routes): the token's uid's inbox as the
//	                      store of record (MySQL offline_msg + msg_content) holds
//	                      it, bypassing every cache, the rate limit, the served
//	                      mark and the cursors; rows with seq > after (default 0)
//	                      in seq order, limit 1..500 (default 500).
//	                      -> {"policy":"strict","msgs":[item...],"has_more","next_cursor"}
//	GET  /v1/lab/stored   ?msg_id=  LAB ONLY, as above: what the store holds of one
//	                      message for the token's uid, and the ack policy.
//	                      -> {"policy","msg_id","msg_id_str","uid","content":bool
//	                          [,"conv_id","conv_id_str","conv_seq"],"inbox":bool[,"seq"],
//	                          "outbox":"none|pending|published|confirmed"}
//	GET  /v1/lab/history  ?conv_id=&from_seq=&to_seq=  LAB ONLY, as above: one
//	                      conversation's history as MongoDB stores it (ref/history
//	                      Service.Witness: no cache, no projection, no watermark),
//	                      for a token whose uid is a party (1:1) or a member
//	                      (group) of it (403 otherwise). All three parameters are
//	                      required; to_seq-from_seq+1 <= history.MaxWitnessRange
//	                      (1000). 501 when the process has no history store.
//	                      -> {"conv_id","conv_id_str","from_seq","to_seq",
//	                          "bucket_size","max_seq"[,"top_bucket"],
//	                          "buckets":[{"idx","exists","slots","max_seq"}],
//	                          "clears":[{"uid","min_seq"}],
//	                          "slots":[{"conv_seq","state"[,"stored_seq","msg_id",
//	                            "msg_id_str","sender_uid","conv_type","created_at",
//	                            "content"][,"revoke":{"uid","role","at"}]
//	                            [,"del_list":[uid...]][,"del_records":[uid...]],
//	                            "is_read","v"[,"detail"]}]}
//	                      slots: one per conv_seq of the range, ascending, at the
//	                      seed's position (bucket (seq-1)/size, slot (seq-1)%size)
//	                      whatever the writer did; state is empty (nothing
//	                      written), filled, purged (physically deleted) or
//	                      invalid (the element does not decode as a slot; detail
//	                      says what is there). A filled slot carries the stored
//	                      message: stored_seq is the conv_seq recorded inside it
//	                      (another than conv_seq: a message written to another's
//	                      slot) and content is as stored, also when revoked.
//	                      del_list is the slot's list, del_records the uids whose
//	                      delete-for-me went to a deletion record past the list's
//	                      bound; absent means none. v counts the slot's
//	                      mutations. buckets: the documents of the range (exists
//	                      false: no document; slots: the stored array's length).
//	                      clears: every user's clear watermark in the
//	                      conversation, by uid. max_seq: the max_seq field of the
//	                      highest bucket at or above the range's first
//	                      (top_bucket; absent with max_seq 0 when none exists):
//	                      the highest conv_seq the store records as written.
//	                      Without Deps.Lab the three lab routes answer 404. They
//	                      exist so that the lab can witness the stores (checker:
//	                      lost-in-store, the history witness) and read the inbox
//	                      right after an ACK (unstored-at-ack); the token still
//	                      names the uid, so no route takes a uid.
//	GET  /v1/ws           WebSocket (see below).
//	GET  /metrics         Prometheus text of the process registry.
//	GET  /healthz         200 {"status":"ok"}; 503 {"status":"shutting_down"} once
//	                      shutdown began.
//
// Query strings are strict: parameters outside a route's list, repeated
// parameters, and values that are not unsigned decimal integers get 400.
// Bodies are strict: one JSON object, unknown fields, wrong types and
// trailing data get 400 invalid_argument. Routes without a body ignore it.
//
// # Ids above 2^53
//
// msg_id (41 bits of milliseconds since 2024 above 22 bits of node and
// sequence: above 2^53 since 2024-01-25), conv_id (a 1:1 id has bit 63
// set; a group's is its group_id, up to 2^62-1) and group_id do not fit
// the 53 bits of an IEEE double, the only number of JavaScript's
// JSON.parse, which silently rounds them to another id. So every answer
// and frame that carries a msg_id or conv_id carries it twice: the number,
// as before, and beside it "msg_id_str" / "conv_id_str", a string of the
// same decimal digits (the send answer and send_ack, pull and conv/pull
// items and the truncated pull's summary, push frames, the history items,
// the lab routes; ref/server's /v1/lab/repairs lists "msg_ids_str" beside
// "msg_ids"). A client that reads 64-bit integers may ignore the twins; a
// browser should read only them.
//
// Wherever a body takes such an id (send and the ws send frame: group_id;
// group/create: group_id; msg/revoke, msg/delete, conv/clear and ref/server's
// msg/read and admin purge: conv_id) it takes a JSON number or a string of
// the id's decimal digits alone (ID): "9223372039002259465". Anything else
// in the string (a sign, a space, a leading zero, a fraction, an exponent,
// hex, more than 64 bits, an empty string) is 400 invalid_argument naming
// the field. Query parameters (conv_id=, msg_id=) are text already and
// take the digits as before. The other numbers stay numbers only: seq,
// prev_seq, next_cursor, pull_seq, conv_seq, min_seq, max_seq and unread
// count messages (one per message, holes of at most a seq segment) and
// stay far below 2^53, uids have 31 bits, created_at and server_time are
// unix milliseconds.
//
// # Errors
//
// Every failure is {"error":{"code":"...","message":"..."}}:
//
//	400 invalid_argument      bad JSON, field, query, page size
//	401 unauthenticated       missing/invalid token
//	403 permission_denied     e.g. sending to a group one is not in
//	404 not_found             unknown route or object
//	405 method_not_allowed    (Allow header says which)
//	409 conflict              e.g. a group re-created with other members
//	409 cursor_beyond_served  ack past the device's served high-water
//	413 too_large             body > MaxBodyBytes, content > 4096 bytes
//	429 rate_limited          Retry-After header (whole seconds, >= 1) and
//	                          "retry_after_ms" in the error object
//	501 not_implemented       route whose service this process does not run
//	503 unavailable           backend down, timeout, shutting down (generic
//	                          message; the detail is logged)
//	500 internal              anything else (generic message; detail logged)
//
// A panic in a handler is recovered, answered 500 and counted in
// imlab_http_panics_total; it never reaches the client or the process.
//
// # Limits
//
//	MaxBodyBytes            32 KiB per request body and per ws client frame
//	MaxReadBodyBytes        128 KiB: an oversized body up to this is read and answered 413 JSON;
//	                        beyond it the connection is answered 413 and closed unread
//	MaxHeaderBytes          16 KiB of request line and headers (the read buffer): past it
//	                        414 when the request line overflows it, else 431, JSON, closed
//	MaxRequestURIBytes      8 KiB of request target (414)
//	LingerTimeout           1 s, LingerBytes 1 MiB: after an answer to a request not read
//	                        whole (414, 431, 413 past MaxReadBodyBytes) the connection
//	                        half-closes and reads what the client still sends, within
//	                        these bounds, before it closes: a client still writing reads
//	                        the answer instead of a reset
//	model.MaxPullLimit      500 (sync/pull limit)
//	model.MaxConvPullLimit  50 (conv/pull limit)
//	model.MaxGroupMembers   500
//	model.MaxContentLen     4096 bytes (413)
//	model.MaxClientMsgIDLen 64 bytes
//	auth.MaxTokenLen        2048 bytes
//	Config.RequestTimeout   per request / ws frame service call (default 10 s)
//	Config.Concurrency      requests in flight (fasthttp answers 503 beyond)
//	per-uid pull rate       enforced by ref/pull, surfaced as 429
//
// # WebSocket /v1/ws
//
// Authenticated like every /v1 route (the Authorization header on the
// upgrade request). The device is subscribed to the push hub before the 101
// answer, so a client that pulls after connecting misses nothing between
// its pull and its first pushed frame.
//
// Server frames:
//
//	{"type":"msg",...pull item fields}       a pushed message (from ref/push)
//	{"type":"send_ack","client_msg_id",...send answer}
//	{"type":"acked","pull_seq":N}            the stored cursor after an ack
//	{"type":"error"[,"client_msg_id"],"error":{"code","message"[,"retry_after_ms"]}}
//
// Client frames (text or binary, JSON, at most MaxBodyBytes; larger frames
// close the connection with 1009):
//
//	{"type":"ack","pull_seq":N}   if N <= the highest seq pushed on this
//	                              connection, the served high-water is raised
//	                              to N first; then the cursor is acked (refused
//	                              past what was served, as over HTTP).
//	{"type":"send",...send body}  as POST /v1/msg/send; answered send_ack or error.
//
// Frames are served in order, one at a time per connection. The server pings
// every WSConfig.PingInterval and drops a connection silent for PongWait. It
// closes with 1008 and the hub's reason when the hub drops the subscription
// (slow consumer, replaced connection) and with 1001 on shutdown.
//
// # Metrics
//
// imlab_http_requests_total{route,code}, imlab_http_request_duration_seconds{route},
// imlab_http_panics_total, imlab_ws_client_frames_total{type,result}. The
// services register their own.
package api
