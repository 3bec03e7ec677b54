package infra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// A local PostgreSQL with a streaming standby (LocalOptions.Standby).
//
// What holds, and why:
//   - The standby is a pg_basebackup of the primary, taken right after the
//     primary is up, running on a port of its own in the run's folder
//     (data in pg-standby, socket in pgsock-standby, mode 0700), as the
//     same unprivileged user.
//   - It replicates as the role replicator, whose random password is in a
//     0600 passfile (replication.pgpass) of the run's folder and nowhere
//     else: not on a command line, not in a configuration file. pg_hba
//     asks it for the password (scram-sha-256), as it asks everyone.
//   - Its WAL receiver reaches the primary through a forwarder of this
//     process, never directly: HoldReplication cuts the forwarder, which
//     drops the replication connection and every reconnect, and
//     ReleaseReplication restores it. wal_sender_timeout and
//     wal_receiver_timeout are 2 s and wal_retrieve_retry_interval 100 ms,
//     so either side notices a link that stalls instead of dropping, and
//     the standby is back within a fraction of a second of a restore.
//   - wal_keep_size (1 GB) keeps the WAL a held standby needs to catch up.
//   - "sync": the primary names the standby in synchronous_standby_names
//     (synchronous_commit stays on) once the standby streams; before, the
//     primary's own set-up commits would wait for a standby that is not
//     there yet. The standby's copy of the configuration does not name
//     itself, so the promoted server commits without waiting.
//   - A synchronous commit whose wait for the standby is cut short is not
//     undone: PostgreSQL has committed it locally before it waits (the row
//     is invisible while it waits, and visible the moment the wait ends).
//     pg_cancel_backend or the client's own cancel request end the wait
//     with a WARNING ("canceling wait for synchronous replication ... The
//     transaction has already committed locally") and no error;
//     pg_terminate_backend ends it with that WARNING and a FATAL error, so
//     the client is told it failed. statement_timeout does not end it:
//     PostgreSQL disarms the timeout before it commits. A client that just
//     drops its connection leaves the backend waiting, the commit invisible
//     until the standby is released. That is the window a held
//     synchronous standby opens; a failover then loses the row.
//     TestLocalStandbySync measures each of these.

// Standby modes of LocalOptions.Standby.
const (
	StandbyNone  = ""
	StandbyAsync = "async"
	StandbySync  = "sync"
)

const (
	replicationRole = "replicator"
	standbyAppName  = "fl_standby" // application_name of the standby's WAL receiver
	promoteWait     = 60           // seconds pg_promote waits for the promotion
	catchUpPoll     = 20 * time.Millisecond
)

// standby is the state of a Local's standby. The fields above mu are set
// while StartLocal runs and fixed after.
type standby struct {
	mode  string
	port  int
	pass  string // the replication role's password
	child *child // the standby's postmaster
	fwd   *forwarder
	// front is "the primary" as everyone else reaches it (PostgresAddr,
	// the processes' links): a forwarder to the primary, re-pointed to
	// the promoted standby by Failover, so no client needs a new address.
	front   *forwarder
	took    time.Duration // from the primary ready to the standby streaming
	mu      sync.Mutex    // serializes Hold, Release and Failover
	moved   atomic.Bool   // promoted: the standby is the primary
	killed  atomic.Bool   // the primary was killed by Failover
	dataDir string
}

// LocalReplicated is a Local with a standby: it implements Replicated.
// Its Infra methods are the Local's; PostgresAddr, PostgresURL,
// LinkUpstreams, CreateDatabase and DropDatabase name the primary, after
// Failover the promoted standby.
type LocalReplicated struct {
	*Local
}

var _ Replicated = (*LocalReplicated)(nil)

// Replicated returns l as a Replicated provider, if StartLocal gave it a
// standby (LocalOptions.Standby).
func (l *Local) Replicated() (*LocalReplicated, bool) {
	if l.rep == nil {
		return nil, false
	}
	return &LocalReplicated{l}, true
}

func checkStandbyMode(mode string) error {
	switch mode {
	case StandbyNone, StandbyAsync, StandbySync:
		return nil
	}
	return fmt.Errorf("LocalOptions.Standby %q: want %q, %q or %q", mode, StandbyNone, StandbyAsync, StandbySync)
}

// primaryPort is the port "the primary" is reached on: the front
// forwarder's with a standby (it leads to whichever server is the primary
// now), else the server's.
func (l *Local) primaryPort() int {
	if l.rep != nil && l.rep.front != nil {
		_, port, _ := splitHostPort(l.rep.front.Addr())
		return port
	}
	return l.pgPort
}

// primaryArgs are the primary's settings for a standby to stream from it
// (wal_level and max_wal_senders every server has: logicalArgs).
func (l *Local) primaryArgs() []string {
	if l.rep == nil {
		return nil
	}
	return []string{
		"-c", "wal_keep_size=1GB",
		"-c", "wal_sender_timeout=2s",
	}
}

// standbyPgpass is the passfile of the replication role.
func (l *Local) standbyPgpass() string { return filepath.Join(l.dir, "replication.pgpass") }

func (l *Local) standbySocketDir() string { return filepath.Join(l.dir, "pgsock-standby") }

// prepareStandby picks the standby's port, password and socket folder.
func (l *Local) prepareStandby() error {
	r := l.rep
	var err error
	if r.port, err = l.alloc.Port(); err != nil {
		return fmt.Errorf("standby port: %w", err)
	}
	if r.pass, _, _, err = credentials(); err != nil {
		return err
	}
	if err := os.Mkdir(l.standbySocketDir(), 0o700); err != nil {
		return fmt.Errorf("standby socket folder: %w", err)
	}
	// Any host and port: the standby reaches the primary through the
	// forwarder, whose port is not known yet, and pg_basebackup directly.
	line := "*:*:*:" + replicationRole + ":" + r.pass + "\n"
	if err := os.WriteFile(l.standbyPgpass(), []byte(line), 0o600); err != nil {
		return fmt.Errorf("replication passfile: %w", err)
	}
	return nil
}

// startStandby runs once the primary answers: it creates the replication
// role, takes a base backup, starts the standby behind a forwarder and
// waits until it streams (for "sync", until the primary waits for it).
func (l *Local) startStandby(ctx context.Context, env []string) error {
	r := l.rep
	begin := time.Now()
	front, err := l.alloc.Listen()
	if err != nil {
		return fmt.Errorf("standby: the primary's front port: %w", err)
	}
	r.front = newForwarder(front, net.JoinHostPort("127.0.0.1", strconv.Itoa(l.pgPort)))
	r.dataDir = filepath.Join(l.dir, "pg-standby")
	// The password is hex: safe inside a literal. The statement is not
	// logged (log_statement is none, and it does not fail).
	if err := l.adminExec(ctx, "CREATE ROLE "+replicationRole+" WITH REPLICATION LOGIN PASSWORD '"+r.pass+"'"); err != nil {
		return fmt.Errorf("standby: create replication role: %w", err)
	}

	env = append(env, "PGPASSFILE="+l.standbyPgpass())
	backup, err := spawn(l.dir, "pg_basebackup", []string{
		filepath.Join(l.pgIn.Bin, "pg_basebackup"),
		"-D", r.dataDir,
		"-h", "127.0.0.1", "-p", strconv.Itoa(l.pgPort), "-U", replicationRole, "-w",
		"-X", "stream",
		"-c", "fast", // an immediate checkpoint, not a spread one
		"--no-sync", // the copy is fresh; the standby server keeps fsync on
	}, env, l.cred)
	if err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	select {
	case <-backup.done:
	case <-ctx.Done():
		backup.kill(syscall.SIGKILL)
		<-backup.done
		return fmt.Errorf("standby: pg_basebackup: %w", ctx.Err())
	}
	if backup.waitErr != nil {
		return fmt.Errorf("standby: pg_basebackup: %w", backup.exitError())
	}
	_ = os.Remove(filepath.Join(l.dir, "pg_basebackup.pid"))
	// standby.signal: start as a standby (the server removes it at
	// promotion). Written as the user the server runs as.
	signal := filepath.Join(r.dataDir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	if l.cred != nil {
		if err := os.Chown(signal, int(l.cred.Uid), int(l.cred.Gid)); err != nil {
			return fmt.Errorf("standby: %w", err)
		}
	}

	ln, err := l.alloc.Listen()
	if err != nil {
		return fmt.Errorf("standby: forwarder port: %w", err)
	}
	r.fwd = newForwarder(ln, net.JoinHostPort("127.0.0.1", strconv.Itoa(l.pgPort)))
	fhost, fport, err := splitHostPort(r.fwd.Addr())
	if err != nil {
		return fmt.Errorf("standby: forwarder: %w", err)
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=%s passfile=%s application_name=%s sslmode=disable connect_timeout=2",
		fhost, fport, replicationRole, l.standbyPgpass(), standbyAppName)
	sb, err := spawn(l.dir, "postgres-standby", pgServerArgv(l.pgIn.Bin, r.dataDir, r.port, l.standbySocketDir(),
		"-c", "hot_standby=on",
		"-c", "primary_conninfo="+conninfo,
		"-c", "wal_receiver_timeout=2s",
		"-c", "wal_receiver_status_interval=1s",
		"-c", "wal_retrieve_retry_interval=100ms",
		"-c", "wal_sender_timeout=2s", // for whoever streams from it once promoted
		"-c", "wal_keep_size=1GB",
	), env, l.cred)
	if err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	r.child = sb // l is not shared yet

	err = waitReady(ctx, sb, "postgres standby", l.pgAnswers(l.urlOn(r.port, "postgres")))
	if err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	if r.mode == StandbySync {
		if err := l.adminExec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+standbyAppName+"'"); err != nil {
			return fmt.Errorf("standby: name it synchronous: %w", err)
		}
		if err := l.adminExec(ctx, "SELECT pg_reload_conf()"); err != nil {
			return fmt.Errorf("standby: reload the primary's configuration: %w", err)
		}
	}
	want := "async"
	if r.mode == StandbySync {
		want = "sync"
	}
	err = waitReady(ctx, sb, "the standby to stream ("+want+")", func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, l.urlOn(l.pgPort, "postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var state, syncState string
		err = conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, standbyAppName).Scan(&state, &syncState)
		if err != nil {
			return fmt.Errorf("pg_stat_replication: %w", err)
		}
		if state != "streaming" || syncState != want {
			return fmt.Errorf("standby is %s, %s", state, syncState)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	r.took = time.Since(begin)
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("address %q has no port", addr)
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	return addr[:i], port, nil
}

// Synchronous implements Replicated.
func (r *LocalReplicated) Synchronous() bool { return r.rep.mode == StandbySync }

var errPromoted = errors.New("the standby was promoted: there is no standby left")

// HoldReplication implements Replicated: it cuts the forwarder the
// standby's WAL receiver goes through, which drops the replication
// connection at once and every reconnect until ReleaseReplication. The
// primary goes on committing; a synchronous primary's commits wait until
// ReleaseReplication, or until their wait is cancelled (then they are
// committed locally all the same: see the notes at the top of this file).
func (r *LocalReplicated) HoldReplication(ctx context.Context) error {
	s := r.rep
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hold replication: %w", err)
	}
	if s.moved.Load() || s.killed.Load() {
		return fmt.Errorf("hold replication: %w", errPromoted)
	}
	s.fwd.Cut()
	return nil
}

// ReleaseReplication implements Replicated: it restores the link and waits
// until the standby has replayed the primary's WAL up to where it was when
// the link came back (pg_current_wal_lsn), bounded by ctx. Without a hold
// it only waits for that catch-up.
func (r *LocalReplicated) ReleaseReplication(ctx context.Context) error {
	s := r.rep
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.moved.Load() || s.killed.Load() {
		return fmt.Errorf("release replication: %w", errPromoted)
	}
	s.fwd.Restore()
	err := waitReplayed(ctx, r.urlOn(r.pgPort, "postgres"), r.urlOn(s.port, "postgres"), s.child.done, s.child.exitError)
	if err != nil {
		return fmt.Errorf("release replication: %w", err)
	}
	return nil
}

// waitReplayed reads the WAL position of the primary at primaryURL
// (pg_current_wal_lsn) and waits until the standby at standbyURL has
// replayed up to it, bounded by ctx. When exited is closed (the
// standby's process ended; nil, never) it gives up with exitErr().
func waitReplayed(ctx context.Context, primaryURL, standbyURL string, exited <-chan struct{}, exitErr func() error) error {
	pconn, err := pgx.Connect(ctx, primaryURL)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	defer pconn.Close(context.WithoutCancel(ctx))
	var target string
	if err := pconn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&target); err != nil {
		return fmt.Errorf("primary's LSN: %w", err)
	}
	want, err := parseLSN(target)
	if err != nil {
		return err
	}
	sconn, err := pgx.Connect(ctx, standbyURL)
	if err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	var last string
	for {
		var replay *string
		if err := sconn.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&replay); err != nil {
			return fmt.Errorf("standby's replay LSN: %w", err)
		}
		if replay != nil {
			last = *replay
			got, err := parseLSN(last)
			if err != nil {
				return err
			}
			if got >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby at %s, primary at %s: %w", last, target, ctx.Err())
		case <-exited:
			return exitErr()
		case <-time.After(catchUpPoll):
		}
	}
}

// Failover implements Replicated. It reads the primary's pg_current_wal_lsn
// (on a connection opened before, so the read is right before the kill),
// SIGKILLs the primary's postmaster and every backend of it at once,
// promotes the standby (pg_promote, waiting) and waits until a transaction
// id can be assigned on it. From then on the Infra methods name the
// promoted server.
//
// StandbyLSN is the promoted server's pg_last_wal_replay_lsn read after the
// promotion: promotion replays whatever WAL the standby had received before
// it ends recovery, and then the value stays fixed, so it is exactly what
// the promoted server has. A commit on the primary between the LSN read and
// the kill (microseconds) is not counted in LostBytes. Took runs from the
// kill to the first write the promoted server accepted.
//
// A second Failover is an error: there is no standby left. A failover that
// fails after the kill leaves no primary.
func (r *LocalReplicated) Failover(ctx context.Context) (Failover, error) {
	s := r.rep
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.moved.Load() || s.killed.Load() {
		return Failover{}, fmt.Errorf("failover: %w", errPromoted)
	}
	sconn, err := pgx.Connect(ctx, r.urlOn(s.port, "postgres"))
	if err != nil {
		return Failover{}, fmt.Errorf("failover: standby: %w", err)
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	pconn, err := pgx.Connect(ctx, r.urlOn(r.pgPort, "postgres"))
	if err != nil {
		return Failover{}, fmt.Errorf("failover: primary: %w", err)
	}
	var f Failover
	err = pconn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&f.PrimaryLSN)
	if err != nil {
		_ = pconn.Close(context.WithoutCancel(ctx))
		return Failover{}, fmt.Errorf("failover: primary's LSN: %w", err)
	}
	begin := time.Now()
	s.killed.Store(true)
	if err := r.killPrimary(); err != nil {
		return Failover{}, fmt.Errorf("failover: %w", err)
	}
	_ = pconn.Close(context.WithoutCancel(ctx)) // its server is gone

	var promoted bool
	if err := sconn.QueryRow(ctx, `SELECT pg_promote(true, $1)`, promoteWait).Scan(&promoted); err != nil {
		return Failover{}, fmt.Errorf("failover: promote: %w", err)
	}
	if !promoted {
		return Failover{}, fmt.Errorf("failover: promote: not promoted within %d s; last output of the standby:\n%s", promoteWait, s.child.tail())
	}
	var last error
	for {
		var inRecovery bool
		last = sconn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery)
		if last == nil && inRecovery {
			last = errors.New("still in recovery")
		}
		if last == nil {
			var xid int64
			last = sconn.QueryRow(ctx, `SELECT txid_current()`).Scan(&xid) // fails in recovery: it writes
		}
		if last == nil {
			break
		}
		select {
		case <-ctx.Done():
			return Failover{}, fmt.Errorf("failover: wait until the promoted server writes: %w (last: %v)", ctx.Err(), last)
		case <-time.After(catchUpPoll):
		}
	}
	f.Took = time.Since(begin)
	s.moved.Store(true)
	if s.front != nil {
		s.front.SetUpstream(net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
	}

	if err := sconn.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&f.StandbyLSN); err != nil {
		return f, fmt.Errorf("failover: promoted server's replay LSN: %w", err)
	}
	p, err := parseLSN(f.PrimaryLSN)
	if err != nil {
		return f, fmt.Errorf("failover: %w", err)
	}
	sb, err := parseLSN(f.StandbyLSN)
	if err != nil {
		return f, fmt.Errorf("failover: %w", err)
	}
	if p > sb {
		f.LostBytes = int64(p - sb)
	}
	r.logf("local infra: failover in %s: primary at %s, standby at %s, %d bytes lost",
		f.Took.Round(time.Millisecond), f.PrimaryLSN, f.StandbyLSN, f.LostBytes)
	return f, nil
}

// killPrimary SIGKILLs the primary's postmaster group and every process
// working in its data folder (the backends are in sessions of their own),
// all found first and then killed in one go, and waits until they are gone.
func (l *Local) killPrimary() error {
	groups := map[int]bool{}
	if !l.pg.exited() {
		groups[l.pg.pid] = true // not reaped yet: the group id is still ours
	}
	if left := killStrays(filepath.Join(l.dir, "pg"), groups, killWait); len(left) > 0 {
		return fmt.Errorf("kill the primary: processes %v survive SIGKILL", left)
	}
	kctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	if err := l.pg.wait(kctx); err != nil {
		return fmt.Errorf("kill the primary: %w", err)
	}
	return nil
}

// parseLSN reads PostgreSQL's text form of a WAL position, X/Y in hex.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q: want X/Y", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	return h<<32 | l, nil
}

var _ ReplicatedStarter = (*Local)(nil)

// StartReplicated implements ReplicatedStarter: another Local, on l's port
// allocator, whose PostgreSQL has a standby (synchronous or not).
func (l *Local) StartReplicated(ctx context.Context, synchronous bool) (Replicated, error) {
	mode := StandbyAsync
	if synchronous {
		mode = StandbySync
	}
	other, err := StartLocal(ctx, LocalOptions{Log: l.logw, KeepDir: l.keepDir, Ports: l.alloc, Standby: mode})
	if err != nil {
		return nil, err
	}
	r, ok := other.Replicated()
	if !ok {
		_ = other.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("local infra: started with standby %q but got none", mode)
	}
	return r, nil
}
