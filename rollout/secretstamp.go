package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	fly "github.com/superfly/fly-go"
)

// MetaSecrets, in a managed machine's config, stamps the app's secrets the
// machine was deployed with: a digest over their names and Fly's digests
// of their values (never a value). A machine whose stamp differs from the
// app's secrets now is deployed again, so that `fly secrets set --stage`
// followed by a rollout reaches every machine, as a SECRET rotation needs;
// a machine without a stamp (made before stamps, or by `purrctl sim`) is
// not redeployed for it.
const MetaSecrets = "purrfly_secrets"

// secretsStamp is the MetaSecrets value of app's secrets now, read once a
// run.
func (r *run) secretsStamp(ctx context.Context, app string) (string, error) {
	if s, ok := r.stamps[app]; ok {
		return s, nil
	}
	var ss []fly.AppSecret
	err := r.api.call(ctx, "secrets", app, apiRequestTimeout, func(ctx context.Context) error {
		var err error
		ss, err = r.api.c.ListAppSecrets(ctx, app, nil, false)
		return err
	})
	if err != nil {
		return "", err
	}
	lines := make([]string, len(ss))
	for i, s := range ss {
		lines[i] = s.Name + "=" + s.Digest
	}
	slices.Sort(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	r.stamps[app] = hex.EncodeToString(h[:8])
	return r.stamps[app], nil
}

// wantConfig is the config app's machines should run on the run's image,
// stamped with its secrets; nil for an unmanaged app.
func (r *run) wantConfig(ctx context.Context, a *App) (*fly.MachineConfig, error) {
	want := a.MachineConfig(r.image)
	if want == nil {
		return nil, nil
	}
	stamp, err := r.secretsStamp(ctx, a.Name)
	if err != nil {
		return nil, failf(err, "could not read the secrets of %s", a.Name)
	}
	if want.Metadata == nil {
		want.Metadata = map[string]string{}
	}
	want.Metadata[MetaSecrets] = stamp
	return want, nil
}

// unstamped reports whether c is only the stamp of a machine that has none
// (see MetaSecrets).
func unstamped(path, from string) bool { return path == "metadata."+MetaSecrets && from == "" }
