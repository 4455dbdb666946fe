package flysim

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the apps with their public URLs and machines (id, name,
// region, state, image, address), then the Machines API, DNS and log folder.
func (s *Sim) WriteTable(w io.Writer) {
	st := s.State()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tURL\tMACHINE\tNAME\tREGION\tSTATE\tIMAGE\tADDRESS")
	s.mu.Lock()
	for _, a := range s.order {
		url := st.Apps[a.cfg.Name].URL
		if len(a.order) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t\t\t\t\t\n", a.cfg.Name, url)
		}
		for _, m := range a.order {
			if m.state == StateDestroyed {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s:%d\n", a.cfg.Name, url, m.id, m.name, m.region,
				m.state, m.config.Image, m.ip, m.internalPortLocked())
		}
	}
	s.mu.Unlock()
	_ = tw.Flush()
	fmt.Fprintf(w, "\nMachines API  %s  (token in the state file; FLY_FLAPS_BASE_URL=%s)\n", st.MachinesAPI, st.MachinesAPI)
	fmt.Fprintf(w, "Internal DNS  %s  (machines get FLY_DNS_SERVER=%s)\n", st.DNS, st.DNS)
	fmt.Fprintf(w, "Machine logs  %s\n", s.logDir)
}
