package sigwait

import (
	"os"
	"os/signal"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The waiter needs the main thread: keep the main goroutine on it, run
// the tests on another goroutine, and let them run functions on the main
// thread through onMain.
func init() { runtime.LockOSThread() }

var mainThread = make(chan func())

func TestMain(m *testing.M) {
	go func() { os.Exit(m.Run()) }()
	for f := range mainThread {
		f()
	}
}

// onMain runs f on the main thread and returns at once.
func onMain(f func()) { mainThread <- f }

func TestNewRefusesOtherThreads(t *testing.T) {
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, err := New([]unix.Signal{unix.SIGUSR1})
		done <- err
	}()
	require.ErrorIs(t, <-done, ErrNotMainThread)
}

func TestHas(t *testing.T) {
	w := &Waiter{}
	w.set.Val[0] = 1<<(unix.SIGTERM-1) | 1<<(63)
	require.True(t, w.Has(unix.SIGTERM))
	require.True(t, w.Has(64))
	require.False(t, w.Has(unix.SIGHUP))
	require.False(t, w.Has(0))
	require.False(t, w.Has(65))
}

// Every signal sent to the process is taken exactly once, by the waiter
// or (while it is busy) by os/signal; an idle waiter takes them.
func TestProcessSignalsReachTheWaiterOrTheFallback(t *testing.T) {
	fallback := make(chan os.Signal, 16)
	signal.Notify(fallback, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(fallback)

	waited := make(chan unix.Signal, 16)
	ready := make(chan *Waiter)
	onMain(func() {
		w, err := New([]unix.Signal{unix.SIGUSR1, unix.SIGUSR2, unix.SIGKILL, 0, 99})
		if err != nil {
			t.Error(err)
			close(ready)
			return
		}
		ready <- w
		w.Run(func(s unix.Signal) { waited <- s })
	})
	w := <-ready
	require.NotNil(t, w)
	require.False(t, w.Has(unix.SIGKILL), "SIGKILL cannot be waited for")
	require.True(t, w.Has(unix.SIGUSR2))

	byWaiter := 0
	for i := range 20 {
		sig := unix.SIGUSR1
		if i%2 == 1 {
			sig = unix.SIGUSR2
		}
		// Our own process: never 0, 1 or -1.
		pid := unix.Getpid()
		require.Greater(t, pid, 1)
		require.NoError(t, unix.Kill(pid, sig))
		select {
		case got := <-waited:
			require.Equal(t, sig, got)
			byWaiter++
		case got := <-fallback:
			require.Equal(t, sig, got.(unix.Signal))
		case <-time.After(5 * time.Second):
			t.Fatalf("signal %d taken by neither path", i)
		}
	}
	start := time.Now()
	w.Stop(0)
	select {
	case <-w.stopped:
	default:
		t.Fatal("Stop returned before Run did")
	}
	t.Logf("20 signals: %d taken by the waiter, %d by os/signal; Stop took %s", byWaiter, 20-byWaiter, time.Since(start))
	require.Positive(t, byWaiter, "the waiter never took a signal: it is not on the thread the kernel picks")
	select {
	case s := <-waited:
		t.Fatalf("signal %v taken twice", s)
	case s := <-fallback:
		t.Fatalf("signal %v taken twice", s)
	default:
	}
}
