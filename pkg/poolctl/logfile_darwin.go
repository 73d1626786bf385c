package poolctl

import "syscall"

func dupFD(fd int) (int, error) {
	nfd, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(nfd)
	}
	return nfd, err
}

func dup2FD(oldfd, newfd int) error { return syscall.Dup2(oldfd, newfd) }
