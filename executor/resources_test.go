package executor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestCapped: a cap is the limit, and the request too where the
// container requests as much as its limit (QoS kept) or more than the cap.
func TestCapped(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	for _, tc := range []struct {
		name string
		have corev1.ResourceRequirements
		caps corev1.ResourceList
		want string
	}{
		{"burstable: the limit only", corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "1")}, rl("cpu", "2"), "requests cpu=100m, limits cpu=2"},
		{"no limit before: the limit only", corev1.ResourceRequirements{Requests: rl("memory", "64Mi")}, rl("memory", "1Gi"), "requests memory=64Mi, limits memory=1Gi"},
		{"guaranteed stays guaranteed", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}, rl("cpu", "2"), "requests cpu=2 memory=1Gi, limits cpu=2 memory=1Gi"},
		{"a request above the cap comes down", corev1.ResourceRequirements{Requests: rl("memory", "2Gi")}, rl("memory", "1Gi"), "requests memory=1Gi, limits memory=1Gi"},
		{"nothing requested: nothing requested", corev1.ResourceRequirements{}, rl("cpu", "500m"), "limits cpu=500m"},
		{"no caps", corev1.ResourceRequirements{Requests: rl("cpu", "1")}, nil, "requests cpu=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := Describe(tc.have)
			assert.Equal(t, tc.want, Describe(capped(tc.have, tc.caps)))
			assert.Equal(t, before, Describe(tc.have), "the input is not changed")
		})
	}
}
