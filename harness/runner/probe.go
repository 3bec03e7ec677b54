package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"faultline/harness/check"
	"faultline/harness/infra"
)

// queueProbe reads queue depths exactly, with a passive declare over AMQP
// (the management API's counters lag by seconds), and takes the unacked
// and consumer counts from the management API.
type queueProbe struct {
	infra infra.Infra
	vhost string

	mu   sync.Mutex
	conn *amqp.Connection
}

func (p *queueProbe) queue(ctx context.Context, queue string) (check.QueueInfo, error) {
	ready, err := p.ready(queue)
	if err != nil {
		return check.QueueInfo{}, err
	}
	m, err := p.infra.Queue(ctx, p.vhost, queue)
	if err != nil {
		return check.QueueInfo{}, err
	}
	return check.QueueInfo{Ready: ready, Unacked: m.Unacked, Messages: ready + m.Unacked, Consumers: m.Consumers}, nil
}

// ready is the exact number of ready messages.
func (p *queueProbe) ready(queue string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.IsClosed() {
		conn, err := amqp.DialConfig(p.infra.AMQPURL(p.vhost), amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
		if err != nil {
			return 0, fmt.Errorf("probe %s: %w", queue, err)
		}
		p.conn = conn
	}
	ch, err := p.conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", queue, err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", queue, err)
	}
	return q.Messages, nil
}

func (p *queueProbe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		_ = p.conn.CloseDeadline(time.Now().Add(time.Second))
	}
}
