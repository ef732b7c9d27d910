package poolapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReadSizingStatus(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, text string
		want       SizingStatus
	}{
		{"none", "", SizingStatus{}},
		{"not JSON", "replicas: 3", SizingStatus{}},
		{"a field of the wrong type: nothing of it, not a part", `{"replicas": 3, "podStartSeconds": "fast"}`, SizingStatus{}},
		{"written by the controller", `{"replicas":3,"reason":"demand","message":"m","desired":4,"demand":2,"podStartSeconds":3.5,"decidedAt":"2026-12-07T10:00:00Z"}`,
			SizingStatus{Replicas: 3, Reason: "demand", Message: "m", Desired: 4, Demand: 2, PodStart: 3.5, DecidedAt: at}},
		{"fields it does not know are ignored", `{"replicas":1,"future":true}`, SizingStatus{Replicas: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ann := map[string]string{}
			if c.text != "" {
				ann[AnnotationSizing] = c.text
			}
			assert.Equal(t, c.want, ReadSizingStatus(ann))
		})
	}
	assert.Equal(t, SizingStatus{}, ReadSizingStatus(nil))
}
