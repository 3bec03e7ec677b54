package infra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// startPostgres runs initdb and starts the postmaster as a foreground child,
// then waits until it accepts a connection.
//
// Every connection, TCP and unix socket alike, must give the superuser's
// password (scram-sha-256 on every pg_hba line): with trust, any local user
// would be superuser and could run programs with COPY ... FROM PROGRAM. The
// password reaches initdb in a 0600 file removed as soon as initdb is done.
func (l *Local) startPostgres(ctx context.Context) error {
	data := filepath.Join(l.dir, "pg")
	pwfile, err := l.writePwfile()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer os.Remove(pwfile) // also when initdb fails or ctx ends
	env := l.pgEnv()
	initdb, err := spawn(l.dir, "initdb", []string{
		filepath.Join(l.pgIn.Bin, "initdb"),
		"-D", data, "-U", "postgres", "--auth=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--locale=C",
		"--no-sync", // initdb only; the server keeps fsync on
	}, env, l.cred)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	select {
	case <-initdb.done:
	case <-ctx.Done():
		initdb.kill(syscall.SIGKILL)
		<-initdb.done
		return fmt.Errorf("postgres: initdb: %w", ctx.Err())
	}
	if initdb.waitErr != nil {
		return fmt.Errorf("postgres: initdb: %w", initdb.exitError())
	}
	_ = os.Remove(filepath.Join(l.dir, "initdb.pid"))
	if err := os.Remove(pwfile); err != nil {
		return fmt.Errorf("postgres: remove the password file: %w", err)
	}

	pg, err := l.spawnPostgres()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	l.pg = pg // l is not shared yet: StartLocal has not returned

	err = waitReady(ctx, pg, "postgres", l.pgAnswers(l.PostgresURL("postgres")))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if l.rep != nil {
		return l.startStandby(ctx, env)
	}
	return nil
}

// pgEnv is the environment of this provider's PostgreSQL programs.
func (l *Local) pgEnv() []string {
	return []string{
		"PATH=" + pathEnv(),
		"HOME=" + l.dir,
		"LANG=C",
		"LC_ALL=C",
		"TZ=UTC",
	}
}

// CrashPostgres implements DatabaseRestarter: the postmaster's group and
// every backend SIGKILLed in one go (see killPrimary). A server with a
// standby is failed over (LocalReplicated.Failover), not restarted.
func (l *Local) CrashPostgres(ctx context.Context) error {
	if l.rep != nil {
		return errors.New("local infra: crash postgres: a server with a standby is failed over, not restarted")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return errors.New("local infra: crash postgres: infrastructure is stopped")
	}
	if err := l.killPrimary(); err != nil {
		return fmt.Errorf("local infra: crash postgres: %w", err)
	}
	return nil
}

// StartPostgres implements DatabaseRestarter: the postmaster started
// again as it first was (same data folder, port, settings); it removes
// the dead one's lock file itself, recovers, and then answers.
func (l *Local) StartPostgres(ctx context.Context) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return errors.New("local infra: start postgres: infrastructure is stopped")
	}
	if !l.pg.exited() {
		l.mu.Unlock()
		return errors.New("local infra: start postgres: already running")
	}
	t := time.Now()
	pg, err := l.spawnPostgres()
	if err != nil {
		l.mu.Unlock()
		return fmt.Errorf("local infra: start postgres: %w", err)
	}
	l.pg = pg // Stop stops this one from now on
	l.mu.Unlock()
	if err := waitReady(ctx, pg, "postgres", l.pgAnswers(l.PostgresURL("postgres"))); err != nil {
		return fmt.Errorf("local infra: start postgres: %w", err)
	}
	l.logf("local infra: postgres recovered and answering in %s", time.Since(t).Round(10*time.Millisecond))
	return nil
}

// spawnPostgres starts this provider's primary postmaster on its data
// folder: at start-up, and again after CrashPostgres.
func (l *Local) spawnPostgres() (*child, error) {
	return spawn(l.dir, "postgres", pgServerArgv(l.pgIn.Bin, filepath.Join(l.dir, "pg"), l.pgPort, l.socketDir(), l.primaryArgs()...), l.pgEnv(), l.cred)
}

// pgServerArgv is the command line of a PostgreSQL server of this
// provider: the postgres in bin, its data folder, loopback port and socket folder, the
// settings every one has (a hot standby refuses to start with fewer
// max_connections or max_wal_senders than its primary's; logicalArgs),
// then extra -c settings.
func pgServerArgv(bin, data string, port int, socketDir string, extra ...string) []string {
	return append([]string{
		filepath.Join(bin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(port),
		"-k", socketDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=500",
		"-c", "shared_buffers=128MB",
	}, append(logicalArgs(), extra...)...)
}

// pgAnswers is a readiness probe: a query answered at url.
func (l *Local) pgAnswers(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var one int
		return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
}

// writePwfile writes the superuser's password for initdb --pwfile, mode
// 0600, owned by the user initdb runs as, and returns its path.
func (l *Local) writePwfile() (string, error) {
	path := filepath.Join(l.dir, "pg.pwfile")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	_, err = f.WriteString(l.pgPass + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && l.cred != nil {
		err = os.Chown(path, int(l.cred.Uid), int(l.cred.Gid))
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("password file: %w", err)
	}
	return path, nil
}

// socketDir is the folder of the server's unix socket, mode 0700.
func (l *Local) socketDir() string { return filepath.Join(l.dir, "pgsock") }

// PostgresAddr implements Infra: the primary's address (after a Failover,
// the promoted standby's).
func (l *Local) PostgresAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.primaryPort()))
}

// PostgresURL implements Infra: the superuser postgres with the run's
// password, on the primary.
func (l *Local) PostgresURL(database string) string {
	return l.urlOn(l.primaryPort(), database)
}

// urlOn is PostgresURL on the server at port (the primary's or the
// standby's: they share the superuser and its password).
func (l *Local) urlOn(port int, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", l.pgPass),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase implements Infra.
func (l *Local) CreateDatabase(ctx context.Context, name string) error {
	if err := validIdentifier(name); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	if err := l.adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+fileCopy); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabase implements Infra.
func (l *Local) DropDatabase(ctx context.Context, name string) error {
	return dropDatabase(ctx, l.PostgresURL("postgres"), name)
}

// adminExec runs one statement on the postgres database.
func (l *Local) adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, l.PostgresURL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func pathEnv() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return "/usr/local/bin:/usr/bin:/bin"
}
