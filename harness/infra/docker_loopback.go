package infra

import (
	"net/netip"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
)

// onLoopback publishes a container's exposed ports on this host's
// loopback only: Docker's default, every interface, would open the run's
// PostgreSQL, RabbitMQ and Toxiproxy to the network (behind the run's
// passwords, but Toxiproxy's API has none). It reads the exposed ports
// when the container is created, so it may come anywhere among the
// options. Where no other option set a host config modifier, none is
// chained: testcontainers' default one only copies deprecated request
// fields this provider never sets.
func onLoopback() testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		prev := req.HostConfigModifier
		req.HostConfigModifier = func(hc *container.HostConfig) {
			if prev != nil {
				prev(hc)
			}
			if hc.PortBindings == nil {
				hc.PortBindings = network.PortMap{}
			}
			for _, spec := range req.ExposedPorts {
				p, err := network.ParsePort(spec)
				if err != nil {
					continue // testcontainers refuses it with its own error
				}
				hc.PortBindings[p] = []network.PortBinding{{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1})}}
			}
		}
		return nil
	}
}
