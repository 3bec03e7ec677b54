package inventory

import (
	"time"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/topology"
	"github.com/faultline-dev/faultline/system/variant"
)

// stepVariants are the consumer's broken variants: each embeds correctSteps
// and overrides the one step whose guard it removes (variant_*.go).
var stepVariants = map[string]func(correctSteps) steps{
	variant.AckBeforeCommit:        func(c correctSteps) steps { return ackBeforeCommit{c} },
	variant.NoInbox:                func(c correctSteps) steps { return noInbox{c} },
	variant.BatchDuplicatesApplied: func(c correctSteps) steps { return batchDuplicatesApplied{c} },
	variant.InboxOwnTransaction:    func(c correctSteps) steps { return inboxOwnTransaction{c} },
	variant.CommitErrorIgnored:     func(c correctSteps) steps { return commitErrorIgnored{c} },
	variant.PoisonAcked:            func(c correctSteps) steps { return poisonAcked{c} },
	variant.DeadLetterMultiple:     func(c correctSteps) steps { return deadLetterMultiple{c} },
}

// queueVariants are the consumer's broken variants that change the queue it
// declares rather than a step (variant_*.go).
var queueVariants = map[string]func(*topology.QueueOptions){
	variant.ClassicQueue:    classicQueue,
	variant.TransientQueue:  transientQueue,
	variant.LimitWithoutDLX: limitWithoutDLX,
}

// retentionFor is the inbox retention the cleanup keeps: the configured
// one, or what the cleanup-retention-in-ms variant makes of it.
func retentionFor(cfg Config) time.Duration {
	set, _ := variant.Parse(cfg.Variant) // checked by Validate
	if v, err := set.One(variant.Inventory); err == nil && v.Name == variant.CleanupRetentionInMS {
		return retentionInMS(cfg.InboxRetention)
	}
	return cfg.InboxRetention
}

// queueOptionsFor is the queue cfg's consumer declares: the correct quorum
// queue (with --queue-max-length), or its variant's.
func queueOptionsFor(cfg Config) topology.QueueOptions {
	opts := topology.QueueOptions{MaxLength: cfg.QueueMaxLength}
	set, _ := variant.Parse(cfg.Variant) // checked by Validate
	if v, err := set.One(variant.Inventory); err == nil {
		if change, ok := queueVariants[v.Name]; ok {
			change(&opts)
		}
	}
	return opts
}

// stepsFor returns the steps constructor of the named variant (or
// variants, joined by commas): the correct steps for the correct pipeline
// and for variants of another process. An unknown name, or two consumer
// variants at once (each replaces a step of the correct ones), is an error.
func stepsFor(name string) (func(*store, *eventlog.Log) steps, error) {
	set, err := variant.Parse(name)
	if err != nil {
		return nil, err
	}
	v, err := set.One(variant.Inventory)
	if err != nil {
		return nil, err
	}
	wrap, broken := stepVariants[v.Name]
	return func(st *store, log *eventlog.Log) steps {
		c := correctSteps{st: st, log: log}
		if broken {
			return wrap(c)
		}
		return c
	}, nil
}
