package balancer

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/purrfly/purrfly/internal/limit"
	"github.com/purrfly/purrfly/wire"
)

// maxAdminBody caps a /v1 request body (413 body_too_large past it).
const maxAdminBody = 64 << 10

// adminRoute says how a /v1 route is guarded.
type adminRoute struct {
	name    string   // the route pattern, for logs ("POST /v1/rooms")
	methods []string // allowed methods
	// legacySecret also takes the shared SECRET: the deploy tool's routes
	// (GET /v1/instances, POST .../drain and .../undrain).
	legacySecret bool
	// audit logs every authenticated call that is not a GET or HEAD.
	audit bool
	// queryKey takes ?key= when Options.SSEQueryKey (the event stream).
	queryKey bool
	// stream: the handler logs the stream's opening with the credential
	// (streamCaller), once per stream.
	stream bool
}

// v1 guards a /v1 route: CORS (Options.AdminCORSOrigins), the body cap,
// the failed-auth throttle of its source, the admin key (or SECRET where
// legacySecret), the methods, then h. Every authenticated request counts
// in purrfly_balancer_admin_requests_total under its key's fingerprint
// (what a rotation watches); the mutating routes are audit-logged with
// it, never the key.
func (s *Server) v1(rt adminRoute, h wire.Handler) wire.Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		s.adminCORS(w, r)
		if r.ContentLength > maxAdminBody {
			return wire.ErrBodyTooLarge
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
		}
		src := s.adminSource(r)
		cred, ok := s.authenticate(r, rt.legacySecret, rt.queryKey)
		if s.beforeAdmit != nil {
			s.beforeAdmit()
		}
		// A throttled source is answered 429 whatever its credential.
		if limited, wait := s.authThrottle.Admit(src, ok); limited {
			return wire.Throttled(w, wait)
		}
		if !ok {
			s.metrics.adminAuthFailures.Inc()
			s.log.Warn("admin authentication failed", "route", rt.name, "source", src)
			w.Header().Set("WWW-Authenticate", `Bearer realm="purrfly"`)
			return wire.ErrUnauthorized
		}
		s.metrics.adminRequests[cred].Inc()
		if !slices.Contains(rt.methods, r.Method) {
			w.Header().Set("Allow", strings.Join(rt.methods, ", "))
			return wire.ErrMethodNotAllowed
		}
		var note auditNote
		if rt.audit {
			r = r.WithContext(context.WithValue(r.Context(), auditKey{}, &note))
		}
		if rt.stream {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{cred: cred, source: src}))
		}
		err := h(w, r)
		if rt.audit && r.Method != http.MethodGet && r.Method != http.MethodHead {
			outcome := "ok"
			if err != nil {
				var we *wire.Error
				if !errors.As(err, &we) {
					we = wire.ErrInternal
				}
				outcome = we.Code
			}
			target := note.target
			if target == "" {
				target = auditTarget(r)
			}
			s.log.Info("admin audit", "method", r.Method, "route", rt.name, "target", target, "key", string(cred), "source", src, "outcome", outcome)
		}
		return err
	}
}

// auditNote lets a handler name what its call acted on when the path does
// not (a reservation's room and allocation id are in its body).
type auditNote struct{ target string }

type auditKey struct{}

// noteAudit records target for the audit line of r's call, if audited.
func noteAudit(r *http.Request, target string) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.target = target
	}
}

// caller is who opened a stream, for its log line.
type caller struct {
	cred   credential
	source string
}

type callerKey struct{}

// streamCaller is the credential and source of r's call on a stream route.
func streamCaller(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// auditTarget is the instance id or room name a mutating call acted on.
func auditTarget(r *http.Request) string {
	for _, k := range []string{"id", "name"} {
		if v := r.PathValue(k); v != "" {
			return v
		}
	}
	return ""
}

// adminSource is the source address of a /v1 request (for its failed-auth
// throttle and the audit log) and of a call made with the SECRET (for its
// throttle, secretGuard): limit.Source with Options.ClientIPHeader
// (Fly-Client-IP on Fly) and Options.TrustProxy (X-Forwarded-For's last
// hop), else the TCP peer.
func (s *Server) adminSource(r *http.Request) string {
	return limit.Source(r, s.opts.ClientIPHeader, s.opts.TrustProxy)
}
