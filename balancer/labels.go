package balancer

import (
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// parseLabelFilters reads every ?label= of GET /v1/rooms (repeatable, each
// "k:v" or a comma-separated "k:v,k2:v2"; all must match) with the
// selector rules of wire.ParseLabelSelector.
func parseLabelFilters(vals []string) (map[string]string, error) {
	if len(vals) > wire.MaxLabels {
		return nil, wire.ErrBadRequest.WithMessage("at most 16 label filters")
	}
	want, err := wire.ParseLabelSelector(strings.Join(vals, ","))
	if err != nil {
		return nil, wire.ErrBadRequest.WithMessage("label filter: " + err.Error())
	}
	return want, nil
}
