package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/faultline-dev/faultline/harness/fault"
	"github.com/faultline-dev/faultline/harness/runner"
	"github.com/faultline-dev/faultline/harness/target"
	"github.com/faultline-dev/faultline/protocol"
	"github.com/faultline-dev/faultline/scenarios"
)

// listSchema is the version of list --format json's shape: fields are
// added under it, never renamed or removed.
const listSchema = 1

// listing is what `faultline list --format json` prints: what the text
// tables show, for programs. Every list is present (empty, not null).
type listing struct {
	Schema         int             `json:"schema"`
	Target         listTarget      `json:"target"`
	Windows        []listWindow    `json:"windows"`
	OutsideWindows []listOutside   `json:"outside_windows"`
	Scenarios      []listScenario  `json:"scenarios"`
	FaultKinds     []listFaultKind `json:"fault_kinds"`
	Variants       []listVariant   `json:"variants"`
	KnownFindings  []listKnown     `json:"known_findings"`
}

type listTarget struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// RelayModel is the relay's model as the file says it (claim, offset,
	// log), or "not said".
	RelayModel string `json:"relay_model"`
}

// listWindow is a crash-point window of the protocol and the processes of
// the target that offer it (empty: none).
type listWindow struct {
	Name      string   `json:"name"`
	Role      string   `json:"role"`
	OfferedBy []string `json:"offered_by"`
	Opens     string   `json:"opens"`
	Guard     string   `json:"guard"`
}

// listOutside is a window faultline opens from outside.
type listOutside struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Opens string `json:"opens"`
	Guard string `json:"guard"`
}

// listScenario is one scenario of the catalogue as it runs on the target.
type listScenario struct {
	Name    string `json:"name"`
	Profile string `json:"profile"` // default or production
	// Traffic is the traffic profile it sends (paced, burst,
	// relay-backlog, consumer-backlog); BySeed, where it has several, is
	// each of them, the first Traffic: a run's seed picks one.
	Traffic string   `json:"traffic"`
	BySeed  []string `json:"traffic_by_seed,omitempty"`
	// Window is the window it opens ("": any, drawn at random).
	Window      string        `json:"window"`
	Description string        `json:"description"`
	AlsoChecks  []string      `json:"also_checks"`
	Needs       []string      `json:"needs"`
	Settings    []listSetting `json:"settings"`
	// Relay is how it opens on the target's relay model: "as written",
	// how it is re-timed, "not offered: ..."; "" for a scenario that
	// does not depend on the relay.
	Relay string `json:"relay"`
	// Status is "offered" or "not-run" (Reason says why), as far as the
	// target file tells; a run may still end not run for what only the
	// running pipeline shows (a crash point it does not serve).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// How says how it runs without a setting it prefers, if it does.
	How string `json:"how,omitempty"`
}

// listSetting is a setting of the target a scenario turns.
type listSetting struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Required bool   `json:"required"` // else used if offered
	Offered  bool   `json:"offered"`
}

type listFaultKind struct {
	Name  string `json:"name"`
	Opens string `json:"opens"` // "" if it opens no window of its own
	Doc   string `json:"doc"`
}

type listVariant struct {
	Name     string   `json:"name"`
	Guard    string   `json:"guard"`
	Expect   string   `json:"expect"`
	CaughtBy []string `json:"caught_by"`
}

type listKnown struct {
	Scenario   string   `json:"scenario"`
	Violations []string `json:"violations"`
	Cause      string   `json:"cause"`
}

// listingOf is what list shows of t.
func listingOf(t *target.Target) listing {
	out := listing{
		Schema:         listSchema,
		Target:         listTarget{Name: t.Name, Path: t.Path, RelayModel: t.RelayModel()},
		Windows:        []listWindow{},
		OutsideWindows: []listOutside{},
		Scenarios:      []listScenario{},
		FaultKinds:     []listFaultKind{},
		Variants:       []listVariant{},
		KnownFindings:  []listKnown{},
	}
	offers := t.Windows()
	for _, w := range protocol.Windows() {
		by := append([]string{}, offers[w.Name]...)
		out.Windows = append(out.Windows, listWindow{Name: w.Name, Role: w.Role, OfferedBy: by, Opens: w.Opens, Guard: w.Guard})
	}
	for _, w := range protocol.OutsideWindows() {
		out.OutsideWindows = append(out.OutsideWindows, listOutside{Name: w.Name, Role: w.Role, Opens: w.Opens, Guard: w.Guard})
	}
	for _, s := range scenarios.All() {
		out.Scenarios = append(out.Scenarios, listScenarioOf(s, t, scenarios.ProfileDefault))
	}
	for _, s := range scenarios.Production() {
		out.Scenarios = append(out.Scenarios, listScenarioOf(s, t, scenarios.ProfileProduction))
	}
	for _, k := range fault.Kinds() {
		out.FaultKinds = append(out.FaultKinds, listFaultKind{Name: k.Name(), Opens: k.Opens(), Doc: k.Doc()})
	}
	for _, v := range t.Variants {
		out.Variants = append(out.Variants, listVariant{Name: v.Name, Guard: v.Guard, Expect: v.Expect, CaughtBy: append([]string{}, v.CaughtBy...)})
	}
	for _, k := range t.KnownFindings {
		out.KnownFindings = append(out.KnownFindings, listKnown{Scenario: k.Scenario, Violations: append([]string{}, k.Violations...), Cause: strings.Join(strings.Fields(k.Cause), " ")})
	}
	return out
}

// listScenarioOf is s as it runs on t.
func listScenarioOf(s runner.Scenario, t *target.Target, profile string) listScenario {
	shown := asOnRelay(s, t)
	ls := listScenario{Name: s.Name, Profile: profile, Traffic: s.Workload.ProfileName(), Window: shown.Window, Description: shown.Description,
		AlsoChecks: alsoCheckList(s, t), Needs: needList(shown.Schedule(1)), Settings: []listSetting{}, Status: "offered"}
	if len(s.Also) > 0 {
		ls.BySeed = trafficNames(s)
	}
	if s.Relay != nil {
		ls.Relay = relayOn(s, t)
	}
	var lacking []string
	for _, name := range slices.Sorted(maps.Keys(s.Settings)) {
		_, offered := t.Settings[name]
		if !offered {
			lacking = append(lacking, name)
		}
		ls.Settings = append(ls.Settings, listSetting{Name: name, Value: s.Settings[name], Required: true, Offered: offered})
	}
	for _, name := range slices.Sorted(maps.Keys(s.Prefers)) {
		_, offered := t.Settings[name]
		ls.Settings = append(ls.Settings, listSetting{Name: name, Value: s.Prefers[name], Offered: offered})
	}
	_, how, err := s.On(t)
	switch {
	case len(lacking) > 0:
		ls.Status, ls.Reason = "not-run", "the target offers no "+strings.Join(lacking, ", ")
	case err != nil:
		ls.Status, ls.Reason = "not-run", err.Error()
	case slices.Contains(fault.NeedsOf(s.Schedule(1)), fault.CapCluster) && t.TakesBrokerNodes() != "":
		ls.Status, ls.Reason = "not-run", "needs a clustered broker, and "+t.TakesBrokerNodes()
	default:
		ls.How = how
	}
	return ls
}
