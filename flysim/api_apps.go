package flysim

import (
	"net/http"
)

// createAppRequest is flaps' CreateAppRequest.
type createAppRequest struct {
	Name      string `json:"name"`
	Org       string `json:"org_slug"`
	Network   string `json:"network"`
	AppRoleID string `json:"app_role_id"`
}

// appJSONLocked renders an app as flaps' App.
func (a *apiServer) appJSONLocked(ap *app) map[string]any {
	n := 0
	for _, m := range ap.order {
		if m.state != StateDestroyed {
			n++
		}
	}
	return map[string]any{
		"id": ap.cfg.Name, "name": ap.cfg.Name, "status": "deployed", "network": "default",
		"machine_count": n, "volume_count": 0, "internal_numeric_id": 0,
		"organization": map[string]any{"name": a.s.cfg.Org, "slug": a.s.cfg.Org},
	}
}

// checkOrg refuses an organisation other than the Sim's (empty means the
// Sim's: the one organisation the token reaches).
func (a *apiServer) checkOrg(slug string) error {
	if slug != "" && slug != a.s.cfg.Org {
		return errf(http.StatusNotFound, "organization %q not found (this sim emulates organization %q)", slug, a.s.cfg.Org)
	}
	return nil
}

// listApps is GET /v1/apps?org_slug= (flaps ListApps): the apps that exist,
// in config order; reserved apps appear once created.
func (a *apiServer) listApps(w http.ResponseWriter, r *http.Request) error {
	if err := a.checkOrg(r.URL.Query().Get("org_slug")); err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	apps := []map[string]any{}
	for _, ap := range a.s.order {
		if ap.created {
			apps = append(apps, a.appJSONLocked(ap))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_apps": len(apps), "apps": apps})
	return nil
}

func (a *apiServer) getApp(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	writeJSON(w, http.StatusOK, a.appJSONLocked(ap))
	return nil
}

// createApp is POST /v1/apps (flaps CreateApp). The Sim binds every proxy
// and UDP port at Start, so it creates only the apps its config declares
// reserved; the new app has no machines, no IPs and no secrets, as on Fly.
func (a *apiServer) createApp(w http.ResponseWriter, r *http.Request) error {
	var in createAppRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if !appNameRE.MatchString(in.Name) {
		return errf(http.StatusUnprocessableEntity, "Validation failed: Name %.70q is invalid (lower-case letters, digits and dashes, at most 63)", in.Name)
	}
	if err := a.checkOrg(in.Org); err != nil {
		return err
	}
	if a.s.cfg.Platform.taken(in.Name) {
		// Fly app names are global: another organisation holds this one.
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{
			"error": "Validation failed: Name has already been taken", "status": "name_taken"})
		return nil
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ap := s.apps[in.Name]
	switch {
	case ap != nil && ap.created:
		return errf(http.StatusUnprocessableEntity, "Validation failed: Name has already been taken")
	case ap == nil:
		return errf(http.StatusUnprocessableEntity,
			"flysim creates only the apps its config declares reserved (proxies and UDP ports are bound at start): add [[apps]] name = %q, reserved = true", in.Name)
	}
	ap.created, ap.createdAt = true, s.clk.Now()
	ap.touchLocked()
	s.log.Info("app created", "app", ap.cfg.Name)
	writeJSON(w, http.StatusCreated, a.appJSONLocked(ap))
	return nil
}
