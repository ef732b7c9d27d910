package executor

import (
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The RBAC hint follows a 403 only; an API server that cannot be reached
// gets its own hint (issue 39: "connection refused" was told to fix RBAC).
func TestHint(t *testing.T) {
	const rbac = "the account needs list on deployments"
	forbiddenErr := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("no"))
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	assert.Equal(t, " ("+rbac+")", Hint(forbiddenErr, rbac))
	assert.Contains(t, Hint(refused, rbac), "the API server could not be reached")
	assert.NotContains(t, Hint(refused, rbac), rbac)
	assert.Empty(t, Hint(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"), rbac))
	assert.Empty(t, Hint(nil, rbac))
}
