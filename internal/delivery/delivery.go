// Package delivery is where PurrNet's delivery method bytes (wire.Delivery,
// carried by its UDP framing) and LiteNetLib's delivery methods
// (litenet.Method) meet: the same five methods with LiteNetLib's values,
// converted here and nowhere else. The relay's UDP transport and the Go
// client both convert through it; TestConversion holds each pair together
// by name.
package delivery

import (
	"github.com/purrfly/purrfly/litenet"
	"github.com/purrfly/purrfly/wire"
)

// Method is the LiteNetLib method a frame of delivery method d is sent
// with.
func Method(d wire.Delivery) litenet.Method { return litenet.Method(d) }

// Of is the delivery method of a message LiteNetLib delivered with m.
func Of(m litenet.Method) wire.Delivery { return wire.Delivery(m) }
