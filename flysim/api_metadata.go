package flysim

import (
	"net/http"
	"regexp"
)

// Machine metadata (flaps SetMetadata, GetMetadata, DeleteMetadata): the
// string map in the machine's config.metadata, where Fly keeps it and
// where a create or update may set it whole. The metadata routes change
// one key without a new version, a restart or a lease nonce (flaps sends
// none), as on Fly; the machine's updated_at moves and waiters wake.

// Metadata bounds.
const (
	maxMetadataKeys  = 64
	maxMetadataValue = 4 << 10
)

// metadataKeyRE is what a metadata key may be.
var metadataKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// validMetadata holds a config's metadata to the bounds above.
func validMetadata(md map[string]string) error {
	if len(md) > maxMetadataKeys {
		return errf(http.StatusBadRequest, "metadata has %d keys, at most %d", len(md), maxMetadataKeys)
	}
	for k, v := range md {
		if !metadataKeyRE.MatchString(k) {
			return errf(http.StatusBadRequest, "invalid metadata key %q", k)
		}
		if len(v) > maxMetadataValue {
			return errf(http.StatusBadRequest, "metadata value of %s is longer than %d bytes", k, maxMetadataValue)
		}
	}
	return nil
}

// getMetadata is GET .../machines/{id}/metadata: the map (empty: {}).
func (a *apiServer) getMetadata(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed {
		return errf(http.StatusNotFound, "machine not found")
	}
	out := map[string]string{}
	if m.config != nil {
		for k, v := range m.config.Metadata {
			out[k] = v
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setMetadata is POST .../metadata/{key} with {"value": "..."}: 204.
func (a *apiServer) setMetadata(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	var in struct {
		Value *string `json:"value"`
	}
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if in.Value == nil {
		return errf(http.StatusBadRequest, "a metadata value is required: {\"value\": \"...\"}")
	}
	return a.changeMetadata(w, m, key, in.Value)
}

// deleteMetadata is DELETE .../metadata/{key}: 204, also for a key that is
// not there.
func (a *apiServer) deleteMetadata(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	return a.changeMetadata(w, m, r.PathValue("key"), nil)
}

// changeMetadata sets key to *value, or deletes it when value is nil.
func (a *apiServer) changeMetadata(w http.ResponseWriter, m *machine, key string, value *string) error {
	if !metadataKeyRE.MatchString(key) {
		return errf(http.StatusBadRequest, "invalid metadata key %q", key)
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.state == StateDestroyed || m.state == StateDestroying || m.config == nil {
		return errf(http.StatusNotFound, "machine not found")
	}
	md := map[string]string{}
	for k, v := range m.config.Metadata {
		md[k] = v
	}
	if value == nil {
		delete(md, key)
	} else {
		md[key] = *value
		if err := validMetadata(md); err != nil {
			return err
		}
	}
	m.config.Metadata = md
	m.touchLocked(s.clk.Now())
	w.WriteHeader(http.StatusNoContent)
	return nil
}
