package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestStdoutExport serves four requests to the expensive route (a burst
// of 3) and checks what the stdout exporters and the denial log print.
func TestStdoutExport(t *testing.T) {
	var out, logs bytes.Buffer
	mp, tp, stop, err := providers(&out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(mp, tp, &logs, hotlimit.WithClock(hotlimit.NewManualClock()))
	if err != nil {
		t.Fatal(err)
	}
	codes := ""
	for range 4 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/report", nil)
		r.RemoteAddr = "192.0.2.7:4000"
		srv.handler.ServeHTTP(w, r)
		codes += " " + http.StatusText(w.Code)
	}
	if codes != " OK OK OK Too Many Requests" {
		t.Fatalf("statuses:%s", codes)
	}
	if err := stop(context.Background()); err != nil { // flushes the metrics
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{`"Name":"hotlimit.decide"`, `"hotlimit.http.requests"`, `"hotlimit.backend.duration"`,
		`"hotlimit.limiter.decisions"`, `"hotlimit.limiter.memory.usage"`, `"denied"`} {
		if !strings.Contains(got, want) {
			t.Errorf("stdout export lacks %s", want)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"rate limit denial"`); n != 1 {
		t.Errorf("%d denial log lines, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(got+logs.String(), "192.0.2.7") {
		t.Error("the client's address reached the export or the log")
	}
}
