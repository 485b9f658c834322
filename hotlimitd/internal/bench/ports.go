package bench

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// LoopbackPorts returns n distinct loopback TCP ports that were free a
// moment ago, for a child process to listen on. They are drawn from
// below the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range,
// 32768 when it cannot be read), so that no outgoing connection on the
// machine can take one between the check and the child's bind; another
// listener still can, so a caller whose child fails to start retries on
// new ports.
func LoopbackPorts(n int) ([]int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	const base = 20000
	if lo-base < 1000 {
		return nil, errors.New("bench: the ephemeral port range leaves fewer than 1000 ports above 20000")
	}
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, errors.New("bench: no free loopback port found below the ephemeral range")
		}
		p := base + rand.IntN(lo-base)
		if slices.Contains(ports, p) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	return ports, nil
}
