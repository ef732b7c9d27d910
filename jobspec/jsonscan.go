package jobspec

// The job spec is walked member by member with internal/jsondec's walker
// over text json.Valid accepted: it yields sub-slices of the input, so each
// member is decoded with its field known for every error, and secret values
// are never copied by encoding/json into buffers or strings this package
// cannot wipe.

import "github.com/warmpod/warmpod/internal/jsondec"

// isNull reports whether the JSON value v is the literal null.
func isNull(v []byte) bool { return string(v) == "null" }

// skipSpace returns the index of the first non-whitespace byte at or after
// i.
func skipSpace(b []byte, i int) int { return jsondec.SkipSpace(b, i) }

// eachMember calls fn with the key and the raw value of each member of the
// JSON object obj, in input order. It stops at the first error fn returns.
// malformed is returned if obj is not a well-formed object.
func eachMember(obj []byte, malformed *SpecError, fn func(key string, val []byte) *SpecError) *SpecError {
	var failed *SpecError
	err := jsondec.Members(obj, func(key string, val []byte) error {
		if failed = fn(key, val); failed != nil {
			return failed
		}
		return nil
	})
	return walked(failed, err, malformed)
}

// eachElement calls fn with the index and the raw value of each element of
// the JSON array arr, in order. It stops at the first error fn returns.
// malformed is returned if arr is not a well-formed array.
func eachElement(arr []byte, malformed *SpecError, fn func(i int, val []byte) *SpecError) *SpecError {
	var failed *SpecError
	n := 0
	err := jsondec.Elements(arr, func(val []byte) error {
		if failed = fn(n, val); failed != nil {
			return failed
		}
		n++
		return nil
	})
	return walked(failed, err, malformed)
}

// walked is the outcome of a walk: fn's error, else malformed if the walker
// found the text not well formed. (fn's *SpecError goes back through the
// walker as an error; it is kept typed here so that a nil one is nil.)
func walked(failed *SpecError, err error, malformed *SpecError) *SpecError {
	switch {
	case failed != nil:
		return failed
	case err != nil:
		return malformed
	}
	return nil
}
