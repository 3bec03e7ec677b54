package workload

import (
	"fmt"
	"slices"
	"time"

	"github.com/faultline-dev/faultline/protocol"
)

// Profile names: the shape of a run's traffic. A Spec says its profile;
// every profile but Paced changes what a pipeline is made to carry, not
// only how much of it.
const (
	// Paced is the trickle most runs send: facts spread over seconds into
	// an idle pipeline, so that faults land mid-stream.
	Paced = "paced"
	// Burst is hundreds of facts at once from many clients, unpaced.
	Burst = "burst"
	// RelayBacklog holds the relays (frozen) while facts pile up in the
	// outbox, then releases them: their claims are full batches.
	RelayBacklog = "relay-backlog"
	// ConsumerBacklog holds the consumer (frozen) while messages pile up in
	// its queue, then releases it: it is handed a full prefetch at once.
	ConsumerBacklog = "consumer-backlog"
	// Sustained measures what the pipeline carries with a probe, then
	// keeps it near that rate for seconds: batches fill and follow one
	// another with no idle pipeline between them.
	Sustained = "sustained"
)

// Hold is a backlog a profile piles up before the pipeline may work it
// off: every instance of Role is frozen (SIGSTOP) from the start of the
// workload until Backlog of its work is seen waiting for it, and every
// fault that acts over the backlog has ended.
type Hold struct {
	// Role is the role held: protocol.Relay (its work: facts the producer
	// acknowledged, each with its outbox row, none published while every
	// relay is frozen) or protocol.Consumer (its work: messages waiting in
	// its queue, ready or delivered to it and unacked, by the broker's
	// counts).
	Role    string
	Backlog int
}

// Profile is a traffic profile as `faultline list` shows it: its name,
// what it sends, and the Spec.
type Profile struct {
	Name, Sends string
	Spec        Spec
}

// ProfileList is every traffic profile.
func ProfileList() []Profile {
	return []Profile{
		{Paced, "120 facts over 5 s from 4 clients into an idle pipeline: faults land mid-stream", Steady()},
		{Burst, "400 facts at once from 32 clients; shows at least 16 requests in flight at once", BurstSpec()},
		{RelayBacklog, "240 facts unpaced, every relay frozen until 200 were acknowledged; shows the backlog and a full claim (relay.batch rows, from the audit trail)", RelayBacklogSpec()},
		{ConsumerBacklog, "240 facts unpaced, the consumer frozen until 150 messages wait for it in its queue (ready, or delivered to it and unacked); shows the backlog, by a passive declare and the management API", ConsumerBacklogSpec()},
		{Sustained, "60 facts at once from 16 clients, timed until every one took effect, then 80% of the rate the pipeline carried for 5 s; shows the rate held", SustainedSpec()},
	}
}

// ProfileNamed is the traffic profile's Spec by its name.
func ProfileNamed(name string) (Spec, bool) {
	profiles := ProfileList()
	i := slices.IndexFunc(profiles, func(p Profile) bool { return p.Name == name })
	if i < 0 {
		return Spec{}, false
	}
	return profiles[i].Spec, true
}

// BurstSpec is the burst profile: 400 facts from 32 clients at once.
func BurstSpec() Spec {
	return Spec{Profile: Burst, Orders: 400, Concurrency: 32}
}

// RelayBacklogSpec is the relay-backlog profile: 240 facts as fast as
// they go, the relays frozen until 200 of them were acknowledged.
func RelayBacklogSpec() Spec {
	return Spec{Profile: RelayBacklog, Orders: 240, Concurrency: 8, Hold: &Hold{Role: protocol.Relay, Backlog: 200}}
}

// ConsumerBacklogSpec is the consumer-backlog profile: 240 facts as fast
// as they go, the consumer frozen until 150 messages wait in its queue.
func ConsumerBacklogSpec() Spec {
	return Spec{Profile: ConsumerBacklog, Orders: 240, Concurrency: 8, Hold: &Hold{Role: protocol.Consumer, Backlog: 150}}
}

// SustainedSpec is the sustained profile: a probe of 60 facts from 16
// clients, then 80% of what the pipeline carried in it, for 5 s.
func SustainedSpec() Spec {
	return Spec{Profile: Sustained, Orders: 60, Concurrency: 16, Sustain: &Sustain{Share: 0.8, For: 5 * time.Second}}
}

// ProfileName is the spec's profile, Paced where it names none.
func (s Spec) ProfileName() string {
	if s.Profile == "" {
		return Paced
	}
	return s.Profile
}

// Validate says what is wrong with a spec's profile: an unknown name, or
// a hold of a role that has no backlog to pile up.
func (s Spec) Validate() error {
	if _, ok := ProfileNamed(s.ProfileName()); !ok {
		return fmt.Errorf("workload: unknown traffic profile %q", s.Profile)
	}
	if u := s.Sustain; u != nil {
		if s.Hold != nil {
			return fmt.Errorf("workload %s: a sustained load holds no role back", s.ProfileName())
		}
		if u.Share <= 0 || u.Share > 1 || u.For <= 0 {
			return fmt.Errorf("workload %s: sustains %.2f of the carried rate for %s: want a share in (0, 1] for a time above 0", s.ProfileName(), u.Share, u.For)
		}
	}
	if s.Hold == nil {
		return nil
	}
	if s.Hold.Role != protocol.Relay && s.Hold.Role != protocol.Consumer {
		return fmt.Errorf("workload %s: holds role %q: only the relay or the consumer piles up a backlog", s.ProfileName(), s.Hold.Role)
	}
	if s.Hold.Backlog < 1 || s.Hold.Backlog > s.Orders {
		return fmt.Errorf("workload %s: a backlog of %d of %d facts", s.ProfileName(), s.Hold.Backlog, s.Orders)
	}
	if s.Pace > 0 {
		return fmt.Errorf("workload %s: a backlog is sent unpaced (pace %s)", s.ProfileName(), s.Pace)
	}
	return nil
}
