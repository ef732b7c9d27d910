package shellproxy

import (
	"os"

	"golang.org/x/sys/unix"
)

func fileFd(f *os.File) int {
	if f == nil {
		return -1
	}
	return int(rawFd(f))
}

func isTerminal(f *os.File) bool {
	fd := fileFd(f)
	if fd < 0 {
		return false
	}
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

func getWinsize(f *os.File) (*unix.Winsize, error) {
	return unix.IoctlGetWinsize(fileFd(f), unix.TIOCGWINSZ)
}

func setWinsize(f *os.File, ws *unix.Winsize) error {
	return unix.IoctlSetWinsize(fileFd(f), unix.TIOCSWINSZ, ws)
}

// makeRaw puts the terminal on f in raw mode (cfmakeraw(3) semantics) so
// that ^C, ^Z and ^D reach the inner pty as bytes, and returns a function
// that restores the previous settings.
func makeRaw(f *os.File) (func(), error) {
	fd := fileFd(f)
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// veof returns the terminal's end-of-file character (c_cc[VEOF], ^D by
// default).
func veof(f *os.File) byte {
	if t, err := unix.IoctlGetTermios(fileFd(f), unix.TCGETS); err == nil && t.Cc[unix.VEOF] != 0 {
		return t.Cc[unix.VEOF]
	}
	return 0x04
}
