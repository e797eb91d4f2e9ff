package store

import (
	"errors"
	"testing"
)

// FuzzDecodeConfig: a stored run config decodes to the map it encoded, or
// fails wrapping ErrDecode.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{`{}`, `{"rate":"5/s","header":"Authorization: [redacted]"}`, `null`, `[]`, `{"a":1}`, ``, `{"a":"b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := decodeConfig(s)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("decodeConfig(%q) = %v: want it to wrap ErrDecode", s, err)
			}
			return
		}
		enc, err := encodeConfig(cfg)
		if err != nil {
			t.Fatalf("encode %v: %v", cfg, err)
		}
		again, err := decodeConfig(enc)
		if err != nil || len(again) != len(cfg) {
			t.Fatalf("round trip of %v: %v, %v", cfg, again, err)
		}
		for k, v := range cfg {
			if again[k] != v {
				t.Fatalf("round trip of %v: %v", cfg, again)
			}
		}
	})
}
