package pools

import (
	"testing"

	"go.uber.org/goleak"
)

// The informers, the work queue's delay loop and the event handlers all
// stop with the controller's context and Shutdown: none outlives a test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
