package wire

// Admin API of the balancer (guarded by the shared SECRET, sent as
// "Authorization: Bearer <SECRET>"): the rollout tool and operators use it.
const (
	PathInstances  = "/v1/instances"            // GET -> InstancesResponse
	PathDrainFmt   = "/v1/instances/%s/drain"   // POST, id = bootId or machineId -> Instance
	PathUndrainFmt = "/v1/instances/%s/undrain" // POST: ends an admin drain -> Instance
)

// Instance statuses.
const (
	InstanceLive     = "live"
	InstanceDraining = "draining"
)

// Instance is one relay registration as the admin API shows it.
type Instance struct {
	BootID        string `json:"bootId"`
	MachineID     string `json:"machineId"`
	Region        string `json:"region"`
	Endpoint      string `json:"endpoint"`
	Host          string `json:"host"`
	Status        string `json:"status"` // InstanceLive or InstanceDraining
	Rooms         int64  `json:"rooms"`
	Connections   int64  `json:"connections"`
	LastHeartbeat string `json:"lastHeartbeat"` // RFC 3339, UTC
}

// InstancesResponse is the body of GET /v1/instances.
type InstancesResponse struct {
	Instances []Instance `json:"instances"`
}
