package wire

import (
	"strings"
	"time"
)

// ServerInfo is one relay as the balancer's /servers lists it (step 1 of a
// PurrNet client). APIEndpoint is the relay's HTTP base URL; the client pings
// {apiEndpoint}/ping to pick the fastest region.
type ServerInfo struct {
	APIEndpoint    string `json:"apiEndpoint"`
	Host           string `json:"host"`
	RestPort       int    `json:"restPort"`
	UDPPort        int    `json:"udpPort"`
	UDPPortV2      int    `json:"udpPortV2"`
	WebSocketsPort int    `json:"webSocketsPort"`
	Region         string `json:"region"`
}

// ServersResponse is the body of GET /servers.
type ServersResponse struct {
	Servers []ServerInfo `json:"servers"`
}

// Ping is the body of GET /ping on relay and balancer: it proves the live
// process by its boot id.
type Ping struct {
	Role      string `json:"role"` // "relay" or "balancer"
	BootID    string `json:"bootId"`
	Version   string `json:"version"`
	Region    string `json:"region"`
	MachineID string `json:"machineId"`
	ImageRef  string `json:"imageRef"`
	// InternalProtocol is the relay<->balancer protocol version this process speaks.
	InternalProtocol int `json:"internalProtocol"`
	// Draining is true once the process stopped taking new rooms.
	Draining bool `json:"draining"`
	// Retiring is true once a deploy retired this relay (wire.PathRelayRetire):
	// no new room, its games play on, it stops when they have ended or at
	// RetireBy.
	Retiring bool      `json:"retiring,omitempty"`
	RetireBy time.Time `json:"retireBy,omitzero"`
}

// PathReady is the relay's readiness route (its Fly check): 200 with a
// Readiness while its current boot is registered with the balancer (or it
// runs standalone), 503 ErrNotReady whose message says why otherwise.
const PathReady = "/ready"

// Readiness is the body of a 200 from PathReady.
type Readiness struct {
	Ready  bool   `json:"ready"`
	BootID string `json:"bootId"`
	// Standalone: no balancer is configured, so there is nothing to be
	// registered with.
	Standalone bool `json:"standalone,omitempty"`
	// RegisteredAt is the last heartbeat the balancer accepted.
	RegisteredAt time.Time `json:"registeredAt,omitzero"`
}

// Capability is what a host (allocate) or client (join) needs to connect:
// the answer of POST/GET /allocate_ws and GET /join.
type Capability struct {
	Host      string `json:"host"`
	Secret    string `json:"secret"`
	Port      int    `json:"port"`
	UDPPort   int    `json:"udpPort"`
	UDPPortV2 int    `json:"udpPortV2"`
	SSL       bool   `json:"ssl"`
}

// Validate checks a capability as PurrNet does before using it: non-empty
// host and secret, port and udpPortV2 in 1..65535.
func (c Capability) Validate() error {
	switch {
	case strings.TrimSpace(c.Host) == "", len(c.Host) > 253:
		return ErrRelayBadAnswer.WithMessage("relay capability has no usable host")
	case c.Secret == "", len(c.Secret) > MaxSecretLen:
		return ErrRelayBadAnswer.WithMessage("relay capability has no usable credential")
	case c.Port < 1 || c.Port > 65535, c.UDPPortV2 < 1 || c.UDPPortV2 > 65535,
		c.UDPPort < 0 || c.UDPPort > 65535:
		return ErrRelayBadAnswer.WithMessage("relay capability has no usable port")
	}
	return nil
}

// RoomSummary is one row of GET /list.
type RoomSummary struct {
	Name             string `json:"name"`
	Region           string `json:"region"`
	ConnectedPlayers int    `json:"connectedPlayers"`
}

// ListPageSize is the number of rooms per /list page.
const ListPageSize = 50

// ListResponse is the body of GET /list?page=N (pages count from 0).
type ListResponse struct {
	Results []RoomSummary `json:"results"`
	Total   int           `json:"total"`
}

// TotalConnections is the body of GET /getTotalConnections.
type TotalConnections struct {
	TotalConnections int `json:"totalConnections"`
}
