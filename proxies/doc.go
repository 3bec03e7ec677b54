// Package proxies puts a Toxiproxy proxy on every process→dependency link of
// a faultline run, so that a scenario can hit one link with a network fault.
//
// The Toxiproxy server runs as a child process: the running binary started
// again with toxiserver.Marker, which makes it the server linked in from
// toxiproxy v2.5.0 (StartServer, SelfServer, package toxiserver). It is a
// process of its own because the in-process ApiServer.Listen blocks, calls
// logger.Fatal on error and has no Shutdown. The server and
// every proxy bind 127.0.0.1 only. A server that runs elsewhere (the docker
// provider's, in the containers' network) is driven through RemoteServer,
// which gives each link one of the ports published for it. A run depends
// on Links, which both provide.
//
// Behaviour of toxiproxy v2.5.0 worth knowing (read from its sources and
// pinned by this package's tests):
//
//   - Down disables the proxy: it closes the proxy's listener, so new dials
//     are refused, and closes every established connection on both sides
//     (a FIN, not a reset). Up listens again on the same address; it fails
//     if another socket took the port meanwhile.
//   - A proxy whose upstream is unreachable still accepts the dial, then
//     closes the connection at once.
//   - Toxics act on established connections too; Toxicity is rolled per
//     connection each time a toxic (re)starts on it, and adding another
//     toxic to the same stream restarts the ones before it.
//   - Timeout drops the data of its stream, then closes the connection once
//     no data has arrived for Timeout (each chunk restarts the timer); a
//     Timeout of 0 stalls forever. Removing a timeout toxic closes the
//     connections it held.
//   - ResetPeer waits for the first data on its stream, waits Timeout, then
//     closes. Only connections opened after the toxic was added get a reset
//     (SO_LINGER 0 is set when a connection starts); older ones get a FIN.
//   - LimitData counts per connection from when the toxic was added and
//     closes the connection once Bytes have passed on its stream.
//   - Bandwidth with a rate of 0 stalls forever and a Slicer with an
//     average size of 0 crashes the server; both are rejected here.
//   - Attribute units differ: latency, jitter and timeouts are whole
//     milliseconds, the slicer's delay is whole microseconds.
package proxies
