package pool

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/warmpod/warmpod/poolapi"
)

// A pool the controller made from the default (FromBase) is never the
// drivers' default, though its name sorts first and no pool is marked
// default: jobs without an image and cold pods of other images still use
// the pool a person wrote.
func TestAFoundPoolIsNeverTheDefault(t *testing.T) {
	base := liveDeployment("busybox", poolapi.LabelTemplateHash, "1")
	found, err := FromBase(base, "auto-node-20-1a2b3c4d", "node:20", map[string]string{poolapi.AnnotationFoundFrom: "node:20"})
	require.NoError(t, err)
	assert.Equal(t, "node:20", JobImage(&found.Spec.Template.Spec))
	assert.Equal(t, "auto-node-20-1a2b3c4d", found.Spec.Selector.MatchLabels[poolapi.LabelPool])
	assert.Equal(t, "busybox", found.OwnerReferences[0].Name)
	k := &Cluster{Namespace: "ci", CS: fake.NewClientset(base, found,
		replicaSet(base, "1", "h1"), replicaSet(found, "1", "h2"))}
	set, err := k.Pools(context.Background())
	require.NoError(t, err)
	require.Len(t, set.Pools, 2)
	assert.Equal(t, "busybox", set.Pools[0].Name)
	p, warm := set.ForImage("node:20")
	assert.True(t, warm)
	assert.Equal(t, "auto-node-20-1a2b3c4d", p.Name)
}
