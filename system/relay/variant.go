package relay

import (
	"github.com/faultline-dev/faultline/system/variant"
)

// guardVariants are the relay's broken variants: each switches off one of
// the correct relay's guards (one file each, variant_*.go).
var guardVariants = map[string]func(*Guards){
	variant.NoMandatory:            noMandatory,
	variant.IgnoreReturn:           ignoreReturn,
	variant.PublishedBeforeConfirm: publishedBeforeConfirm,
	variant.NoFencing:              noFencing,
	variant.NoLease:                noLease,
	variant.LeaseIgnored:           leaseIgnored,
	variant.UnfencedRetry:          unfencedRetry,
	variant.UnfencedRenewal:        unfencedRenewal,
	variant.NoBackoff:              noBackoff,
	variant.ReadsByID:              readsByID,
	variant.NackAsSuccess:          nackAsSuccess,
	variant.LastConfirmOnly:        lastConfirmOnly,
	variant.OwnBatchReturnsOnly:    ownBatchReturnsOnly,
	variant.SingleNode:             singleNode,
}

// GuardsFor returns the guards of the named variant (or variants, joined
// by commas): every guard for the correct pipeline and for variants that
// break another process, one guard fewer for each relay variant named. An
// unknown name is an error.
func GuardsFor(name string) (Guards, error) {
	set, err := variant.Parse(name)
	if err != nil {
		return Guards{}, err
	}
	g := AllGuards()
	for _, v := range set.Of(variant.Relay) {
		if off, ok := guardVariants[v.Name]; ok {
			off(&g)
		}
	}
	return g, nil
}
