//go:build unix

package flysim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/purrfly/purrfly/internal/testutil"
)

// The test binary is also the machine program: with FLYSIM_TEST_CHILD set it
// runs childMain instead of the tests (the images of testConfig run "{exe}").
func TestMain(m *testing.M) {
	if os.Getenv("FLYSIM_TEST_CHILD") != "" {
		childMain()
		return
	}
	goleak.VerifyTestMain(m)
}

// pingInfo is what a child answers on /ping.
type pingInfo struct {
	App       string            `json:"app"`
	MachineID string            `json:"machine_id"`
	Region    string            `json:"region"`
	ImageRef  string            `json:"image_ref"`
	Version   string            `json:"version"`
	PrivateIP string            `json:"private_ip"`
	Process   string            `json:"process_group"`
	Primary   string            `json:"primary_region"`
	DNSServer string            `json:"dns_server"`
	AppEnv    string            `json:"app_env"`
	Boot      string            `json:"boot"`
	Body      string            `json:"body"`
	Pid       int               `json:"pid"`
	Headers   map[string]string `json:"headers"`
}

// childMain is a tiny machine: an HTTP server on $HOST:$PORT.
//
//	/ping                 pingInfo (its Fly env, a boot id per process, some request headers)
//	/healthz              200, or 500 once /sick was called
//	/replay?to=ID&state=S answers Fly-Replay unless the request is already a replay
//	/replay?fr=VALUE      the same with a raw Fly-Replay value
//	/replay-always?to=ID  always answers Fly-Replay
//	/ws?replay_to=ID      Fly-Replay unless replayed (or ID is itself), else a WebSocket echo
//	/dns?name=N           looks N up (TXT) on $FLY_DNS_SERVER
//	/exit?code=N          exits with code N (by itself: no stop request)
//
// CHILD_MODE=broken exits at once; CHILD_MODE=ignore-int ignores SIGINT;
// CHILD_MODE=udp-echo also answers every datagram on $HOST:$UDP_PORT (bound
// before the HTTP server listens) with "<machine id> <sender address>|" and
// the datagram, from the address it arrived at.
func childMain() {
	switch os.Getenv("CHILD_MODE") {
	case "broken":
		fmt.Println("broken image: exiting at once")
		os.Exit(3)
	case "ignore-int":
		signal.Ignore(syscall.SIGINT)
	}
	boot := testutil.RandomHex(8)
	var sick atomic.Bool
	id := os.Getenv("FLY_MACHINE_ID")
	info := func(r *http.Request) pingInfo {
		h := map[string]string{}
		for _, k := range []string{"Fly-Replay-Src", "Fly-Client-IP", "Fly-Region", "X-Forwarded-For", "X-Forwarded-Proto", "Via"} {
			h[k] = r.Header.Get(k)
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1024))
		return pingInfo{
			App: os.Getenv("FLY_APP_NAME"), MachineID: id, Region: os.Getenv("FLY_REGION"),
			ImageRef: os.Getenv("FLY_IMAGE_REF"), Version: os.Getenv("FLY_MACHINE_VERSION"),
			PrivateIP: os.Getenv("FLY_PRIVATE_IP"), Process: os.Getenv("FLY_PROCESS_GROUP"),
			Primary: os.Getenv("PRIMARY_REGION"), DNSServer: os.Getenv("FLY_DNS_SERVER"),
			AppEnv: os.Getenv("APP_ENV"), Boot: boot, Body: string(body), Pid: os.Getpid(), Headers: h,
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(info(r))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if sick.Load() {
			http.Error(w, "sick", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/sick", func(w http.ResponseWriter, r *http.Request) { sick.Store(true) })
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		fmt.Println("child exits with", code)
		os.Exit(code)
	})
	mux.HandleFunc("/replay", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Fly-Replay-Src") == "" {
			if fr := r.URL.Query().Get("fr"); fr != "" { // a raw Fly-Replay value
				w.Header().Set("Fly-Replay", fr)
				return
			}
			w.Header().Set("Fly-Replay", "instance="+r.URL.Query().Get("to")+";state="+r.URL.Query().Get("state"))
			return
		}
		_ = json.NewEncoder(w).Encode(info(r))
	})
	mux.HandleFunc("/replay-always", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fly-Replay", "instance="+r.URL.Query().Get("to"))
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("replay_to"); to != "" && to != id && r.Header.Get("Fly-Replay-Src") == "" {
			w.Header().Set("Fly-Replay", "instance="+to)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		_ = c.Write(ctx, websocket.MessageText, []byte("hello from "+id+" src="+r.Header.Get("Fly-Replay-Src")))
		for i := 0; i < 100; i++ {
			typ, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, append([]byte(id+":"), msg...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/dns", func(w http.ResponseWriter, r *http.Request) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(r.URL.Query().Get("name")), dns.TypeTXT)
		c := &dns.Client{Timeout: 2 * time.Second}
		in, _, err := c.Exchange(m, os.Getenv("FLY_DNS_SERVER"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var parts []string
		for _, rr := range in.Answer {
			if t, ok := rr.(*dns.TXT); ok {
				parts = append(parts, strings.Join(t.Txt, ""))
			}
		}
		fmt.Fprint(w, strings.Join(parts, "|"))
	})
	if os.Getenv("CHILD_MODE") == "udp-echo" {
		if err := udpEcho(id); err != nil {
			fmt.Fprintln(os.Stderr, "udp:", err)
			os.Exit(1)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("HOST"), os.Getenv("PORT")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	fmt.Println("child listening on", ln.Addr(), "boot", boot)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	sigs := make(chan os.Signal, 1)
	if os.Getenv("CHILD_MODE") == "ignore-int" {
		signal.Notify(sigs, syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	}
	go func() {
		sig := <-sigs
		fmt.Println("child got", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		os.Exit(1)
	}
	os.Exit(0)
}

// udpEcho binds $HOST:$UDP_PORT and echoes datagrams, prefixed: at most
// udpEchoMax of them, for at most udpEchoFor.
func udpEcho(id string) error {
	const udpEchoMax, udpEchoFor = 1000, 2 * time.Minute
	c, err := net.ListenPacket("udp", net.JoinHostPort(os.Getenv("HOST"), os.Getenv("UDP_PORT")))
	if err != nil {
		return err
	}
	fmt.Println("child udp on", c.LocalAddr())
	_ = c.SetDeadline(time.Now().Add(udpEchoFor))
	go func() {
		buf := make([]byte, 64<<10)
		for range udpEchoMax {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			out := append([]byte(id+" "+from.String()+"|"), buf[:n]...)
			_, _ = c.WriteTo(out, from)
		}
	}()
	return nil
}
