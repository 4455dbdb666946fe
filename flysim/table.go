package flysim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the apps with their public URLs, public UDP addresses
// and machines (id, name, region, state, image, address), then the Machines
// API, DNS and log folder. A "*" after a UDP address marks the machine
// serving it.
func (s *Sim) WriteTable(w io.Writer) {
	st := s.State()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tURL\tUDP\tMACHINE\tNAME\tREGION\tSTATE\tIMAGE\tADDRESS")
	anyUDP := false
	s.mu.Lock()
	for _, a := range s.order {
		url := st.Apps[a.cfg.Name].URL
		anyUDP = anyUDP || len(a.udp) > 0
		if len(a.order) == 0 {
			state := ""
			if !a.created {
				state = "reserved"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t\t\t%s\t\t\n", a.cfg.Name, url, udpColumn(a, ""), state)
		}
		for _, m := range a.order {
			if m.state == StateDestroyed {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s:%d\n", a.cfg.Name, url, udpColumn(a, m.id), m.id, m.name, m.region,
				m.state, m.config.Image, m.ip, m.internalPortLocked())
		}
	}
	s.mu.Unlock()
	_ = tw.Flush()
	fmt.Fprintln(w)
	if anyUDP {
		fmt.Fprintln(w, "UDP           public address->internal port; * marks the one machine serving it (Fly does not balance UDP)")
	}
	fmt.Fprintf(w, "Machines API  %s  (token in the state file; FLY_FLAPS_BASE_URL=%s)\n", st.MachinesAPI, st.MachinesAPI)
	fmt.Fprintf(w, "Internal DNS  %s  (machines get FLY_DNS_SERVER=%s)\n", st.DNS, st.DNS)
	fmt.Fprintf(w, "Machine logs  %s\n", s.logDir)
}

// udpColumn lists a's UDP services as "127.0.0.1:4401->7778", each marked
// "*" when machine id serves it; "-" when the app has none.
func udpColumn(a *app, id string) string {
	if len(a.udp) == 0 {
		return "-"
	}
	var out []string
	for _, f := range a.udp {
		v := fmt.Sprintf("%s->%d", f.addr, f.svc.InternalPort)
		if id != "" && f.serving() == id {
			v += "*"
		}
		out = append(out, v)
	}
	return strings.Join(out, ",")
}
