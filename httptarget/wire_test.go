package httptarget

import (
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// feed gives c the answer in pieces of size bytes, as reads would, and
// returns the step it ended on and the bytes it left unused; at the end
// of the bytes, the connection ends.
func feed(c *codec, res *tare.Result, answer string, size int) (tare.Step, int) {
	p := []byte(answer)
	for len(p) > 0 {
		piece := p[:min(size, len(p))]
		for len(piece) > 0 {
			n, step := c.Parse(piece, res)
			if n < 0 || n > len(piece) {
				panic("Parse used more than it was given")
			}
			piece, p = piece[n:], p[n:]
			if step != tare.StepMore {
				return step, len(p)
			}
			if n == 0 {
				break
			}
		}
	}
	return c.End(nil, false, res), 0
}

// TestCodecReadsAnswers: each answer read whole, whatever the reads' size.
func TestCodecReadsAnswers(t *testing.T) {
	tests := []struct {
		name, method, answer string
		status               int
		bytesIn              int64
		err                  string
		keep                 bool
	}{
		{name: "length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", status: 200, bytesIn: 5, keep: true},
		{name: "empty", answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", status: 200, keep: true},
		{name: "chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n!\r\n0\r\nTrailer: t\r\n\r\n", status: 200, bytesIn: 6, keep: true},
		{name: "until close", answer: "HTTP/1.1 200 OK\r\n\r\nbody to the end", status: 200, bytesIn: 15},
		{name: "close", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", status: 200, bytesIn: 2},
		{name: "http/1.0", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, bytesIn: 2},
		{name: "http/1.0 keep-alive", answer: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok", status: 200, bytesIn: 2, keep: true},
		{name: "continue first", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", status: 201, bytesIn: 1, keep: true},
		{name: "head", method: "HEAD", answer: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", status: 200, keep: true},
		{name: "no content", answer: "HTTP/1.1 204 No Content\r\n\r\n", status: 204, keep: true},
		{name: "server error", answer: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy", status: 503, bytesIn: 4, err: "http 503", keep: true},
		{name: "not http", answer: "SSH-2.0-OpenSSH\r\n\r\n", err: tare.KindOther},
		{name: "bad length", answer: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: tare.KindOther},
		{name: "cut short", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", status: 200, bytesIn: 4, err: tare.KindEOF},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 3, 7, 1 << 16} {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			tg, err := New(Config{URL: "http://127.0.0.1:1/", Method: method})
			if err != nil {
				t.Fatal(err)
			}
			c := tg.Endpoints()[0].NewCodec().(*codec)
			var res tare.Result
			c.Begin(&res)
			if req := string(c.Request(nil)); !strings.HasPrefix(req, method+" / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n") {
				t.Fatalf("%s: request %q", tt.name, req)
			}
			step, left := feed(c, &res, tt.answer, size)
			if step != tare.StepDone || left != 0 || res.Status != tt.status || res.BytesIn != tt.bytesIn || res.Err != tt.err || c.KeepAlive() != tt.keep {
				t.Errorf("%s in reads of %d: step %d, %d left, status %d, %d bytes, err %q, keep-alive %v; want done, 0, %d, %d, %q, %v",
					tt.name, size, step, left, res.Status, res.BytesIn, res.Err, c.KeepAlive(), tt.status, tt.bytesIn, tt.err, tt.keep)
			}
		}
	}
}

// FuzzCodec: any bytes as an answer, in any reads, end the request or ask
// for more, never using more than they were given or panicking.
func FuzzCodec(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 3)
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 1)
	f.Add("HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n", 64)
	f.Add("HTTP/1.1 301 Moved\r\nLocation: http://[::1\r\n\r\n", 5)
	tg, err := New(Config{URL: "http://127.0.0.1:1/", Redirects: 2})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, answer string, size int) {
		if size <= 0 {
			size = 1
		}
		c := tg.Endpoints()[0].NewCodec().(*codec)
		var res tare.Result
		c.Begin(&res)
		c.Request(nil)
		feed(c, &res, answer, size)
	})
}
