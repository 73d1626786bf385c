package controlplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/klog/v2"
)

// etcdStartTimeout bounds how long StartStandalone waits for the embedded etcd to become ready.
const etcdStartTimeout = time.Minute

// StartStandalone starts an embedded etcd in a fresh temporary directory on free loopback ports,
// then kube-apiserver against it via Start, outside of any test: it needs no etcd binary and no
// testing.T. Stop stops the apiserver, then etcd, and removes the temporary directories.
//
// ctx bounds the startup only: once StartStandalone has returned, the control plane runs until
// Stop is called. If ctx is cancelled while etcd
// starts, StartStandalone returns at once; if it is cancelled while the apiserver starts,
// StartStandalone waits until the apiserver is up (typically 2-3 s), then stops everything and
// returns ctx's error: cancelling a starting kube-apiserver makes its post-start hooks call
// klog.Fatal, which would exit the program. Either way the temporary directories are removed.
// (The same klog.Fatal can still happen if kube-apiserver fails on its own before it is healthy;
// that is kube-apiserver's behaviour.)
//
// Logs: etcd's logs (warnings and above) and Start's progress messages go to
// logOutput, which may be io.Discard (nil means io.Discard). klog's global output, which the
// apiserver uses, is redirected to logOutput as well until Stop: klog is switched from stderr
// to logOutput (logtostderr, alsologtostderr off, stderrthreshold FATAL, one_output on) and its
// complete previous state is restored by Stop, so klog flags changed meanwhile are reverted too.
// When several standalone control planes run at once, the first one's logOutput receives klog's
// output until the last one stops. The redirection has no effect if a program installed its own
// logger with klog.SetLogger. The etcd client inside the apiserver logs to stderr through its own
// logger (only on errors in practice), which cannot be redirected.

func StartStandalone(ctx context.Context, logOutput io.Writer, opts Options) (_ *ControlPlane, err error) {
	if logOutput == nil {
		logOutput = io.Discard
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := &syncWriter{w: logOutput}
	root, err := os.MkdirTemp("", "poolctl-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	s := &standalone{
		root: root,
		tb:   &standaloneTB{name: "poolctl-controlplane", out: out},
	}
	// On every failure below, stop what was started; on success, the returned Stop does it.
	defer func() {
		if err != nil {
			s.stop()
		}
	}()

	s.restoreKlog = redirectKlog(out)

	var clientURL string
	s.etcd, clientURL, err = startEtcd(ctx, filepath.Join(root, "etcd"), out)
	if err != nil {
		return nil, err
	}
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{clientURL}

	started, err := Start(s.tb, storage, opts)
	switch {
	case err != nil:
		return nil, err
	case ctx.Err() != nil:
		// Start does not watch ctx: cancelling a kube-apiserver before its post-start hooks have
		// finished makes them call klog.Fatal, which exits the process. So the apiserver was
		// allowed to come up (Start waits for /healthz, which covers the hooks) and is stopped now.
		return nil, fmt.Errorf("starting kube-apiserver: %w", context.Cause(ctx))
	}
	// Start registered started.Stop (the apiserver's tear-down) as a cleanup of s.tb. The caller
	// gets a copy whose Stop runs all cleanups (LIFO, so the apiserver goes first), then stops
	// etcd and removes the files.
	cp := *started
	cp.tearDown = s.stop
	return &cp, nil
}

// standalone is what StartStandalone started, in the order it has to be stopped.
type standalone struct {
	root        string
	tb          *standaloneTB
	etcd        *embed.Etcd
	restoreKlog func()
	stopped     atomic.Bool
}

func (s *standalone) stop() {
	if !s.stopped.CompareAndSwap(false, true) {
		return
	}
	s.tb.runCleanups()
	if s.etcd != nil {
		s.etcd.Close()
	}
	if err := os.RemoveAll(s.root); err != nil {
		s.tb.Logf("removing %s: %v", s.root, err)
	}
	if s.restoreKlog != nil {
		s.restoreKlog()
	}
}

// startEtcd starts a single-member etcd in dir with client and peer listeners on OS-chosen free
// loopback ports and returns it with the URL its clients use.
func startEtcd(ctx context.Context, dir string, out *syncWriter) (*embed.Etcd, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "poolctl"
	cfg.Dir = dir
	// A throw-away single-member store: no fsync, no need to survive a crash.
	cfg.UnsafeNoFsync = true
	// Port 0: the listeners get free ports without a window in which another process could take
	// them. The advertised URLs keep port 0; nothing reads them in a single-member cluster (the
	// apiserver's client does not sync endpoints).
	loopback := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", "0")}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The HTTP/JSON gateway would dial the listen address, port 0; the apiserver speaks gRPC.
	cfg.EnableGRPCGateway = false
	// A single member elects itself after the election timeout; keep it short.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	// Snapshot (and truncate the in-memory raft log) often; the data is small. No auto-compaction:
	// the apiserver compacts etcd itself every 5 minutes.
	cfg.SnapshotCount = 1000
	cfg.SnapshotCatchUpEntries = 1000
	// embed.NewConfig leaves this at 0 in etcd 3.6.4, which makes etcd format and log every
	// request as "expensive" (even with a no-op logger, the formatting is done).
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.Metrics = "basic"
	cfg.LogLevel = "warn"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(out).Named("etcd-server"))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting embedded etcd: %w", err)
	}
	timer := time.NewTimer(etcdStartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("embedded etcd failed: %w", err)
	case <-timer.C:
		e.Close()
		return nil, "", fmt.Errorf("embedded etcd not ready after %s", etcdStartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, "", fmt.Errorf("starting embedded etcd: %w", context.Cause(ctx))
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, "", errors.New("embedded etcd has no client listener")
	}
	return e, "http://" + e.Clients[0].Addr().String(), nil
}

// newZapLogger logs warnings and errors to out, or nothing if out discards everything.
func newZapLogger(out *syncWriter) *zap.Logger {
	if out.w == io.Discard {
		return zap.NewNop()
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(out), zapcore.WarnLevel)
	return zap.New(core)
}

// klogRedirect counts the standalone control planes that redirect klog.
var klogRedirect struct {
	sync.Mutex
	refs int
	// flags sets klog's flags once per process: flag values are written unsynchronised, so
	// later redirects use klog's locked setters only (LogToStderr, SetOutput).
	flags sync.Once
}

// redirectKlog sends klog's output to out (unless it is already redirected by another standalone
// control plane) and returns a function that undoes it once the last user has called it.
func redirectKlog(out io.Writer) (restore func()) {
	klogRedirect.Lock()
	defer klogRedirect.Unlock()
	if klogRedirect.refs == 0 {
		klogRedirect.flags.Do(func() {
			fs := flag.NewFlagSet("klog", flag.ContinueOnError)
			klog.InitFlags(fs)
			for name, value := range map[string]string{
				"alsologtostderr": "false",
				"stderrthreshold": "FATAL",
				// Otherwise an error is written once per severity it includes, three times to out.
				"one_output": "true",
				"log_file":   "",
			} {
				if f := fs.Lookup(name); f != nil {
					_ = f.Value.Set(value)
				}
			}
		})
		klog.LogToStderr(false)
		klog.SetOutput(out)
	}
	klogRedirect.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			klogRedirect.Lock()
			defer klogRedirect.Unlock()
			klogRedirect.refs--
			if klogRedirect.refs == 0 {
				klog.Flush()
				// Back to stderr through klog's locked setters only: klog's State.Restore writes
				// its settings unsynchronised while the stopped apiserver's goroutines may still
				// log (a data race the race detector reports). The flags set above stay; with
				// logtostderr every line goes to stderr whatever they say.
				klog.SetOutput(os.Stderr)
				klog.LogToStderr(true)
			}
		})
	}
}

// syncWriter serialises the writes of klog, etcd's logger and standaloneTB to one io.Writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// standaloneTB is Start's TB outside of tests: log lines go to out, and cleanup functions run
// in LIFO order in runCleanups.
type standaloneTB struct {
	name string
	out  *syncWriter

	mu       sync.Mutex
	cleanups []func()
}

var _ TB = &standaloneTB{}

func (tb *standaloneTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// runCleanups runs (and forgets) the cleanup functions, last registered first.
func (tb *standaloneTB) runCleanups() {
	for {
		tb.mu.Lock()
		n := len(tb.cleanups)
		if n == 0 {
			tb.mu.Unlock()
			return
		}
		f := tb.cleanups[n-1]
		tb.cleanups = tb.cleanups[:n-1]
		tb.mu.Unlock()
		f()
	}
}

func (tb *standaloneTB) Logf(format string, args ...any) {
	if tb.out.w == io.Discard {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	_, _ = io.WriteString(tb.out, tb.name+": "+msg)
}
