package inventory

import (
	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/variant"
)

// stepVariants are the consumer's broken variants: each embeds correctSteps
// and overrides the one step whose guard it removes (variant_*.go).
var stepVariants = map[string]func(correctSteps) steps{
	variant.AckBeforeCommit:     func(c correctSteps) steps { return ackBeforeCommit{c} },
	variant.NoInbox:             func(c correctSteps) steps { return noInbox{c} },
	variant.InboxOwnTransaction: func(c correctSteps) steps { return inboxOwnTransaction{c} },
	variant.CommitErrorIgnored:  func(c correctSteps) steps { return commitErrorIgnored{c} },
}

// stepsFor returns the steps constructor of the named variant: the correct
// steps for the correct pipeline and for variants of another process. An
// unknown name is an error.
func stepsFor(name string) (func(*store, *eventlog.Log) steps, error) {
	v, err := variant.Lookup(name)
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
