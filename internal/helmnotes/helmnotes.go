// Package helmnotes reads the values blocks out of what the chart's
// NOTES.txt prints, as a user copies them: the first block indented by
// two spaces or more after a heading line, dedented. The chart's tests and
// the real-cluster tests paste them into the runner charts with it.
package helmnotes

import (
	"bufio"
	"fmt"
	"strings"
)

// ValuesBlock is the first indented block after the line of notes that
// starts with heading, dedented by its first line's indent. Errors: no
// such heading, or no block after it.
func ValuesBlock(notes, heading string) (string, error) {
	i := strings.Index(notes, "\n"+heading)
	if i < 0 {
		return "", fmt.Errorf("no line starting %q in the notes", heading)
	}
	var block []string
	indent := ""
	sc := bufio.NewScanner(strings.NewReader(notes[i+1:]))
	for sc.Scan() {
		line := sc.Text()
		if indent == "" && strings.HasPrefix(line, "  ") && strings.TrimSpace(line) != "" {
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		}
		if indent == "" {
			continue
		}
		if strings.TrimSpace(line) == "" || !strings.HasPrefix(line, indent) {
			break
		}
		block = append(block, strings.TrimPrefix(line, indent))
	}
	if len(block) == 0 {
		return "", fmt.Errorf("no indented values after %q", heading)
	}
	return strings.Join(block, "\n") + "\n", nil
}
