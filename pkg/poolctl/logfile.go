package poolctl

import (
	"fmt"
	"os"
	"path/filepath"
)

// redirectStderr sends everything this process writes to its standard error to the file at
// path: klog, etcd's and kube-apiserver's loggers, and those that took os.Stderr when their
// package was initialised, such as kube-apiserver's etcd client (its retry warnings, JSON lines,
// cannot be redirected any other way). It does so at the file descriptor. It returns the
// original standard error, for what the user must see (progress), and a function that restores
// it (errors printed after the run reach the user).
func redirectStderr(path string) (terminal *os.File, restore func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("--log-file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--log-file: %w", err)
	}
	defer f.Close()
	saved, err := dupFD(int(os.Stderr.Fd()))
	if err != nil {
		return nil, nil, fmt.Errorf("--log-file: keeping standard error: %w", err)
	}
	terminal = os.NewFile(uintptr(saved), os.Stderr.Name())
	if err := dup2FD(int(f.Fd()), int(os.Stderr.Fd())); err != nil {
		terminal.Close()
		return nil, nil, fmt.Errorf("--log-file: redirecting standard error to %s: %w", path, err)
	}
	return terminal, func() {
		_ = dup2FD(int(terminal.Fd()), int(os.Stderr.Fd()))
		terminal.Close()
	}, nil
}
