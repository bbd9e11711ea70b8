// Package wspoll reads many client WebSockets on one goroutine: a Poller
// waits for every connection's socket with one Linux epoll (level-
// triggered), reads what a ready socket holds once per readiness (no probe
// that finds nothing), parses the server's frames itself (unmasked,
// fragmented messages reassembled, ping answered, close ends the
// connection) and hands each message to the connection's Handler on the
// poller's goroutine. A connection is dialed here too (a plain HTTP
// Upgrade on a TCP connection whose descriptor is then taken out of the
// runtime's own poller), so bytes the server sent right after the upgrade
// are the connection's first frames. Writes (masked text frames) are made
// by the writer's goroutine.
//
// The Poller's goroutine is its caller's (Run, until its context ends);
// it alone reads and closes the descriptors. It must not parse what a
// message means (the driver's client does) or know who reads it.
package wspoll
