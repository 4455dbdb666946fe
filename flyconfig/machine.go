package flyconfig

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	fly "github.com/superfly/fly-go"
)

// ProcessGroup is the one process group purrfly's apps run.
const ProcessGroup = "app"

// MachineConfig builds the config of one machine of the app on image, as
// flyctl's deploy would from this fly.toml (see the package comment).
func (f *File) MachineConfig(image string) (*fly.MachineConfig, error) {
	c := &fly.MachineConfig{
		Image:    image,
		Env:      map[string]string{},
		Metadata: map[string]string{"fly_process_group": ProcessGroup},
	}
	for k, v := range f.Env {
		c.Env[k] = v
	}
	c.Env["FLY_PROCESS_GROUP"] = ProcessGroup
	if f.PrimaryRegion != "" {
		c.Env["PRIMARY_REGION"] = f.PrimaryRegion
	}
	if cmd := f.Processes[ProcessGroup]; cmd != "" {
		c.Init.Cmd = strings.Fields(cmd)
	}
	if f.KillSignal != "" || f.KillTimeout != nil {
		c.StopConfig = &fly.StopConfig{}
		if f.KillSignal != "" {
			c.StopConfig.Signal = fly.Pointer(f.KillSignal)
		}
		if f.KillTimeout != nil {
			c.StopConfig.Timeout = &fly.Duration{Duration: f.KillTimeout.Duration}
		}
	}
	if m := f.Metrics; m != nil {
		c.Metrics = &fly.MachineMetrics{Port: m.Port, Path: m.Path}
	}
	if h := f.HTTPService; h != nil {
		svc := fly.MachineService{
			Protocol: "tcp", InternalPort: h.InternalPort,
			Ports: []fly.MachinePort{
				{Port: fly.Pointer(80), Handlers: []string{"http"}, ForceHTTPS: h.ForceHTTPS},
				{Port: fly.Pointer(443), Handlers: []string{"http", "tls"}},
			},
			Autostart: h.AutoStartMachines, MinMachinesRunning: h.MinMachinesRunning,
			Concurrency: concurrency(h.Concurrency),
		}
		var err error
		if svc.Autostop, err = autostop(h.AutoStopMachines); err != nil {
			return nil, fmt.Errorf("[http_service]: %w", err)
		}
		for _, ch := range h.Checks {
			svc.Checks = append(svc.Checks, serviceCheck(ch, "http"))
		}
		c.Services = append(c.Services, svc)
	}
	for i, s := range f.Services {
		svc := fly.MachineService{
			Protocol: s.Protocol, InternalPort: s.InternalPort,
			Autostart: s.AutoStartMachines, MinMachinesRunning: s.MinMachinesRunning,
			Concurrency: concurrency(s.Concurrency),
		}
		var err error
		if svc.Autostop, err = autostop(s.AutoStopMachines); err != nil {
			return nil, fmt.Errorf("[[services]] %d: %w", i, err)
		}
		for _, p := range s.Ports {
			svc.Ports = append(svc.Ports, fly.MachinePort{Port: fly.Pointer(p.Port), Handlers: p.Handlers, ForceHTTPS: p.ForceHTTPS})
		}
		for _, ch := range s.HTTPChecks {
			svc.Checks = append(svc.Checks, serviceCheck(ch, "http"))
		}
		for _, ch := range s.TCPChecks {
			svc.Checks = append(svc.Checks, serviceCheck(ch, "tcp"))
		}
		c.Services = append(c.Services, svc)
	}
	if len(f.Checks) > 0 {
		c.Checks = map[string]fly.MachineCheck{}
		for name, ch := range f.Checks {
			c.Checks[name] = machineCheck(ch)
		}
	}
	if len(f.VM) == 1 {
		g, err := guest(f.VM[0])
		if err != nil {
			return nil, err
		}
		c.Guest = g
	}
	if len(f.Restart) == 1 {
		r := f.Restart[0]
		switch r.Policy {
		case "no", "always", "on-failure":
		default:
			return nil, fmt.Errorf("[[restart]]: policy %q, want no, always or on-failure", r.Policy)
		}
		c.Restart = &fly.MachineRestart{Policy: fly.MachineRestartPolicy(r.Policy), MaxRetries: r.Retries}
	}
	return c, nil
}

func concurrency(c *Concurrency) *fly.MachineServiceConcurrency {
	if c == nil {
		return nil
	}
	return &fly.MachineServiceConcurrency{Type: c.Type, SoftLimit: c.SoftLimit, HardLimit: c.HardLimit}
}

func autostop(v any) (*fly.MachineAutostop, error) {
	var a fly.MachineAutostop
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		a = fly.MachineAutostopOff
		if x {
			a = fly.MachineAutostopStop
		}
	case string:
		switch x {
		case "off":
			a = fly.MachineAutostopOff
		case "stop":
			a = fly.MachineAutostopStop
		case "suspend":
			a = fly.MachineAutostopSuspend
		default:
			return nil, fmt.Errorf("auto_stop_machines %q, want off, stop or suspend", x)
		}
	default:
		return nil, fmt.Errorf("auto_stop_machines: want a bool or a string, got %T", v)
	}
	return &a, nil
}

func serviceCheck(ch *Check, typ string) fly.MachineServiceCheck {
	sc := fly.MachineServiceCheck{Type: fly.Pointer(typ)}
	if ch.Type != "" {
		sc.Type = fly.Pointer(ch.Type)
	}
	if ch.Port != 0 {
		sc.Port = fly.Pointer(ch.Port)
	}
	sc.Interval, sc.Timeout, sc.GracePeriod = duration(ch.Interval), duration(ch.Timeout), duration(ch.GracePeriod)
	if *sc.Type == "http" {
		sc.HTTPMethod, sc.HTTPPath, sc.HTTPProtocol = str(ch.Method), str(ch.Path), str(ch.Protocol)
	}
	return sc
}

func machineCheck(ch *Check) fly.MachineCheck {
	typ := ch.Type
	if typ == "" {
		typ = "http"
	}
	mc := fly.MachineCheck{Type: fly.Pointer(typ)}
	if ch.Port != 0 {
		mc.Port = fly.Pointer(ch.Port)
	}
	mc.Interval, mc.Timeout, mc.GracePeriod = duration(ch.Interval), duration(ch.Timeout), duration(ch.GracePeriod)
	if typ == "http" {
		mc.HTTPMethod, mc.HTTPPath, mc.HTTPProtocol = str(ch.Method), str(ch.Path), str(ch.Protocol)
	}
	return mc
}

func duration(d fly.Duration) *fly.Duration {
	if d.Duration == 0 {
		return nil
	}
	return &fly.Duration{Duration: d.Duration}
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return fly.Pointer(s)
}

var memoryRe = regexp.MustCompile(`^(?i)([0-9]+)\s*(mb|gb)?$`)

func guest(vm VM) (*fly.MachineGuest, error) {
	g := &fly.MachineGuest{}
	size := vm.Size
	if size == "" {
		size = fly.DefaultVMSize
	}
	if err := g.SetSize(size); err != nil {
		return nil, fmt.Errorf("[[vm]]: %w", err)
	}
	if vm.CPUs != 0 {
		g.CPUs = vm.CPUs
	}
	if vm.CPUKind != "" {
		g.CPUKind = vm.CPUKind
	}
	if vm.MemoryMB != 0 {
		g.MemoryMB = vm.MemoryMB
	}
	switch m := vm.Memory.(type) {
	case nil:
	case int64:
		g.MemoryMB = int(m)
	case string:
		p := memoryRe.FindStringSubmatch(strings.TrimSpace(m))
		if p == nil {
			return nil, fmt.Errorf("[[vm]]: memory %q, want e.g. 512mb or 1gb", m)
		}
		n, err := strconv.Atoi(p[1])
		if err != nil {
			return nil, fmt.Errorf("[[vm]]: memory %q: %w", m, err)
		}
		if strings.EqualFold(p[2], "gb") {
			n *= 1024
		}
		g.MemoryMB = n
	default:
		return nil, fmt.Errorf("[[vm]]: memory: want a size string or megabytes, got %T", m)
	}
	if g.MemoryMB <= 0 || g.MemoryMB > 256*1024 {
		return nil, fmt.Errorf("[[vm]]: memory %d MB out of range", g.MemoryMB)
	}
	return g, nil
}
