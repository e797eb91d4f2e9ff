package session

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestEveryThresholdIsAFlagAndAPlanKey: each threshold of the verdict
// (every field of judge.Thresholds) is set by a live flag and a plan key
// under thresholds., as the README promises.
func TestEveryThresholdIsAFlagAndAPlanKey(t *testing.T) {
	var j JudgeSpec
	fields := j.Fields()
	th := reflect.ValueOf(&j.Thresholds).Elem()
	for i := range th.NumField() {
		name, ptr := th.Type().Field(i).Name, th.Field(i).Addr().Interface()
		found := false
		for _, f := range fields {
			if f.Retired == "" && reflect.ValueOf(f.Value).Pointer() == reflect.ValueOf(ptr).Pointer() {
				found = true
				if f.Flag == "" || !strings.HasPrefix(f.Key, "thresholds.") {
					t.Errorf("threshold %s: flag %q, plan key %q; want both, the key under thresholds.", name, f.Flag, f.Key)
				}
			}
		}
		if !found {
			t.Errorf("threshold %s has no flag nor plan key", name)
		}
	}
}

// TestLatencyTicksShare: the share of ticks that fires the latency signal
// is set by its plan key (and so its flag, the same field), and a share
// outside 0–100 is refused naming the flag.
func TestLatencyTicksShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("url: http://127.0.0.1:9/\nthresholds: {latency-ticks-share: 20}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Spec.Judge.Thresholds.LatencyShare; got != 20 {
		t.Errorf("thresholds.latency-ticks-share: 20 set LatencyShare %g", got)
	}
	j := JudgeSpec{Thresholds: pl.Spec.Judge.Thresholds}
	j.Thresholds.LatencyShare = 150
	if _, err := j.Judging(); err == nil || !strings.Contains(err.Error(), "--latency-ticks-share must be a percentage from 0 to 100; got 150") || tare.ErrorCode(err) != tare.EINVALID {
		t.Errorf("a share of 150: error %v", err)
	}
}
