//go:build !linux

package daemon

import "net"

func readPeerCred(*net.UnixConn) (PeerCred, error) { return PeerCred{}, errNoPeerCred }
