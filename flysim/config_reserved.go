package flysim

import "errors"

// DefaultReservedInternalPort is the internal_port of a reserved app whose
// config gives none (Fly's default internal_port); the machines an API
// client launches into it name their own ports in their services.
const DefaultReservedInternalPort = 8080

// validateReserved checks a reserved app: it only holds a name and
// addresses, so everything that describes machines must come from the
// client that creates it.
func (a *AppConfig) validateReserved() error {
	if !a.Reserved {
		return nil
	}
	switch {
	case len(a.Machines) > 0:
		return errors.New("a reserved app has no [[apps.machines]]: a client launches them once it has created the app")
	case len(a.Env) > 0 || len(a.Cmd) > 0 || len(a.Checks) > 0 || len(a.ServiceChecks) > 0:
		return errors.New("a reserved app has no env, cmd or checks: the machine configs a client sends carry them")
	case len(a.Secrets) > 0:
		return errors.New("a reserved app has no [apps.secrets]: a client sets them once it has created the app")
	case a.RestartPolicy != "" || a.RestartMaxRetries != 0:
		return errors.New("a reserved app has no restart policy: the machine configs a client sends carry it")
	}
	if a.InternalPort == 0 {
		a.InternalPort = DefaultReservedInternalPort
	}
	return nil
}

// Empty turns every app into a reserved one: an empty emulated organisation
// whose apps a client creates and launches itself (`purrctl sim --empty`),
// at the addresses, regions and UDP ports the config gives them. It drops
// the machines, env, cmd, checks, secrets and restart policy of every app;
// images and links stay. Call it before New.
func (c *Config) Empty() {
	for _, a := range c.Apps {
		if a == nil {
			continue
		}
		a.Reserved = true
		a.Machines, a.Env, a.Cmd, a.Checks, a.ServiceChecks, a.Secrets = nil, nil, nil, nil, nil, nil
		a.RestartPolicy, a.RestartMaxRetries = "", 0
	}
}
