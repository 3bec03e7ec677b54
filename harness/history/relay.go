package history

// Relay models: how the target's relay takes work from the outbox. The
// windows faultline opens on a relay and the oracles it judges the outbox
// by follow the model.
const (
	// ModelClaim is the article's relay: it claims rows by a status column
	// (Processing, with a lease and a claim id), publishes them and marks
	// them Published.
	ModelClaim = "claim"
	// ModelOffset is a relay that keeps a position (a consumer offset) in
	// a table of its own and never updates the outbox rows: a row is
	// settled once the committed position is at or past it.
	ModelOffset = "offset"
	// ModelLog is a relay that tails logical replication (CDC): it writes
	// nothing to the outbox's database but its slot position.
	ModelLog = "log"
)

// RelayModels are the models a target file may name.
func RelayModels() []string { return []string{ModelClaim, ModelOffset, ModelLog} }
