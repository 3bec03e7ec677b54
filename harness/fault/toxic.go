package fault

import (
	"context"
	"fmt"
	"time"

	"faultline/harness/result"
	"faultline/proxies"
)

// Toxic puts a Toxiproxy toxic on one link for Duration.
type Toxic struct {
	Link     string
	Toxic    proxies.Toxic
	Trigger  Trigger
	Duration time.Duration
}

// Describe implements Fault.
func (t Toxic) Describe() result.Fault {
	return result.Fault{Kind: "toxic", Target: t.Link,
		Detail: fmt.Sprintf("%s %v for %s, %s", t.Toxic.Type(), t.Toxic.Attributes(), t.Duration, t.Trigger)}
}

// Inject implements Fault.
func (t Toxic) Inject(ctx context.Context, env *Env) result.Fault {
	start := time.Now()
	link, err := env.Link(t.Link)
	if err != nil {
		return record(t, start, false, err)
	}
	if err := env.Wait(ctx, t.Trigger); err != nil {
		return record(t, start, false, err)
	}
	start = time.Now()
	applied, err := link.Add(ctx, t.Toxic)
	if err != nil {
		return record(t, start, false, err)
	}
	env.Logf("toxic %s on %s", t.Toxic.Type(), t.Link)
	holdErr := pause(ctx, t.Duration)
	if err := applied.Remove(context.WithoutCancel(ctx)); err != nil {
		return record(t, start, true, fmt.Errorf("remove toxic: %w", err))
	}
	return record(t, start, true, holdErr)
}
