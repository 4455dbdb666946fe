package flysim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	fly "github.com/superfly/fly-go"
)

// Limits of an app's secrets (in the config and through the Machines API).
const (
	MaxSecretNameLen   = 256
	MaxSecretValueLen  = 64 << 10
	MaxSecretsPerApp   = 500
	secretDigestLength = 16 // hex characters of the SHA-256 kept as digest
)

// secretNameRE is what an environment variable name may be (and what
// `fly secrets set` accepts in practice).
var secretNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// appSecret is one secret of an app, guarded by Sim.mu with its app.
type appSecret struct {
	value     string
	digest    string
	createdAt time.Time
	updatedAt time.Time
}

// validSecretName and validSecretValue are the bounds of a secret. A value
// cannot hold a NUL byte: it becomes an environment variable.
func validSecretName(name string) error {
	if len(name) > MaxSecretNameLen || !secretNameRE.MatchString(name) {
		return fmt.Errorf("secret name %.40q is not [A-Z_][A-Z0-9_]* of at most %d characters", name, MaxSecretNameLen)
	}
	return nil
}

func validSecretValue(name, value string) error {
	if len(value) > MaxSecretValueLen {
		return fmt.Errorf("secret %s: value of %d bytes is over %d", name, len(value), MaxSecretValueLen)
	}
	if strings.IndexByte(value, 0) >= 0 {
		return fmt.Errorf("secret %s: value holds a NUL byte (it becomes an environment variable)", name)
	}
	return nil
}

// validateSecrets checks the [apps.secrets] of a config.
func validateSecrets(secrets map[string]string) error {
	if len(secrets) > MaxSecretsPerApp {
		return fmt.Errorf("%d secrets, at most %d", len(secrets), MaxSecretsPerApp)
	}
	for name, v := range secrets {
		if err := validSecretName(name); err != nil {
			return err
		}
		if err := validSecretValue(name, v); err != nil {
			return err
		}
	}
	return nil
}

// secretDigest identifies a value without revealing it: the start of its
// SHA-256, in hex (what `fly secrets list` shows to tell versions apart).
func secretDigest(value string) string {
	h := sha256.Sum256([]byte(value))
	return hex.EncodeToString(h[:])[:secretDigestLength]
}

// setSecretsLocked applies a change of secrets (nil value: delete) and
// bumps the app's secrets version once (deleting a name that is not there
// is no error). The caller has validated the change.
func (a *app) setSecretsLocked(values map[string]*string, now time.Time) {
	if a.secrets == nil {
		a.secrets = map[string]*appSecret{}
	}
	for name, v := range values {
		if v == nil {
			delete(a.secrets, name)
			continue
		}
		sec := a.secrets[name]
		if sec == nil {
			sec = &appSecret{createdAt: now}
			a.secrets[name] = sec
		}
		sec.value, sec.digest, sec.updatedAt = *v, secretDigest(*v), now
	}
	a.secretsVersion++
}

// secretsViewLocked renders the app's secrets sorted by name, values only
// when show is set.
func (a *app) secretsViewLocked(show bool) []fly.AppSecret {
	names := make([]string, 0, len(a.secrets))
	for n := range a.secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]fly.AppSecret, 0, len(names))
	for _, n := range names {
		out = append(out, a.secrets[n].viewLocked(n, show))
	}
	return out
}

func (s *appSecret) viewLocked(name string, show bool) fly.AppSecret {
	created, updated := s.createdAt.UTC().Format(time.RFC3339), s.updatedAt.UTC().Format(time.RFC3339)
	out := fly.AppSecret{Name: name, Digest: s.digest, CreatedAt: &created, UpdatedAt: &updated}
	if show {
		v := s.value
		out.Value = &v
	}
	return out
}

// secretEnvLocked is what the app's secrets add to a machine's environment.
func (a *app) secretEnvLocked() map[string]string {
	out := make(map[string]string, len(a.secrets))
	for n, sec := range a.secrets {
		out[n] = sec.value
	}
	return out
}
