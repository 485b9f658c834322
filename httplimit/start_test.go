package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestByIPAndByToken: the one-line starts limit each client IP, or each
// token (with tokenless requests limited by IP), to the rate's N per
// window, and reject a rate a sliding window cannot hold. The windows are
// a day long, so the real clock cannot move a request into a window
// where it would be admitted again.
func TestByIPAndByToken(t *testing.T) {
	send := func(h http.Handler, ip, tok string) int {
		r := httptest.NewRequest("GET", "/anything", nil)
		r.RemoteAddr = ip + ":1234"
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	perDay := hotlimit.Rate{N: 3, Per: 24 * time.Hour}

	byIP, err := ByIP(perDay)
	if err != nil {
		t.Fatal(err)
	}
	defer byIP.Close()
	h := byIP.Handler(ok)
	for i, want := range []int{200, 200, 200, 429} {
		if got := send(h, "192.0.2.1", "tok-a"); got != want {
			t.Fatalf("ByIP request %d: %d, want %d", i, got, want)
		}
	}
	if got := send(h, "192.0.2.2", "tok-a"); got != 200 {
		t.Fatalf("ByIP: another IP got %d: the token must not matter", got)
	}

	byTok, err := ByToken("Authorization", perDay)
	if err != nil {
		t.Fatal(err)
	}
	defer byTok.Close()
	h = byTok.Handler(ok)
	for i, want := range []int{200, 200, 200, 429} {
		if got := send(h, "192.0.2.1", "tok-a"); got != want {
			t.Fatalf("ByToken request %d: %d, want %d", i, got, want)
		}
	}
	if got := send(h, "192.0.2.1", "tok-b"); got != 200 {
		t.Fatalf("ByToken: another token from the same IP got %d", got)
	}
	for i, want := range []int{200, 200, 200, 429} {
		if got := send(h, "192.0.2.9", ""); got != want {
			t.Fatalf("ByToken, no token (limited by IP), request %d: %d, want %d", i, got, want)
		}
	}

	for _, bad := range []hotlimit.Rate{{N: 0, Per: time.Second}, {N: 1 << 30, Per: time.Second}, {N: 5, Per: 0}} {
		if m, err := ByIP(bad); err == nil || !strings.HasPrefix(err.Error(), "hotlimit: ") && !strings.HasPrefix(err.Error(), "httplimit: ") {
			if m != nil {
				m.Close()
			}
			t.Errorf("ByIP(%+v): err = %v, want a configuration error", bad, err)
		}
	}
}
