package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/purrfly/purrfly/wire"
)

// Instances lists the relay registrations the balancer holds (admin API,
// guarded by the shared secret). Rollouts wait on it for exact boot ids.
func (b *Balancer) Instances(ctx context.Context, secret string) ([]wire.Instance, error) {
	var out wire.InstancesResponse
	if err := b.do(ctx, http.MethodGet, b.route(wire.PathInstances[1:]), adminAuth(secret), &out); err != nil {
		return nil, fmt.Errorf("failed to list instances: %w", err)
	}
	return out.Instances, nil
}

// Drain asks the balancer to place no new room on the relay whose boot id or
// machine id is id; its rooms keep working.
func (b *Balancer) Drain(ctx context.Context, secret, id string) (wire.Instance, error) {
	var out wire.Instance
	path := fmt.Sprintf(wire.PathDrainFmt, url.PathEscape(id))[1:]
	if err := b.do(ctx, http.MethodPost, b.route(path), adminAuth(secret), &out); err != nil {
		return wire.Instance{}, fmt.Errorf("failed to drain %s: %w", id, err)
	}
	return out, nil
}

// Undrain ends an admin drain of the relay whose boot id or machine id is
// id: new rooms may be placed there again (unless the relay itself says
// it drains). Undraining a relay that is not drained changes nothing.
func (b *Balancer) Undrain(ctx context.Context, secret, id string) (wire.Instance, error) {
	var out wire.Instance
	path := fmt.Sprintf(wire.PathUndrainFmt, url.PathEscape(id))[1:]
	if err := b.do(ctx, http.MethodPost, b.route(path), adminAuth(secret), &out); err != nil {
		return wire.Instance{}, fmt.Errorf("failed to undrain %s: %w", id, err)
	}
	return out, nil
}

// adminAuth is the deploy tool's credential: the first value of the
// SECRET list secret.
func adminAuth(secret string) [][2]string {
	return [][2]string{{"Authorization", "Bearer " + wire.SendSecret(secret)}}
}
