package inventory

import "time"

// retentionInMS is the cleanup-retention-in-ms variant: the cleanup reads
// its retention's number of seconds as milliseconds (4s becomes 4ms), so
// it deletes every inbox row but the last few milliseconds' and a
// redelivery or replay inside the configured retention takes effect
// again. (The correct cleanup deletes only rows older than the retention.)
func retentionInMS(d time.Duration) time.Duration {
	return time.Duration(d.Seconds()) * time.Millisecond
}
