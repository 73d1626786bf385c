package util

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// Kill sends SIGKILL to the process (no graceful shutdown, no lease release) and waits until it
// has exited.
func (p *SchedulerProcess) Kill(t testing.TB) {
	t.Helper()
	if p.Exited() {
		return
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.Exited() {
		t.Fatalf("SIGKILL %d: %v", p.Cmd.Process.Pid, err)
	}
	if exited, _ := p.Wait(30 * time.Second); !exited {
		t.Fatalf("process %d still running 30s after SIGKILL", p.Cmd.Process.Pid)
	}
}

// Exited reports whether the process has exited.
func (p *SchedulerProcess) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// LeaseHolder returns the holderIdentity of a Lease ("" if the Lease or its holder is missing).
func LeaseHolder(ctx context.Context, cs kubernetes.Interface, namespace, name string) string {
	lease, err := cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// WaitForLeaseHolder polls the Lease until it has a holder other than not ("" for any holder),
// and returns the holder and when it was seen.
func WaitForLeaseHolder(ctx context.Context, t *testing.T, cs kubernetes.Interface, namespace, name, not string, timeout time.Duration) (string, time.Time) {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		holder = LeaseHolder(ctx, cs, namespace, name)
		return holder != "" && holder != not, nil
	})
	if err != nil {
		t.Fatalf("Lease %s/%s: no holder other than %q within %v (holder: %q)", namespace, name, not, timeout, holder)
	}
	return holder, time.Now()
}

// Etcd is an etcd child process (the etcd binary on PATH, as framework.EtcdMain uses) with a
// fixed data directory and a fixed client socket, so it can be killed and started again and its
// clients reconnect to the same URL and find the same data.
type Etcd struct {
	t    *testing.T
	dir  string
	sock string
	bin  string
	proc *SchedulerProcess
}

// StartEtcd starts etcd in a fresh data directory that lives until the test ends.
func StartEtcd(t *testing.T) *Etcd {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd not on PATH (make etcd; PATH=$PWD/bin:$PATH): %v", err)
	}
	// A short path: a unix socket path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "e2e-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &Etcd{t: t, dir: dir, sock: filepath.Join(dir, "etcd.sock"), bin: bin}
	e.Start()
	return e
}

// URL is the client URL, the same across restarts.
func (e *Etcd) URL() string { return "unix://" + e.sock }

// Storage is an apiserver storage config for this etcd.
func (e *Etcd) Storage() *storagebackend.Config {
	cfg := storagebackend.NewDefaultConfig("/registry", nil)
	cfg.Transport.ServerList = []string{e.URL()}
	return cfg
}

// Start starts etcd on the data directory and waits until its socket accepts connections.
func (e *Etcd) Start() {
	e.t.Helper()
	_ = os.Remove(e.sock)
	e.proc = StartProcess(e.t, e.bin,
		"--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.URL(),
		// Not used (see framework.RunCustomEtcd), but must be host:port.
		"--advertise-client-urls", "http://127.0.0.111:0",
		"--listen-peer-urls", "http://127.0.0.1:0",
		"--log-level", "warn",
	)
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if e.proc.Exited() {
			return false, fmt.Errorf("etcd exited: %s", e.proc.Output())
		}
		c, err := net.Dial("unix", e.sock)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("etcd not listening on %s: %v", e.sock, err)
	}
}

// Kill kills etcd with SIGKILL.
func (e *Etcd) Kill() { e.proc.Kill(e.t) }

// Forwarder is a TCP proxy on a fixed loopback port whose backend can change: it stands in for
// a load balancer or Service address in front of a kube-apiserver that restarts on another port.
type Forwarder struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
	conns   map[net.Conn]struct{}
}

// StartForwarder listens on a free loopback port until the test ends; with no backend it closes
// every connection it accepts.
func StartForwarder(t *testing.T) *Forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Forwarder{ln: ln, conns: map[net.Conn]struct{}{}}
	go f.serve()
	t.Cleanup(func() {
		ln.Close()
		f.SetBackend("")
	})
	return f
}

// Addr is the forwarder's host:port.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// SetBackend switches new connections to backend (host:port; "" for none) and closes every
// connection open so far, as a restarting server would.
func (f *Forwarder) SetBackend(backend string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backend = backend
	for c := range f.conns {
		c.Close()
	}
	f.conns = map[net.Conn]struct{}{}
}

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.handle(c)
	}
}

func (f *Forwarder) handle(c net.Conn) {
	f.mu.Lock()
	backend := f.backend
	f.mu.Unlock()
	if backend == "" {
		c.Close()
		return
	}
	b, err := net.DialTimeout("tcp", backend, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	if f.backend != backend {
		// Switched while dialling.
		f.mu.Unlock()
		c.Close()
		b.Close()
		return
	}
	f.conns[c], f.conns[b] = struct{}{}, struct{}{}
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	c.Close()
	b.Close()
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, b)
	f.mu.Unlock()
}

// RestartableControlPlane is kube-apiserver (in process) and etcd (child process) that can both
// be restarted while clients keep one address and one set of credentials. StartTestServer picks
// a new port and generates new serving certificates on every start (it creates its listener
// itself, so --secure-port is not honoured), so:
//   - clients reach it through a Forwarder on a fixed port;
//   - it serves one fixed self-signed certificate (--tls-cert-file/--tls-private-key-file, which
//     StartTestServer does honour: flags are parsed after its defaults), so clients verify TLS
//     against a CA that does not change;
//   - clients authenticate with a static token (--token-auth-file, group system:masters), which
//     survives restarts, unlike the loopback token.
type RestartableControlPlane struct {
	Etcd *Etcd
	// Config is the stable admin client config: forwarder address, fixed CA, static token.
	Config *rest.Config
	Client kubernetes.Interface
	// APIServer is the running apiserver (nil while stopped).
	APIServer *controlplane.ControlPlane

	t     *testing.T
	fwd   *Forwarder
	flags []string
}

// StartRestartableControlPlane starts etcd, the forwarder and kube-apiserver with the CRDs.
func StartRestartableControlPlane(t *testing.T, flags ...string) *RestartableControlPlane {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	const token = "e2e-restart-admin-token"
	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"tokens.csv":  []byte(token + ",e2e-admin,e2e-admin-uid,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &RestartableControlPlane{
		t:   t,
		fwd: StartForwarder(t),
		flags: append([]string{
			"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
			"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
			"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		}, flags...),
	}
	r.Config = &rest.Config{
		Host:            "https://" + r.fwd.Addr(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certPEM},
		QPS:             5000,
		Burst:           5000,
	}
	if r.Client, err = kubernetes.NewForConfig(r.Config); err != nil {
		t.Fatal(err)
	}
	r.Etcd = StartEtcd(t)
	r.StartAPIServer()
	return r
}

// StartAPIServer starts kube-apiserver against the etcd and points the forwarder at it.
func (r *RestartableControlPlane) StartAPIServer() {
	r.t.Helper()
	cp, err := controlplane.Start(r.t, r.Etcd.Storage(), controlplane.Options{Flags: append(append([]string{}, ControlPlaneFlags...), r.flags...)})
	if err != nil {
		r.t.Fatalf("starting kube-apiserver: %v", err)
	}
	r.APIServer = cp
	// Runs before cp's own cleanup: cutting the clients' connections first spares the apiserver
	// waiting for them to close at shutdown (~40 s otherwise).
	r.t.Cleanup(r.StopAPIServer)
	r.fwd.SetBackend(strings.TrimPrefix(cp.Config.Host, "https://"))
	// The stable identity works.
	if _, err := r.Client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.t.Fatalf("kube-apiserver through the forwarder with the static token: %v", err)
	}
}

// StopAPIServer stops kube-apiserver; the forwarder then refuses connections.
func (r *RestartableControlPlane) StopAPIServer() {
	r.fwd.SetBackend("")
	if r.APIServer != nil {
		r.APIServer.Stop()
		r.APIServer = nil
	}
}

// WaitForClientErrors waits until proc has logged n more failed requests to the control plane
// (lines naming its address) than it had when called, so an outage lasts until the process's
// clients have noticed it, however long that takes on a loaded machine.
func (r *RestartableControlPlane) WaitForClientErrors(ctx context.Context, t *testing.T, proc *SchedulerProcess, since, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return r.ClientErrors(proc) >= since+n, nil
	})
	if err != nil {
		t.Fatalf("the process logged no failed requests to %s within 2m (%d, want %d)", r.fwd.Addr(), r.ClientErrors(proc), since+n)
	}
}

// ClientErrors counts the lines of proc's output that name the control plane's address: client
// errors (a request URL) once the process has started.
func (r *RestartableControlPlane) ClientErrors(proc *SchedulerProcess) int {
	return strings.Count(proc.Output(), r.fwd.Addr())
}
