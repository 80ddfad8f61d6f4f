package pgtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Cut is a moment at which a Proxy cuts a connection: it closes both of
// its sides without forwarding the message it stopped at.
type Cut int

const (
	// CutNone cuts nothing.
	CutNone Cut = iota
	// CutBeforeStatement cuts at the next statement a client sends (a
	// Query, Parse or Bind message), before the server sees it: to the
	// client, a connection that died while it was idle.
	CutBeforeStatement
	// CutMidTransaction cuts when the server answers a client inside a
	// transaction (ReadyForQuery with status 'T'), dropping that answer:
	// the client is mid-transaction and has not sent COMMIT; the server
	// rolls the transaction back.
	CutMidTransaction
	// CutBeforeCommit cuts when a client sends COMMIT, before the server
	// sees it: the client sent COMMIT and gets no answer, and nothing was
	// committed.
	CutBeforeCommit
	// CutAfterCommit cuts when the server answers COMMIT (CommandComplete
	// "COMMIT"), dropping the answer: the client sent COMMIT and gets no
	// answer, and the transaction was committed.
	CutAfterCommit
)

func (c Cut) String() string {
	return [...]string{"none", "before a statement", "mid-transaction", "before COMMIT reaches the server", "after COMMIT, before its answer"}[c]
}

// Proxy is a TCP proxy for the PostgreSQL protocol between clients and one
// server (its target), for fault injection: it cuts a connection at a
// chosen moment (Arm), delays every message (SetLatency), refuses new
// connections (Refuse) or cuts them all (CutAll). It reads the protocol's
// message framing only, so clients must not use TLS (sslmode=disable or
// prefer; it passes the server's "no TLS" answer through).
type Proxy struct {
	ln net.Listener
	// Port is the loopback port it listens on.
	Port int

	mu      sync.Mutex
	target  string
	latency time.Duration
	refuse  bool
	armed   Cut
	conns   map[*proxyConn]struct{}
	closed  bool
	wg      sync.WaitGroup
	cuts    atomic.Int64
	firedCh chan Cut
}

// NewProxy starts a proxy on a free loopback port to target (host:port) and
// closes it at cleanup.
func NewProxy(t interface {
	Helper()
	Fatal(...any)
	Cleanup(func())
}, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy starts a proxy on a free loopback port to target (host:port);
// the caller closes it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, Port: ln.Addr().(*net.TCPAddr).Port, target: target, conns: map[*proxyConn]struct{}{}, firedCh: make(chan Cut, 64)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sends new connections to target (host:port); open ones stay on
// the old one.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// SetLatency delays each message by d, each way, from when the proxy read
// it; zero forwards at once. Throughput is not bounded: messages in flight
// overlap, as on a long link.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Refuse makes the proxy close each new connection at once (on) or serve
// it again (off); open connections are left alone.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Arm makes the proxy cut the first connection to reach moment c, once;
// Fired answers when it did. Arming again replaces a cut not yet made.
func (p *Proxy) Arm(c Cut) {
	p.mu.Lock()
	p.armed = c
	p.mu.Unlock()
}

// Fired returns a channel that receives each armed cut as it is made.
func (p *Proxy) Fired() <-chan Cut { return p.firedCh }

// Cuts returns the armed cuts made so far.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

// CutAll closes every open connection, as a network partition or the
// server's host dying would.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

// take reports whether cut c is armed, disarming it.
func (p *Proxy) take(c Cut) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed != c {
		return false
	}
	p.armed = CutNone
	p.cuts.Add(1)
	select {
	case p.firedCh <- c:
	default:
	}
	return true
}

func (p *Proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target, refuse, closed := p.target, p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			client.Close()
			continue
		}
		server, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			client.Close() // as the server refusing it
			continue
		}
		c := &proxyConn{p: p, client: client, server: server, stmts: map[string]bool{},
			toServer: make(chan timed, 1024), toClient: make(chan timed, 1024), done: make(chan struct{}),
			serverDelivered: make(chan struct{}), clientDelivered: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(4)
		go c.fromClient()
		go c.fromServer()
		go c.deliver(c.server, c.toServer, c.serverDelivered)
		go c.deliver(c.client, c.toClient, c.clientDelivered)
	}
}

// proxyConn is one client connection and its connection to the server.
type proxyConn struct {
	p              *Proxy
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed by close
	// sslAnswers counts the one-byte answers to SSLRequest or
	// GSSENCRequest the server owes.
	sslAnswers atomic.Int32
	// stmts are the names of the prepared statements of COMMIT, so that a
	// Bind of one is seen as a COMMIT (fromClient's alone).
	stmts map[string]bool
	// toServer and toClient queue the messages read, each to be written
	// once the latency has passed since it was read (deliver).
	toServer, toClient chan timed
	// serverDelivered and clientDelivered are closed when deliver has
	// written, or dropped, the last message of each queue.
	serverDelivered, clientDelivered chan struct{}
}

// timed is a message and when to write it.
type timed struct {
	at  time.Time
	msg []byte
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

const (
	sslRequestCode    = 80877103
	gssencRequestCode = 80877104
	cancelRequestCode = 80877102
)

// fromClient forwards the client's messages: the untyped start-up ones,
// then typed ones, cutting where armed.
func (c *proxyConn) fromClient() {
	defer c.p.wg.Done()
	defer c.flushThenClose(c.toServer, c.serverDelivered)
	r := bufio.NewReaderSize(c.client, 64<<10)
	// Start-up: SSLRequest or GSSENCRequest (answered with one byte), then
	// the StartupMessage or a CancelRequest.
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 8 || n > 1<<20 {
			return
		}
		msg := make([]byte, n)
		copy(msg, hdr[:])
		if _, err := io.ReadFull(r, msg[8:]); err != nil {
			return
		}
		code := binary.BigEndian.Uint32(hdr[4:])
		if code == sslRequestCode || code == gssencRequestCode {
			c.sslAnswers.Add(1)
		}
		if err := c.forward(c.toServer, msg); err != nil {
			return
		}
		if code != sslRequestCode && code != gssencRequestCode {
			break
		}
	}
	for {
		typ, msg, err := readMessage(r)
		if err != nil {
			return
		}
		if c.cutClient(typ, msg) {
			return
		}
		if err := c.forward(c.toServer, msg); err != nil {
			return
		}
	}
}

// cutClient reports whether the client's message is where an armed cut
// happens.
func (c *proxyConn) cutClient(typ byte, msg []byte) bool {
	body := msg[5:]
	commit := false
	switch typ {
	case 'Q':
		commit = isCommit(cstring(body))
	case 'P': // Parse: statement name, query
		name := cstring(body)
		query := cstring(body[len(name)+1:])
		if isCommit(query) {
			commit = true
			if name != "" {
				c.stmts[name] = true
			}
		}
	case 'B': // Bind: portal name, statement name
		portal := cstring(body)
		commit = c.stmts[cstring(body[len(portal)+1:])]
	}
	if typ == 'Q' || typ == 'P' || typ == 'B' {
		if c.p.take(CutBeforeStatement) {
			return true
		}
	}
	return commit && c.p.take(CutBeforeCommit)
}

// fromServer forwards the server's messages, cutting where armed.
func (c *proxyConn) fromServer() {
	defer c.p.wg.Done()
	defer c.flushThenClose(c.toClient, c.clientDelivered)
	r := bufio.NewReaderSize(c.server, 64<<10)
	for {
		// The first byte read tells: the counter is raised before the
		// request it answers is forwarded.
		b, err := r.ReadByte()
		if err != nil {
			return
		}
		if c.sslAnswers.Load() > 0 {
			c.sslAnswers.Add(-1)
			if b == 'S' || b == 'G' {
				return // encryption the proxy cannot read
			}
			if err := c.forward(c.toClient, []byte{b}); err != nil {
				return
			}
			continue
		}
		r.UnreadByte() //nolint:errcheck // just read
		typ, msg, err := readMessage(r)
		if err != nil {
			return
		}
		switch {
		case typ == 'C' && cstring(msg[5:]) == "COMMIT":
			if c.p.take(CutAfterCommit) {
				return
			}
		case typ == 'Z' && len(msg) > 5 && msg[5] == 'T':
			if c.p.take(CutMidTransaction) {
				return
			}
		}
		if err := c.forward(c.toClient, msg); err != nil {
			return
		}
	}
}

// forward queues msg to be written once the proxy's latency has passed:
// latency without a bound on throughput, as a long link has. It fails once
// the connection is closed.
func (c *proxyConn) forward(q chan<- timed, msg []byte) error {
	select {
	case <-c.done:
		return net.ErrClosed
	case q <- timed{at: time.Now().Add(c.p.delay()), msg: msg}:
		return nil
	}
}

// flushThenClose ends a reader: the messages it queued before it stopped
// (the end of its side, or a cut) are delivered, so that a cut falls
// exactly where it was armed, and then the connection is closed.
func (c *proxyConn) flushThenClose(q chan timed, delivered <-chan struct{}) {
	close(q)
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
	}
	c.close()
}

// deliver writes the messages of q to w, each at its time, until q is
// closed; a failed write closes the connection.
func (c *proxyConn) deliver(w net.Conn, q <-chan timed, delivered chan<- struct{}) {
	defer c.p.wg.Done()
	defer close(delivered)
	for m := range q {
		if d := time.Until(m.at); d > 0 {
			time.Sleep(d)
		}
		if _, err := w.Write(m.msg); err != nil {
			c.close()
		}
	}
}

// readMessage reads one typed message: its type and the whole message,
// type and length included.
func readMessage(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New(fmt.Sprintf("pgtest proxy: bad message length %d", n))
	}
	msg := make([]byte, 1+n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return hdr[0], msg, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

func isCommit(q string) bool {
	q = string(bytes.ToUpper(bytes.TrimSpace([]byte(q))))
	return q == "COMMIT" || q == "COMMIT;" || q == "END" || q == "END;"
}
