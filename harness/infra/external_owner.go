package infra

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The external provider's servers are not faultline's: a faultline killed
// (SIGKILL, a CI job cancelled) leaves its runs' databases there, the
// replication slots on them (each holding WAL back on the team's server
// until its disk fills) and its vhosts, and nothing of the servers goes
// with it. So each External holds, for its life, a session-level advisory
// lock on a key of its own, on a connection of its own, and marks every
// database and vhost it creates with that key (a database's comment, a
// vhost's description). A session ends with its process, whatever killed
// it: StartExternal removes what is marked with a key no session holds,
// and leaves what a faultline still running holds, on this host or
// another.

// ownerMark begins the mark of a database or vhost an External created;
// the owner's key follows it.
const ownerMark = "faultline run; its faultline holds advisory lock "

// ownerApplication is the owner's session's application_name, as
// pg_stat_activity shows it to the server's administrator.
const ownerApplication = "faultline (holds its runs' databases)"

func ownerComment(key int64) string { return ownerMark + strconv.FormatInt(key, 10) }

// parseOwner reads the owner's key from a mark; ok is false for anything
// else (a database or vhost that is not a faultline run's).
func parseOwner(mark string) (key int64, ok bool) {
	rest, found := strings.CutPrefix(mark, ownerMark)
	if !found {
		return 0, false
	}
	key, err := strconv.ParseInt(rest, 10, 64)
	return key, err == nil
}

// owner is an External's claim on what it creates: the session holding
// the advisory lock on key.
type owner struct {
	key  int64
	conn *pgx.Conn
}

// claimOwner opens the owner's session on p and takes the advisory lock
// on a key no session holds.
func claimOwner(ctx context.Context, p pgServer) (*owner, error) {
	cfg, err := pgx.ParseConfig(p.url(p.adminDatabase()))
	if err != nil {
		return nil, fmt.Errorf("the session that holds this faultline's runs: %w", err)
	}
	cfg.RuntimeParams["application_name"] = ownerApplication
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("the session that holds this faultline's runs: %w", err)
	}
	// A server that ends idle sessions (PostgreSQL 14's
	// idle_session_timeout) would end the claim while faultline runs.
	if _, err := conn.Exec(ctx, "SET idle_session_timeout = 0"); err != nil && !isUndefinedParameter(err) {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("the session that holds this faultline's runs: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])                           // never fails (crypto/rand)
	key := int64(binary.BigEndian.Uint64(b[:]) >> 1) // 63 random bits, positive: it prints without a sign
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil || !got {
		_ = conn.Close(context.WithoutCancel(ctx))
		if err == nil {
			err = fmt.Errorf("key %d is held by another session", key)
		}
		return nil, fmt.Errorf("the session that holds this faultline's runs: advisory lock: %w", err)
	}
	return &owner{key: key, conn: conn}, nil
}

// isUndefinedParameter: a server older than the parameter (SQLSTATE
// 42704, undefined_object).
func isUndefinedParameter(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704"
}

// release ends the owner's session, and with it the claim.
func (o *owner) release(ctx context.Context) error {
	if o == nil {
		return nil
	}
	return o.conn.Close(ctx)
}

// leftover is what one owner left: its databases and vhosts.
type leftover struct {
	databases, vhosts []string
}

// sweep removes the databases (their replication slots first) and vhosts
// marked with an owner's key that no session holds; it returns a line per
// owner whose leftovers it removed. What a live faultline holds stays.
func (e *External) sweep(ctx context.Context) ([]string, error) {
	left := map[int64]*leftover{}
	of := func(key int64) *leftover {
		if left[key] == nil {
			left[key] = &leftover{}
		}
		return left[key]
	}
	rows, err := e.owner.conn.Query(ctx,
		`SELECT datname::text, shobj_description(oid, 'pg_database') FROM pg_database WHERE shobj_description(oid, 'pg_database') LIKE $1`,
		ownerMark+"%")
	if err != nil {
		return nil, fmt.Errorf("list the databases faultline runs left: %w", err)
	}
	type marked struct{ name, mark string }
	dbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (marked, error) {
		var m marked
		return m, r.Scan(&m.name, &m.mark)
	})
	if err != nil {
		return nil, fmt.Errorf("list the databases faultline runs left: %w", err)
	}
	for _, d := range dbs {
		if key, ok := parseOwner(d.mark); ok && key != e.owner.key {
			of(key).databases = append(of(key).databases, d.name)
		}
	}
	vhosts, err := e.mgmt.vhosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("the vhosts faultline runs left: %w", err)
	}
	for _, v := range vhosts {
		if key, ok := parseOwner(v.Description); ok && key != e.owner.key {
			of(key).vhosts = append(of(key).vhosts, v.Name)
		}
	}
	keys := make([]int64, 0, len(left))
	for k := range left {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var removed []string
	for _, key := range keys {
		var free bool
		if err := e.owner.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&free); err != nil {
			return removed, fmt.Errorf("ask whether a faultline holds its runs: %w", err)
		}
		if !free {
			continue // a faultline that runs holds them
		}
		lo := left[key]
		err := e.removeLeftover(ctx, lo)
		if _, uerr := e.owner.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); uerr != nil && err == nil {
			err = uerr
		}
		if err != nil {
			return removed, fmt.Errorf("remove what a faultline that ended without cleaning up left: %w", err)
		}
		removed = append(removed, fmt.Sprintf("databases %v (and their replication slots), vhosts %v", lo.databases, lo.vhosts))
	}
	return removed, nil
}

func (e *External) removeLeftover(ctx context.Context, lo *leftover) error {
	for _, db := range lo.databases {
		if err := e.pg.dropDatabase(ctx, db); err != nil {
			return err
		}
	}
	for _, v := range lo.vhosts {
		if err := e.mgmt.deleteVHost(ctx, v); err != nil {
			return err
		}
	}
	return nil
}
