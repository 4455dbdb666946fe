// Package dashboard is the balancer's operator page: static assets embedded
// in the binary (no CDN, works offline) and the handler that serves them at
// /dashboard/.
//
// The page holds no state of its own on the server: it signs in with an
// admin key (kept in the tab's sessionStorage, sent as an Authorization
// header, never in a URL: the sign-in form is hidden, and a POST the
// handler refuses, until the page's script takes its submit), reads the
// fleet from the admin API (/v1/stats, /v1/instances, /v1/rooms), follows
// /v1/events with fetch() (EventSource cannot send the header) and
// refreshes what an event touches; drain, undrain and close are the admin
// API's routes. The handler sends a strict
// Content-Security-Policy (everything from 'self', no inline script or
// style), nosniff, no framing and no referrer, so the page cannot be made
// to load or leak anything else. The markup is semantic (tables with
// scoped headers, labelled inputs, a live status region) and turns table
// rows into cards on a phone's width.
package dashboard
