package main

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/warmpod/warmpod/jobspec"
)

// pathList is a repeatable flag of path patterns; one value may also hold
// several separated by ':' (as PATH does), which is how its environment
// twin carries more than one.
type pathList []string

func (l *pathList) String() string { return strings.Join(*l, ":") }

// Set appends each ':'-separated pattern of v, refusing any that
// jobspec.CheckCleanupPath refuses.
func (l *pathList) Set(v string) error {
	ps := strings.Split(v, ":")
	for _, p := range ps {
		if reason := jobspec.CheckCleanupPath(p); reason != "" {
			return fmt.Errorf("%q: %s", p, reason)
		}
	}
	*l = append(*l, ps...)
	return nil
}

// parseListenAddr parses "[IP]:PORT" (":9898" listens on every address;
// an IPv6 address goes in brackets). A host name is refused: resolving it
// would link net's resolver into PID 1 (internal/sockdial says why), and
// a probe server binds to an address anyway.
func parseListenAddr(s string) (*net.TCPAddr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%q: the port must be a number from 0 to 65535", s)
	}
	a := &net.TCPAddr{Port: int(p)}
	if host != "" {
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%q: the host must be empty or an IP address", s)
		}
		a.IP = ip.AsSlice()
	}
	return a, nil
}
