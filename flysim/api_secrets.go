package flysim

import (
	"net/http"
	"strconv"

	fly "github.com/superfly/fly-go"
)

// The secrets routes (flaps ListAppSecrets, GetAppSecrets, UpdateAppSecrets,
// SetAppSecret, DeleteAppSecret). Values are shown only with
// ?show_secrets=true; every change bumps the app's secrets version. A
// machine sees a change on its next start or update (secrets are read when
// its process is spawned), as on Fly.

// secretsQueryLocked reads ?show_secrets= and refuses a ?version= newer than the
// app's (flysim keeps only the current secrets, so an older version reads
// as the current one).
func secretsQueryLocked(r *http.Request, ap *app) (show bool, err error) {
	q := r.URL.Query()
	if v := q.Get("version"); v != "" {
		n, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil {
			return false, errf(http.StatusBadRequest, "invalid version %q", v)
		}
		if n > ap.secretsVersion {
			return false, errf(http.StatusNotFound, "secrets version %d not found (the app is at %d)", n, ap.secretsVersion)
		}
	}
	return q.Get("show_secrets") == "true", nil
}

func (a *apiServer) listSecrets(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	show, err := secretsQueryLocked(r, ap)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fly.ListAppSecretsResp{Secrets: ap.secretsViewLocked(show)})
	return nil
}

func (a *apiServer) getSecret(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	show, err := secretsQueryLocked(r, ap)
	if err != nil {
		return err
	}
	sec := ap.secrets[name]
	if sec == nil {
		return errf(http.StatusNotFound, "secret %.40q not found", name)
	}
	writeJSON(w, http.StatusOK, sec.viewLocked(name, show))
	return nil
}

// updateSecrets is POST /v1/apps/{app}/secrets {"values":{NAME:"v"|null}}:
// every name set or (null) deleted at once, or none when one is invalid.
func (a *apiServer) updateSecrets(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	var in fly.UpdateAppSecretsRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if len(in.Values) == 0 {
		return errf(http.StatusBadRequest, "values is required")
	}
	for name, v := range in.Values {
		if err := validSecretName(name); err != nil {
			return errf(http.StatusBadRequest, "%v", err)
		}
		if v != nil {
			if err := validSecretValue(name, *v); err != nil {
				return errf(http.StatusBadRequest, "%v", err)
			}
		}
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkSecretCountLocked(ap, in.Values); err != nil {
		return err
	}
	ap.setSecretsLocked(in.Values, s.clk.Now())
	writeJSON(w, http.StatusOK, fly.UpdateAppSecretsResp{Secrets: ap.secretsViewLocked(false), Version: ap.secretsVersion})
	return nil
}

// setSecret is POST /v1/apps/{app}/secrets/{name} {"value":"v"}.
func (a *apiServer) setSecret(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	var in fly.SetAppSecretRequest
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if err := validSecretName(name); err != nil {
		return errf(http.StatusBadRequest, "%v", err)
	}
	if err := validSecretValue(name, in.Value); err != nil {
		return errf(http.StatusBadRequest, "%v", err)
	}
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	change := map[string]*string{name: &in.Value}
	if err := checkSecretCountLocked(ap, change); err != nil {
		return err
	}
	ap.setSecretsLocked(change, s.clk.Now())
	writeJSON(w, http.StatusOK, fly.SetAppSecretResp{AppSecret: ap.secrets[name].viewLocked(name, false), Version: ap.secretsVersion})
	return nil
}

// deleteSecret is DELETE /v1/apps/{app}/secrets/{name}; 404 when the app
// has no such secret.
func (a *apiServer) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	ap, err := a.appOf(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ap.secrets[name] == nil {
		return errf(http.StatusNotFound, "secret %.40q not found", name)
	}
	ap.setSecretsLocked(map[string]*string{name: nil}, s.clk.Now())
	writeJSON(w, http.StatusOK, fly.DeleteAppSecretResp{Version: ap.secretsVersion})
	return nil
}

// checkSecretCountLocked refuses a change that would leave the app with
// more than MaxSecretsPerApp secrets.
func checkSecretCountLocked(ap *app, change map[string]*string) error {
	n := len(ap.secrets)
	for name, v := range change {
		switch _, had := ap.secrets[name]; {
		case v != nil && !had:
			n++
		case v == nil && had:
			n--
		}
	}
	if n > MaxSecretsPerApp {
		return errf(http.StatusUnprocessableEntity, "an app has at most %d secrets (this change leaves %d)", MaxSecretsPerApp, n)
	}
	return nil
}
