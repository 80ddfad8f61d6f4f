package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon/rpc"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
)

// PeerCred is the AuthInfo of a call over the Unix socket: the calling
// process's credentials as the kernel gave them when it connected
// (SO_PEERCRED and SO_PEERGROUPS).
type PeerCred struct {
	credentials.CommonAuthInfo
	PID, UID, GID uint32
	// Groups are the caller's supplementary gids; nil when the kernel could
	// not say (before Linux 4.13).
	Groups []uint32
}

// AuthType implements credentials.AuthInfo.
func (PeerCred) AuthType() string { return "peercred" }

// peerCredCreds are transport credentials for a Unix socket: the handshake
// reads the peer's credentials and the connection stays plaintext. A
// connection that is not a Unix socket is handed to next.
type peerCredCreds struct {
	credentials.TransportCredentials // next, for TCP and the client side
}

func (c peerCredCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return c.TransportCredentials.ServerHandshake(conn)
	}
	pc, err := readPeerCred(uc)
	if err != nil {
		return nil, nil, fmt.Errorf("read the caller's peer credentials: %w", err)
	}
	pc.CommonAuthInfo = credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}
	return conn, pc, nil
}

func (c peerCredCreds) Clone() credentials.TransportCredentials {
	return peerCredCreds{c.TransportCredentials.Clone()}
}

// allowList is who may call: a caller passes when its uid is in uids or
// its primary or a supplementary gid is in gids. Empty lists admit anyone.
type allowList struct {
	uids, gids []uint32
}

func (a allowList) empty() bool { return len(a.uids) == 0 && len(a.gids) == 0 }

func (a allowList) admits(pc PeerCred) bool {
	if slices.Contains(a.uids, pc.UID) || slices.Contains(a.gids, pc.GID) {
		return true
	}
	for _, g := range pc.Groups {
		if slices.Contains(a.gids, g) {
			return true
		}
	}
	return false
}

// healthService stays open to every caller that can reach the socket: it
// reveals nothing but SERVING or NOT_SERVING, and supervisors' probes run as
// whichever user they run as.
var healthService = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

// check returns rpc.ErrPermissionDenied for a call that the list does not admit.
func (a allowList) check(ctx context.Context, method string) error {
	if a.empty() || strings.HasPrefix(method, healthService) {
		return nil
	}
	var pc PeerCred
	p, ok := peer.FromContext(ctx)
	if ok {
		pc, ok = p.AuthInfo.(PeerCred)
	}
	if !ok {
		return fmt.Errorf("%w: the caller's peer credentials are unknown", rpc.ErrPermissionDenied)
	}
	if a.admits(pc) {
		return nil
	}
	return fmt.Errorf("%w: uid %d (gid %d) is not among the uids and gids this daemon allows (--allow-uid, --allow-gid)",
		rpc.ErrPermissionDenied, pc.UID, pc.GID)
}

func (a allowList) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, rpc.ToStatus(err).Err()
	}
	return handler(ctx, req)
}

func (a allowList) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return rpc.ToStatus(err).Err()
	}
	return handler(srv, ss)
}

// errNoPeerCred is readPeerCred's error where the system has no way to tell.
var errNoPeerCred = errors.New("peer credentials are read on Linux only")
