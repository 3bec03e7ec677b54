package inventory

import "github.com/faultline-dev/faultline/system/topology"

// classicQueue is the classic-queue variant: the consumer declares its
// queue as a classic durable queue instead of a quorum queue. A classic
// queue lives on the one node it was declared on (the consumer's node at
// its first connection), unreplicated: while that node is down the queue
// is gone from the cluster, the messages routed to it meanwhile are not
// enqueued, and what it held cannot be consumed.
//
// The inventory consumer is the only process that declares the queue (the
// relays and the order service declare only the exchange), and every
// consumer of a run runs the same variant, so no two declarations disagree
// on x-queue-type (which would fail with PRECONDITION_FAILED).
func classicQueue(o *topology.QueueOptions) { o.Classic = true }
