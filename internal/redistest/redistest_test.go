package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreePort: the port and its bus port are free and below the
// ephemeral range.
func TestFreePort(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p := FreePort(t)
		if p < 1024 || p+10000 >= low {
			t.Fatalf("FreePort = %d: want 1024 ≤ p and p+10000 < %d", p, low)
		}
		for _, q := range []int{p, p + 10000} {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				t.Fatalf("FreePort = %d: port %d is not free: %v", p, q, err)
			}
			ln.Close()
		}
	}
}

// TestPrefixUnique: two calls never return the same prefix, and a
// prefix holds no brace (redislimit.WithPrefix refuses one).
func TestPrefixUnique(t *testing.T) {
	t.Run("a{b}", func(t *testing.T) {
		seen := map[string]bool{}
		for range 100 {
			p := Prefix(t)
			if seen[p] {
				t.Fatalf("Prefix returned %q twice", p)
			}
			seen[p] = true
			for _, r := range p {
				if r == '{' || r == '}' {
					t.Fatalf("Prefix %q holds a brace", p)
				}
			}
		}
	})
}

// fatalTB is a testing.TB whose Fatal and Fatalf panic with the message
// instead of ending the test, so that a test can see StartServer fail.
type fatalTB struct{ testing.TB }

type fatalMsg string

func (f fatalTB) Fatal(args ...any)                 { panic(fatalMsg(fmt.Sprint(args...))) }
func (f fatalTB) Fatalf(format string, args ...any) { panic(fatalMsg(fmt.Sprintf(format, args...))) }

// TestStartServerOwnsItsPort: StartServer on a port another redis-server
// holds (a free port taken between FreePort and the bind) fails the test
// rather than hand over the other server, whose redis-server of its own
// exited; one on a port of its choice answers from its own process. It
// fails with StartServer trusting any server that answers PING.
func TestStartServerOwnsItsPort(t *testing.T) {
	Addr(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	first := StartServer(t, 0)
	if pid := serverPID(t, first); pid != first.cmd.Process.Pid {
		t.Fatalf("StartServer's server answers as process %d, started %d", pid, first.cmd.Process.Pid)
	}
	var msg fatalMsg
	func() {
		defer func() { msg, _ = recover().(fatalMsg) }()
		s := StartServer(fatalTB{t}, first.Port)
		t.Errorf("StartServer on the port of another server (process %d) returned one on port %d", first.cmd.Process.Pid, s.Port)
	}()
	if !strings.Contains(string(msg), "another redis-server") {
		t.Fatalf("StartServer on a taken port failed with %q, want one saying another redis-server answers", msg)
	}
}

// serverPID returns the process_id the server at s reports.
func serverPID(t *testing.T, s *Server) int {
	t.Helper()
	info, err := Client(t, s.Addr()).Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(info, "process_id:")
	v, _, _ = strings.Cut(v, "\r")
	pid, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("process_id in %q: %v", info, err)
	}
	return pid
}
