package load

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestAppendHeaders: a header block longer than the peer's frame size
// goes as HEADERS then CONTINUATION frames, END_HEADERS on the last
// only, END_STREAM on the HEADERS; the frames put together are the block.
func TestAppendHeaders(t *testing.T) {
	block := bytes.Repeat([]byte("x"), 25)
	for _, tt := range []struct {
		name      string
		maxFrame  int
		endStream bool
		want      []frameHeader
	}{
		{"one frame", 100, true, []frameHeader{{25, frameHeaders, flagEndStream | flagEndHeaders, 3}}},
		{"three frames", 10, false, []frameHeader{{10, frameHeaders, 0, 3}, {10, frameContinuation, 0, 3}, {5, frameContinuation, flagEndHeaders, 3}}},
		{"two, ending the stream", 20, true, []frameHeader{{20, frameHeaders, flagEndStream, 3}, {5, frameContinuation, flagEndHeaders, 3}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := appendHeaders(nil, 3, block, tt.endStream, tt.maxFrame)
			var got []frameHeader
			var joined []byte
			for len(b) > 0 {
				fh := parseFrameHeader(b)
				got = append(got, fh)
				joined = append(joined, b[frameHeaderLen:frameHeaderLen+fh.length]...)
				b = b[frameHeaderLen+fh.length:]
			}
			if !slices.Equal(got, tt.want) || !bytes.Equal(joined, block) {
				t.Errorf("frames %+v carrying %q; want %+v carrying the block", got, joined, tt.want)
			}
		})
	}
}

// TestFramePayload: padding is taken off DATA and HEADERS, and padding
// longer than its frame is refused.
func TestFramePayload(t *testing.T) {
	for _, tt := range []struct {
		name string
		fh   frameHeader
		p    []byte
		want string
		ok   bool
	}{
		{"unpadded", frameHeader{typ: frameData}, []byte("abc"), "abc", true},
		{"padded", frameHeader{typ: frameData, flags: flagPadded}, []byte("\x02abcPP"), "abc", true},
		{"padded headers", frameHeader{typ: frameHeaders, flags: flagPadded}, []byte("\x01hP"), "h", true},
		{"padding too long", frameHeader{typ: frameData, flags: flagPadded}, []byte("\x05ab"), "", false},
		{"empty padded", frameHeader{typ: frameData, flags: flagPadded}, nil, "", false},
	} {
		got, ok := framePayload(tt.fh, tt.p)
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("%s: %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestHeaderBlock: the block decodes to the request's fields, and twice
// in a row on one decoder to the same: it indexes nothing, so one block
// serves every stream of every connection.
func TestHeaderBlock(t *testing.T) {
	block := headerBlock("POST", "https", "example.test:8443", "/a?b=1", [][2]string{{"user-agent", "tare"}, {"x-id", "7"}}, 12)
	want := "[:method POST :scheme https :authority example.test:8443 :path /a?b=1 user-agent tare x-id 7 content-length 12]"
	dec := hpack.NewDecoder(4096, nil)
	for i := range 2 {
		fields, err := dec.DecodeFull(block)
		if err != nil {
			t.Fatalf("decode %d: %v", i, err)
		}
		var got []string
		for _, f := range fields {
			got = append(got, f.Name, f.Value)
		}
		if s := "[" + strings.Join(got, " ") + "]"; s != want {
			t.Errorf("decode %d: %s; want %s", i, s, want)
		}
	}
}
