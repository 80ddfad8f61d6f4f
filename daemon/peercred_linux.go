package daemon

import (
	"encoding/binary"
	"errors"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readPeerCred reads the credentials the kernel recorded for the process at
// the other end of c when it connected.
func readPeerCred(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var (
		pc      PeerCred
		credErr error
	)
	err = raw.Control(func(fd uintptr) {
		var u *unix.Ucred
		if u, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); credErr != nil {
			return
		}
		pc.PID, pc.UID, pc.GID = uint32(u.Pid), u.Uid, u.Gid
		pc.Groups = peerGroups(int(fd))
	})
	if err == nil {
		err = credErr
	}
	return pc, err
}

// peerGroups returns the peer's supplementary groups (SO_PEERGROUPS), or nil
// when the kernel cannot tell.
func peerGroups(fd int) []uint32 {
	buf := make([]byte, 64*4)
	for {
		n := uint32(len(buf))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errors.Is(errno, unix.ERANGE) && int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		if errno != 0 {
			return nil
		}
		groups := make([]uint32, 0, n/4)
		for i := 0; i+4 <= int(n); i += 4 {
			groups = append(groups, binary.NativeEndian.Uint32(buf[i:]))
		}
		return groups
	}
}
