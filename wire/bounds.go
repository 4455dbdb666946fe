package wire

import "net/http"

// Refusals of the balancer's bounds.
var (
	// ErrTooManyRooms: the caller's address holds as many live rooms as
	// one address may (the balancer's BALANCER_MAX_ROOMS_PER_SOURCE).
	ErrTooManyRooms = newErr(http.StatusTooManyRequests, "too_many_rooms", true,
		"this address holds as many live rooms as one address may; retry once one has closed")
)
