package flysim

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one boot of a machine: a child process of the Sim. It is owned
// by the machine's run goroutine; done is closed once it has exited.
type process struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
}

// inheritedEnv are the only variables of the Sim's own environment a machine
// sees (a Fly machine does not inherit the deployer's environment either, and
// the Sim's FLY_API_TOKEN must not leak into machines).
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL", "USER",
	"GOCOVERDIR", "GORACE", "GOTRACEBACK", "SYSTEMROOT"}

// spawn starts m's process from its current config and marks m started.
// Its environment, each layer overriding the ones before: a few of the
// Sim's own variables (inheritedEnv), the image's env, the config's env,
// the app's secrets as they are now, then Fly's own variables
// (flyEnvLocked).
func (s *Sim) spawn(m *machine) (*process, error) {
	s.mu.Lock()
	cfg := m.config
	img, ok := s.cfg.lookupImage(cfg.Image)
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("unknown image %q", cfg.Image)
	}
	vars := s.placeholdersLocked(m, img)
	env := map[string]string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range img.Env {
		env[k] = expand(v, vars, s.appURLLocked)
	}
	for k, v := range cfg.Env {
		env[k] = expand(v, vars, s.appURLLocked)
	}
	for k, v := range m.app.secretEnvLocked() { // literal values: no placeholders
		env[k] = v
	}
	for k, v := range s.flyEnvLocked(m, img) {
		env[k] = v
	}
	// init.exec is not honoured: only command lines of the config ever run.
	argv := append(append([]string(nil), img.Command...), cfg.Init.Cmd...)
	for i, a := range argv {
		argv[i] = expand(a, vars, s.appURLLocked)
	}
	logPath := filepath.Join(s.logDir, m.app.cfg.Name+"-"+m.id+".log")
	s.mu.Unlock()

	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open machine log: %w", err)
	}
	fmt.Fprintf(logf, "--- flysim: %s boot of machine %s (%s)\n", time.Now().UTC().Format(time.RFC3339Nano), m.id, strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = envList(env)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.logDir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("failed to start %s: %w", argv[0], err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	s.mu.Lock()
	now := s.clk.Now()
	m.pid = p.pid
	s.spawned = append(s.spawned, p.pid)
	if m.state != StateDestroyed {
		m.state = StateStarted
	}
	m.resetChecksLocked(now)
	m.eventLocked(now, "start", StateStarted, "flyd", nil)
	s.mu.Unlock()
	s.log.Info("machine started", "app", m.app.cfg.Name, "machine", m.id, "ip", m.ip, "pid", p.pid, "image", cfg.Image)
	return p, nil
}

// stop sends sig to the process group, waits up to timeout, then SIGKILLs.
// It reports whether the SIGKILL was needed.
func (p *process) stop(sig syscall.Signal, timeout time.Duration) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	signalGroup(p, sig)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return false
	case <-t.C:
	}
	signalGroup(p, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second): // a process in uninterruptible sleep; give up waiting
	}
	return true
}

// exitStatus is the exit code and terminating signal (0 when none).
func (p *process) exitStatus() (code, sig int) {
	st := p.cmd.ProcessState
	if st == nil {
		return -1, 0
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, int(ws.Signal())
	}
	return st.ExitCode(), 0
}

// flyEnvLocked is the environment Fly's init gives a machine, plus HOST and
// PORT (where to listen) and FLY_DNS_SERVER (where the internal DNS is).
func (s *Sim) flyEnvLocked(m *machine, img *Image) map[string]string {
	group := DefaultProcessGroup
	if g := m.config.ProcessGroup(); g != "" {
		group = g
	}
	mem := DefaultMemoryMB
	if m.config.Guest != nil && m.config.Guest.MemoryMB > 0 {
		mem = m.config.Guest.MemoryMB
	}
	env := map[string]string{
		"FLY_APP_NAME":        m.app.cfg.Name,
		"FLY_MACHINE_ID":      m.id,
		"FLY_ALLOC_ID":        m.id,
		"FLY_REGION":          m.region,
		"FLY_IMAGE_REF":       imageRefString(m.config.Image, img),
		"FLY_MACHINE_VERSION": m.version,
		"FLY_PRIVATE_IP":      m.ip,
		"FLY_PROCESS_GROUP":   group,
		"FLY_VM_MEMORY_MB":    strconv.Itoa(mem),
		"PRIMARY_REGION":      primaryRegion(m),
		"HOST":                m.ip,
		"PORT":                strconv.Itoa(m.internalPortLocked()),
	}
	if s.dns != nil {
		env["FLY_DNS_SERVER"] = s.dns.addr
	}
	return env
}

// primaryRegion is PRIMARY_REGION: the config's env sets it (flyctl
// puts fly.toml's primary_region there), else the app's primary_region.
func primaryRegion(m *machine) string {
	if r := m.config.Env["PRIMARY_REGION"]; r != "" {
		return r
	}
	return m.app.cfg.PrimaryRegion
}

// placeholdersLocked are the values of {name} in image commands and env.
func (s *Sim) placeholdersLocked(m *machine, img *Image) map[string]string {
	v := map[string]string{
		"exe":        s.exe,
		"app":        m.app.cfg.Name,
		"machine_id": m.id,
		"region":     m.region,
		"ip":         m.ip,
		"port":       strconv.Itoa(m.internalPortLocked()),
		"image":      m.config.Image,
		"image_ref":  imageRefString(m.config.Image, img),
		"log_dir":    s.logDir,
	}
	if s.dns != nil {
		v["dns"] = s.dns.addr
	}
	if s.api != nil {
		v["api"] = s.api.url
	}
	for name, l := range s.links {
		v["link:"+name] = l.url
	}
	return v
}

func (s *Sim) appURLLocked(name string) (string, bool) {
	if a := s.apps[name]; a != nil && a.proxy != nil {
		return a.proxy.url, true
	}
	return "", false
}

var placeholderRE = regexp.MustCompile(`\{([a-z_]+)(?::([a-z0-9-]+))?\}`)

// expand replaces {name} with vars[name] and {url:APP} with that app's proxy
// URL; anything unknown is left as written.
func expand(s string, vars map[string]string, appURL func(string) (string, bool)) string {
	return placeholderRE.ReplaceAllStringFunc(s, func(tok string) string {
		sub := placeholderRE.FindStringSubmatch(tok)
		if sub[1] == "url" && sub[2] != "" {
			if u, ok := appURL(sub[2]); ok {
				return u
			}
			return tok
		}
		if v, ok := vars[sub[1]+":"+sub[2]]; ok && sub[2] != "" { // {link:NAME}
			return v
		}
		if v, ok := vars[sub[1]]; ok && sub[2] == "" {
			return v
		}
		return tok
	})
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
