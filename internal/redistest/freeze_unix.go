//go:build unix

package redistest

import "syscall"

// Freeze stops the server's process (SIGSTOP) without closing anything:
// connections stay open, the kernel still accepts connections and the
// bytes sent on them, and nothing is answered until Thaw. A test decides
// exactly when a frozen server answers again, where a slow proxy or a
// pause would leave it to a timer.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT): it reads what was sent meanwhile
// and answers it.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatal("redistest: the server was stopped")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v to redis-server: %v", sig, err)
	}
}
