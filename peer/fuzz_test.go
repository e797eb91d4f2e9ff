package peer

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/tare-dev/tare"
)

// fuzzFormat feeds any bytes to one format's reader: it must end in io.EOF
// or an error wrapping ErrParse, never panic, and every result it returns
// must be one stats can take.
func fuzzFormat(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	fm, err := Lookup(format)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in), fm, Options{Start: t0})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			var res tare.Result
			err := r.Read(&res)
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("error %v does not wrap ErrParse", err)
				}
				break
			}
			if res.Done.Before(res.Sent) || res.Sent.IsZero() || res.Seq != uint64(i) {
				t.Fatalf("result %d = %+v", i, res)
			}
		}
		r.Warnings()
	})
}

func FuzzVegeta(f *testing.F) {
	fuzzFormat(f, "vegeta", encodeVegeta(f, false, vegetaResults()), "", "\x03\xff\x81")
}

func FuzzVegetaJSON(f *testing.F) {
	fuzzFormat(f, "vegeta-json", encodeVegeta(f, true, vegetaResults()), "{}\n", `{"timestamp": "x"}`)
}

func FuzzHeyCSV(f *testing.F) {
	fuzzFormat(f, "hey-csv", heyHeader+"\n0.0123,0.0010,0.0002,0.0001,0.0100,0.0012,200,0.0005\n", heyHeader, "a,b,c")
}

func FuzzJSONL(f *testing.F) {
	fuzzFormat(f, "jsonl", `{"timestamp": "2026-01-02T15:04:05.5Z", "latency_ms": 12.5, "status": 200}`,
		`{"timestamp": 1767366245.75, "latency_ms": 3000, "status": 0, "error": "timeout"}`, "{", "\n\n")
}
