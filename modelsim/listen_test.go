package modelsim

import (
	"testing"

	"github.com/tare-dev/tare"
)

func TestCheckListen(t *testing.T) {
	tests := []struct {
		name        string
		addr        string
		allowRemote bool
		wantErr     string
	}{
		{name: "default", addr: DefaultListen},
		{name: "any loopback v4", addr: "127.3.2.1:9000"},
		{name: "loopback v6", addr: "[::1]:8089"},
		{name: "mapped loopback", addr: "[::ffff:127.0.0.1]:8089"},
		{name: "localhost", addr: "LocalHost:0"},
		{name: "all interfaces refused", addr: ":8089", wantErr: "not loopback"},
		{name: "unspecified refused", addr: "0.0.0.0:8089", wantErr: "not loopback"},
		{name: "private refused", addr: "10.0.0.5:8089", wantErr: "not loopback"},
		{name: "name refused", addr: "model.internal:8089", wantErr: "not loopback"},
		{name: "remote allowed", addr: "0.0.0.0:8089", allowRemote: true},
		{name: "all interfaces allowed", addr: ":8089", allowRemote: true},
		{name: "no port", addr: "127.0.0.1", wantErr: "want host:port"},
		{name: "bad port", addr: "127.0.0.1:http", wantErr: `port "http"`},
		{name: "port too big", addr: "127.0.0.1:65536", wantErr: `port "65536"`},
		{name: "bad port even when allowed", addr: "0.0.0.0:-1", allowRemote: true, wantErr: `port "-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckListen(tt.addr, tt.allowRemote)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckListen(%q, %v) = %v, want nil", tt.addr, tt.allowRemote, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckListen(%q, %v) = nil, want an error containing %q", tt.addr, tt.allowRemote, tt.wantErr)
			}
			if code := tare.ErrorCode(err); code != tare.EINVALID {
				t.Errorf("error code %q, want %q", code, tare.EINVALID)
			}
			if !contains(err.Error(), tt.wantErr) || !contains(err.Error(), tt.addr) {
				t.Errorf("error %q, want it to name %q and contain %q", err, tt.addr, tt.wantErr)
			}
		})
	}
}

func FuzzCheckListen(f *testing.F) {
	for _, s := range []string{DefaultListen, "[::1]:0", ":80", "localhost:1", "1.2.3.4:5", "x", "[::1%lo]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		strict := CheckListen(addr, false)
		loose := CheckListen(addr, true)
		if strict == nil && loose != nil {
			t.Fatalf("%q passes the loopback check but fails when remote is allowed: %v", addr, loose)
		}
		if strict != nil && tare.ErrorCode(strict) != tare.EINVALID {
			t.Fatalf("%q: error %v is not EINVALID", addr, strict)
		}
	})
}
