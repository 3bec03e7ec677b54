// Package service opens what every pipeline program starts with: its event
// log, its crash points (armed from FAULTLINE_CRASHPOINTS) and its database
// pool.
package service

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/faultline-dev/faultline/protocol/eventlog"
	"github.com/faultline-dev/faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/system/dbutil"
)

// Base is a program's event log, crash points and database pool.
type Base struct {
	Log    *eventlog.Log
	Points *crashpoint.Set
	DB     *pgxpool.Pool
}

// Open opens the base of a program of kind (order, relay, inventory).
func Open(ctx context.Context, kind, instance, eventLog, dbURL string, maxConns int32) (*Base, error) {
	log, err := eventlog.Open(eventLog, instance)
	if err != nil {
		return nil, err
	}
	points := crashpoint.NewSet(kind, log)
	if err := points.ArmFromEnv(); err != nil {
		log.Close()
		return nil, err
	}
	db, err := dbutil.Open(ctx, dbURL, maxConns)
	if err != nil {
		log.Close()
		return nil, err
	}
	return &Base{Log: log, Points: points, DB: db}, nil
}

// Close closes the pool and the event log.
func (b *Base) Close() {
	b.DB.Close()
	_ = b.Log.Close()
}
