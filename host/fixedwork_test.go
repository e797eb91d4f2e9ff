package host

import (
	"testing"
)

// BenchmarkFixedWork times one pass of the fixed work, and a reading's
// tries.
func BenchmarkFixedWork(b *testing.B) {
	b.Run("pass", func(b *testing.B) {
		var a [fixedWorkWords]uint64
		for b.Loop() {
			fixedWork(&a)
		}
	})
	b.Run("reading", func(b *testing.B) {
		for b.Loop() {
			timeFixedWork()
		}
	})
}
