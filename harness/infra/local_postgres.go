package infra

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5"
)

const pgBin = "/usr/lib/postgresql/15/bin"

// startPostgres runs initdb and starts the postmaster as a foreground child,
// then waits until it accepts a connection.
func (l *Local) startPostgres(ctx context.Context) error {
	data := filepath.Join(l.dir, "pg")
	env := []string{
		"PATH=" + pathEnv(),
		"HOME=" + l.dir,
		"LANG=C",
		"LC_ALL=C",
		"TZ=UTC",
	}
	initdb, err := spawn(l.dir, "initdb", []string{
		filepath.Join(pgBin, "initdb"),
		"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C",
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

	pg, err := spawn(l.dir, "postgres", []string{
		filepath.Join(pgBin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(l.pgPort),
		"-k", l.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=500",
		"-c", "shared_buffers=128MB",
	}, env, l.cred)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	l.pg = pg // l is not shared yet: StartLocal has not returned

	err = waitReady(ctx, pg, "postgres", func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, l.PostgresURL("postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var one int
		return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// PostgresAddr implements Infra.
func (l *Local) PostgresAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.pgPort))
}

// PostgresURL implements Infra.
func (l *Local) PostgresURL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     l.PostgresAddr(),
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
	if err := l.adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabase implements Infra.
func (l *Local) DropDatabase(ctx context.Context, name string) error {
	if err := validIdentifier(name); err != nil {
		return fmt.Errorf("drop database: %w", err)
	}
	if err := l.adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
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
