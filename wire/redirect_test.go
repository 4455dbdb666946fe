package wire

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestCallAnswersARedirectWithoutFollowingIt: a relay (or balancer) that
// answers 307 to another host gets that host nothing, above all not the
// internal secret; the call fails with the status it got, and the caller's
// own client keeps following redirects for its other uses.
func TestCallAnswersARedirectWithoutFollowingIt(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/collect", http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	client := &http.Client{}
	_, err := Call{Method: http.MethodPost, URL: redirecting.URL + "/internal", Secret: "s3cret-value", Body: map[string]int{"n": 1}}.Do(context.Background(), client)
	var we *Error
	if !errors.As(err, &we) || we.Status != http.StatusTemporaryRedirect {
		t.Fatalf("a redirected call: %v, want the 307 as its error", err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect target was reached %d times (with the secret)", n)
	}
	if client.CheckRedirect != nil {
		t.Fatal("the caller's client was changed")
	}
	resp, err := client.Get(redirecting.URL + "/public")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if reached.Load() != 1 {
		t.Fatal("the caller's own client no longer follows redirects")
	}
}
