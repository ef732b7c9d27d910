package helmnotes

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValuesBlock(t *testing.T) {
	notes := "intro\nGitLab Runner (x): values\nmore prose\n\n  runners:\n    executor: custom\n  rbac: {create: false}\n\nGitHub Actions:\n\n  containerMode: {}\n"
	b, err := ValuesBlock(notes, "GitLab Runner")
	require.NoError(t, err)
	assert.Equal(t, "runners:\n  executor: custom\nrbac: {create: false}\n", b)
	b, err = ValuesBlock(notes, "GitHub Actions")
	require.NoError(t, err)
	assert.Equal(t, "containerMode: {}\n", b)
	_, err = ValuesBlock(notes, "GoCD")
	assert.Error(t, err)
	_, err = ValuesBlock("\nGoCD\nno block\n", "GoCD")
	assert.Error(t, err)
}
