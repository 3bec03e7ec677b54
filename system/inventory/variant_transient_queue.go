package inventory

import "github.com/faultline-dev/faultline/system/topology"

// transientQueue is the transient-queue variant: the consumer declares its
// queue classic and not durable. The broker keeps such a queue only while
// it runs: a restart deletes it with every message waiting in it, and
// the consumer declares it anew, empty, when it reconnects. With a
// trickle of traffic the queue is nearly empty whenever the broker dies;
// with a backlog waiting in it, the backlog is gone.
func transientQueue(o *topology.QueueOptions) { o.Transient = true }
