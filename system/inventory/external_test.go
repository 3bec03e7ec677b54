package inventory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"faultline/harness/infra"
)

// services is what these tests need from the infrastructure; *infra.Local
// provides it, and so does externalServices.
type services interface {
	PostgresAddr() string
	PostgresURL(database string) string
	CreateDatabase(ctx context.Context, name string) error
	DropDatabase(ctx context.Context, name string) error
	AMQPAddr() string
	AMQPURL(vhost string) string
	CreateVHost(ctx context.Context, name string) error
	DeleteVHost(ctx context.Context, name string) error
	Queue(ctx context.Context, vhost, queue string) (infra.QueueInfo, error)
}

// externalServices are already running PostgreSQL and RabbitMQ, named by
// FAULTLINE_TEST_PG_URL (a superuser URL), FAULTLINE_TEST_AMQP_URL (guest on
// the default vhost) and FAULTLINE_TEST_AMQP_API (the management API base
// URL with credentials). For development when the local provider cannot run.
type externalServices struct {
	pg, amqp, api *url.URL
}

func newExternalServices(pgURL, amqpURL, apiURL string) (*externalServices, error) {
	var s externalServices
	var err error
	if s.pg, err = url.Parse(pgURL); err != nil {
		return nil, fmt.Errorf("FAULTLINE_TEST_PG_URL: %w", err)
	}
	if s.amqp, err = url.Parse(amqpURL); err != nil {
		return nil, fmt.Errorf("FAULTLINE_TEST_AMQP_URL: %w", err)
	}
	if s.api, err = url.Parse(strings.TrimSuffix(apiURL, "/")); err != nil {
		return nil, fmt.Errorf("FAULTLINE_TEST_AMQP_API: %w", err)
	}
	return &s, nil
}

func (s *externalServices) PostgresAddr() string { return s.pg.Host }

func (s *externalServices) PostgresURL(database string) string {
	u := *s.pg
	u.Path = "/" + database
	return u.String()
}

func (s *externalServices) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.PostgresURL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func (s *externalServices) CreateDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

func (s *externalServices) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func (s *externalServices) AMQPAddr() string { return s.amqp.Host }

func (s *externalServices) AMQPURL(vhost string) string {
	u := *s.amqp
	u.Path, u.RawPath = "/"+vhost, "/"+url.PathEscape(vhost)
	return u.String()
}

func (s *externalServices) mgmt(ctx context.Context, method, path string, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.api.String()+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s %s: %w", method, path, infra.ErrNotFound)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (s *externalServices) CreateVHost(ctx context.Context, name string) error {
	if err := s.mgmt(ctx, http.MethodPut, "/vhosts/"+url.PathEscape(name), "", nil); err != nil {
		return err
	}
	user := s.amqp.User.Username()
	return s.mgmt(ctx, http.MethodPut, "/permissions/"+url.PathEscape(name)+"/"+url.PathEscape(user),
		`{"configure":".*","write":".*","read":".*"}`, nil)
}

func (s *externalServices) DeleteVHost(ctx context.Context, name string) error {
	return s.mgmt(ctx, http.MethodDelete, "/vhosts/"+url.PathEscape(name), "", nil)
}

func (s *externalServices) Queue(ctx context.Context, vhost, queue string) (infra.QueueInfo, error) {
	var q struct {
		Messages  int `json:"messages"`
		Ready     int `json:"messages_ready"`
		Unacked   int `json:"messages_unacknowledged"`
		Consumers int `json:"consumers"`
	}
	err := s.mgmt(ctx, http.MethodGet, "/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(queue), "", &q)
	return infra.QueueInfo{Messages: q.Messages, Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers}, err
}
