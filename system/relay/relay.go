// Package relay is the outbox relay: it claims outbox rows with FOR UPDATE
// SKIP LOCKED under a lease and a claim id, publishes them to RabbitMQ with
// mandatory and publisher confirms, and marks a row Published only when no
// basic.return came for it and a positive confirm did. Several relays run
// on one table at once.
package relay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/google/uuid"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/broker"
	"github.com/faultline-dev/faultline/system/crashpoint"
)

// Relay moves outbox rows to the broker.
type Relay struct {
	cfg    Config
	store  store
	log    *eventlog.Log
	points *crashpoint.Set
	pub    *publisher
	nodes  *broker.Ring // the broker addresses, dialled in turn
	// guards are the pipeline's protections; variants switch one off.
	guards Guards
	// settling is closed when the status writes in progress are done
	// (nil: none in progress). Only the loop's goroutine touches it.
	settling chan struct{}
}

// Guards are the relay's protections. The correct relay has all of them.
type Guards struct {
	Mandatory      bool // publish with mandatory, so an unroutable message comes back
	HonourReturns  bool // a returned message is not Published
	AwaitConfirm   bool // Published only after a positive confirm
	FenceByClaimID bool // status writes conditional on the claim id
	LeaseExpiry    bool // a Processing row whose lease ran out can be claimed again
	LeaseHonoured  bool // a Processing row is claimed again only once its lease ran out
	FenceRetries   bool // the retry and Failed writes conditional on the claim id
	FenceRenewal   bool // the lease renewal conditional on the claim id
	Backoff        bool // a retry is due after an exponential backoff, not at once
	// ClaimByStatus: rows are taken by their status under a claim (FOR
	// UPDATE SKIP LOCKED), so a row is found whenever it commits; never by
	// a position in the table, which a row committed late is already behind.
	ClaimByStatus bool
	HonourNacks   bool // a basic.nack keeps the row from Published (it is retried)
	// EachConfirm: each row's own confirm decides it, not the answer to
	// the batch's last publish.
	EachConfirm bool
	// Failover: after losing its connection the relay dials the next node
	// of --amqp-urls, not only the first.
	Failover bool
	// KeepLaterReturns: a basic.return drained while one batch settles
	// is kept for the later batch it came back from, on the same channel.
	KeepLaterReturns bool
}

// AllGuards is the correct relay.
func AllGuards() Guards {
	return Guards{Mandatory: true, HonourReturns: true, AwaitConfirm: true, FenceByClaimID: true, LeaseExpiry: true, LeaseHonoured: true,
		FenceRetries: true, FenceRenewal: true, Backoff: true, ClaimByStatus: true, HonourNacks: true, EachConfirm: true, Failover: true, KeepLaterReturns: true}
}

// outcome of one row's publish.
type outcome int

const (
	outcomeConfirmed outcome = iota // positive confirm, no return
	outcomeReturned                 // basic.return: unroutable
	outcomeNacked                   // broker nack with the channel still open
	outcomeNotSent                  // the publish call failed: it never left
	outcomeUnknown                  // channel lost or confirm timed out: maybe delivered
	outcomeClaimLost                // the lease renewal found the row taken
	outcomeStopped                  // the relay is stopping: never sent, left to the lease, no attempt counted
)

// batchResult is what happened to each row of a claimed batch.
type batchResult struct {
	outcome map[string]outcome
	reason  map[string]string
}

// inFlight is one published row and its deferred confirm.
type inFlight struct {
	row Row
	dc  *amqp.DeferredConfirmation
}

// batch is a claimed batch on its way: published, awaiting its confirms.
type batch struct {
	claimID string
	rows    []Row
	pub     *publisher // the channel it went out on
	flights []inFlight
	res     batchResult
	renewal *renewer
}

// publishBatch publishes every row of a claimed batch without waiting for
// a confirm; finishBatch awaits them. The loop publishes the next batch
// before it finishes this one, so the broker always has work while a batch
// is being confirmed and marked.
func (r *Relay) publishBatch(ctx context.Context, claimID string, rows []Row) *batch {
	b := &batch{claimID: claimID, rows: rows, pub: r.pub,
		res:     batchResult{outcome: make(map[string]outcome, len(rows)), reason: map[string]string{}},
		flights: make([]inFlight, 0, len(rows))}
	if r.cfg.Renew {
		b.renewal = r.startRenewal(ctx, claimID, rows)
	}
	published := make([]eventlog.Entry, 0, len(rows))
	for i, row := range rows {
		dc, err := b.pub.publish(ctx, r.cfg.Exchange, row.EventType, r.guards.Mandatory, claimID, row)
		if err != nil && ctx.Err() != nil {
			// Stopping (SIGTERM) is not a failed attempt: these rows wait
			// for their lease and go out with their budget intact.
			for _, rest := range rows[i:] {
				b.res.outcome[rest.EventID] = outcomeStopped
			}
			break
		}
		if err != nil {
			// This and every later row never left the process.
			for _, rest := range rows[i:] {
				b.res.outcome[rest.EventID] = outcomeNotSent
				b.res.reason[rest.EventID] = "publish: " + err.Error()
			}
			break
		}
		b.flights = append(b.flights, inFlight{row, dc})
		published = append(published, eventlog.Entry{Event: eventlog.Published, EventID: row.EventID, ClaimID: claimID, AggregateID: row.AggregateID, Sequence: row.Sequence, Attempt: row.AttemptCount + 1})
	}
	r.log.Batch(published)
	r.points.Hit(crashpoint.RelayAfterPublish)
	return b
}

// finishBatch awaits a published batch's confirms (bounded by the confirm
// timeout, also when the relay is stopping: what went out is confirmed and
// marked rather than left to the lease), decides each row's outcome and
// settles them.
func (r *Relay) finishBatch(ctx context.Context, b *batch) {
	res, flights, claimID := b.res, b.flights, b.claimID
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ConfirmTimeout)
	acked := make(map[string]bool, len(flights))
	timedOut := false
	for _, f := range flights {
		if !r.guards.AwaitConfirm {
			break
		}
		ok, err := f.dc.WaitContext(waitCtx)
		if err != nil {
			timedOut = true
			break
		}
		acked[f.row.EventID] = ok
	}
	cancel()
	var told map[string]bool // the broker's own answers, where the relay decides by another
	if !r.guards.EachConfirm && len(flights) > 0 && !timedOut {
		told, acked = acked, lastAnswers(flights, acked)
	}
	channelLost := b.pub.isClosed()
	returned, drained := b.pub.takeReturns(claimID, flights, !r.guards.KeepLaterReturns)

	// Every return is logged when it is drained, under the claim it came
	// back from, ahead of this batch's answers: a later batch's return
	// logged here was in hand before that batch was settled.
	lines := make([]eventlog.Entry, 0, len(drained)+len(flights))
	for _, ret := range drained {
		lines = append(lines, eventlog.Entry{Event: eventlog.Returned, EventID: ret.MessageId, ClaimID: returnClaim(ret), Detail: ret.ReplyText})
	}
	for _, f := range flights {
		id := f.row.EventID
		ret, wasReturned := returned[id]
		ok, answered := acked[id]
		switch {
		case !r.guards.AwaitConfirm:
			res.outcome[id] = outcomeConfirmed // variant: Published without waiting
		case !answered:
			res.outcome[id], res.reason[id] = outcomeUnknown, "no confirm within "+r.cfg.ConfirmTimeout.String()
		case !ok && channelLost:
			// amqp091-go resolves pending confirms as nacks when the channel
			// closes: the broker may have the message. Unknown, not a nack.
			res.outcome[id], res.reason[id] = outcomeUnknown, "channel closed before the confirm"
		case !ok && !r.guards.HonourNacks:
			res.outcome[id] = outcomeConfirmed // variant: a nack taken for an ack
		case !ok:
			res.outcome[id], res.reason[id] = outcomeNacked, "nacked by the broker"
		case wasReturned && r.guards.HonourReturns:
			res.outcome[id], res.reason[id] = outcomeReturned, fmt.Sprintf("returned: %d %s", ret.ReplyCode, ret.ReplyText)
		default:
			res.outcome[id] = outcomeConfirmed
		}
		if told != nil {
			ok = told[id] // the log says what the broker said
		}
		switch {
		case answered && ok:
			lines = append(lines, eventlog.Entry{Event: eventlog.Confirmed, EventID: id, ClaimID: claimID})
		case answered && !channelLost:
			lines = append(lines, eventlog.Entry{Event: eventlog.Nacked, EventID: id, ClaimID: claimID})
		}
	}
	r.log.Batch(lines)
	r.points.Hit(crashpoint.RelayAfterConfirm)

	if b.renewal != nil {
		for id := range b.renewal.stop() {
			res.outcome[id], res.reason[id] = outcomeClaimLost, "claim lost at lease renewal"
		}
	}
	if channelLost || timedOut {
		// Start from a fresh connection: anything still in flight on this
		// one has an unknown outcome and is left to the lease.
		b.pub.close()
		if r.pub == b.pub {
			r.pub = nil
		}
	}

	// The status writes go on beside the next claim and publish, one
	// batch's at a time: the relay's own path is claim → publish, and the
	// database does the marking of the previous batch meanwhile.
	r.waitSettled()
	done := make(chan struct{})
	r.settling = done
	go func() {
		defer close(done)
		r.settle(ctx, claimID, b.rows, res)
		r.points.Hit(crashpoint.RelayAfterMark)
	}()
}

// waitSettled waits for the status writes of the last finished batch.
func (r *Relay) waitSettled() {
	if r.settling != nil {
		<-r.settling
		r.settling = nil
	}
}

// settle writes the batch's outcomes: Published for confirmed rows, a
// retry (or Failed) for returned, nacked and unsent rows; unknown outcomes
// and lost claims are left alone for the lease. A batch with retries hits
// relay.before-retry after its Published write and before its retry write:
// a relay frozen there past its lease finds its rows taken, and its late
// retry write is fenced (logged fenced, with the eventId and claim id).
func (r *Relay) settle(ctx context.Context, claimID string, rows []Row, res batchResult) {
	var confirmed []string
	var retries []retry
	var lines []eventlog.Entry
	byID := make(map[string]Row, len(rows))
	for _, row := range rows {
		byID[row.EventID] = row
		switch res.outcome[row.EventID] {
		case outcomeConfirmed:
			confirmed = append(confirmed, row.EventID)
		case outcomeReturned, outcomeNacked, outcomeNotSent:
			retries = append(retries, retry{EventID: row.EventID, Err: res.reason[row.EventID], Delay: r.retryAfter(row.AttemptCount + 1)})
		case outcomeUnknown:
			lines = append(lines, eventlog.Entry{Event: eventlog.Unknown, EventID: row.EventID, ClaimID: claimID, Detail: res.reason[row.EventID]})
		case outcomeClaimLost:
			lines = append(lines, eventlog.Entry{Event: eventlog.ClaimLost, EventID: row.EventID, ClaimID: claimID})
		}
	}
	r.log.Batch(lines)
	lines = nil

	// The writes must land even when the relay is asked to stop: a claim
	// left half written would only wait for its lease.
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if len(confirmed) > 0 {
		marked, err := r.store.markPublished(writeCtx, claimID, confirmed)
		if err != nil {
			r.log.Errorf("claim %s: %v (rows stay Processing until the lease runs out)", claimID, err)
		} else {
			for _, id := range confirmed {
				if marked[id] {
					lines = append(lines, eventlog.Entry{Event: eventlog.Marked, EventID: id, ClaimID: claimID})
				} else {
					lines = append(lines, eventlog.Entry{Event: eventlog.Fenced, EventID: id, ClaimID: claimID, Detail: "mark published: 0 rows"})
				}
			}
		}
	}
	if len(retries) > 0 {
		r.points.Hit(crashpoint.RelayBeforeRetry)
		done, err := r.store.scheduleRetries(writeCtx, claimID, r.cfg.RetryBudget, retries)
		if err != nil {
			r.log.Errorf("claim %s: %v (rows stay Processing until the lease runs out)", claimID, err)
		} else {
			for _, rt := range retries {
				o, ok := done[rt.EventID]
				switch {
				case !ok:
					lines = append(lines, eventlog.Entry{Event: eventlog.Fenced, EventID: rt.EventID, ClaimID: claimID, Detail: "schedule retry: 0 rows"})
				case o.Failed:
					alert := fmt.Sprintf("ALERT: outbox event %s Failed after %d attempts: %s", rt.EventID, o.Attempt, rt.Err)
					fmt.Fprintln(os.Stderr, alert)
					lines = append(lines, eventlog.Entry{Event: eventlog.FailedAlert, EventID: rt.EventID, ClaimID: claimID, Attempt: o.Attempt, Error: rt.Err, Detail: alert})
				default:
					lines = append(lines, eventlog.Entry{Event: eventlog.Retry, EventID: rt.EventID, ClaimID: claimID, Attempt: o.Attempt, Error: rt.Err, Detail: "next attempt in " + rt.Delay.String()})
				}
			}
		}
	}
	r.log.Batch(lines)
}

// retryAfter is how long a row that failed its attempt n waits before it is
// due again: the backoff (none without the Backoff guard: no-backoff).
func (r *Relay) retryAfter(attempt int) time.Duration {
	if !r.guards.Backoff {
		return 0
	}
	return r.backoff(attempt)
}

// backoff is the delay before attempt n+1: exponential from BackoffBase,
// capped at BackoffMax, with equal jitter (half fixed, half random).
func (r *Relay) backoff(attempt int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < attempt && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, r.cfg.BackoffMax)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// renewer is the lease heartbeat of one claim.
type renewer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	lost   map[string]bool
}

// stop ends the heartbeat and returns the rows whose claim was lost.
func (rn *renewer) stop() map[string]bool {
	rn.cancel()
	<-rn.done
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.lost
}

// startRenewal extends the lease of the batch's rows every RenewInterval,
// conditional on the claim id (not without the FenceRenewal guard:
// unfenced-renewal); a row the renewal no longer finds was taken by another
// claim, and this relay stops working on it (claim-lost). Each row a
// renewal extended is logged as renewed, with its eventId and the claim id.
func (r *Relay) startRenewal(ctx context.Context, claimID string, rows []Row) *renewer {
	ctx, cancel := context.WithCancel(ctx)
	rn := &renewer{cancel: cancel, done: make(chan struct{}), lost: map[string]bool{}}
	held := make([]string, len(rows))
	for i, row := range rows {
		held[i] = row.EventID
	}
	go func() {
		defer close(rn.done)
		t := time.NewTicker(r.cfg.RenewInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if ctx.Err() != nil {
				return // stopped with a tick pending: no renewal begins after stop
			}
			r.points.Hit(crashpoint.RelayBeforeRenew)
			// A renewal once begun runs to its end, even when the batch
			// finishes meanwhile (stop waits for it): a relay resumed after
			// a freeze at relay.before-renew learns whether its claim was
			// taken, whichever of its goroutines runs first.
			renewCtx, cancelRenew := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Lease)
			still, err := r.store.renew(renewCtx, claimID, held, r.cfg.Lease)
			cancelRenew()
			if err != nil {
				if ctx.Err() == nil {
					r.log.Errorf("claim %s: %v", claimID, err)
				}
				continue
			}
			// One renewed line per row whose lease was extended, in one
			// write: the checker tells a renewal by a claim that no longer
			// held the row from these.
			keep := make([]string, 0, len(held))
			lines := make([]eventlog.Entry, 0, len(held))
			rn.mu.Lock()
			for _, id := range held {
				if still[id] {
					keep = append(keep, id)
					lines = append(lines, eventlog.Entry{Event: eventlog.Renewed, EventID: id, ClaimID: claimID})
				} else {
					rn.lost[id] = true
				}
			}
			rn.mu.Unlock()
			r.log.Batch(lines)
			held = keep
			if len(held) == 0 {
				return
			}
		}
	}()
	return rn
}

// newClaimID is unique per claim: instance:uuid.
func (r *Relay) newClaimID() string {
	return r.cfg.Instance + ":" + uuid.NewString()
}
