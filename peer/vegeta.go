package peer

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/tare-dev/tare"
)

// maxGobMessage bounds one gob message of vegeta's binary output. A gob
// stream says each message's length first and the decoder allocates that
// much before reading it, so a corrupt length would allocate up to 1 GiB;
// a vegeta result is a few hundred bytes plus its response body.
const maxGobMessage = 64 << 20

// vegetaGob reads vegeta attack's binary output with vegeta's own gob
// decoder (the exact Result type it wrote), over a reader that checks each
// message's length first.
type vegetaGob struct {
	dec    vegeta.Decoder
	frames *gobFrames
	n      int
}

func newVegetaGob(r io.Reader, _ Options) decoder {
	fr := &gobFrames{r: bufio.NewReaderSize(r, 64<<10)}
	return &vegetaGob{dec: vegeta.NewDecoder(fr), frames: fr}
}

func (v *vegetaGob) next(res *tare.Result) error {
	var vr vegeta.Result
	where := fmt.Sprintf("record %d", v.n+1)
	if err := v.dec.Decode(&vr); err != nil {
		switch {
		case v.frames.err != nil:
			return parseErr(where, nil, nil, "%v", v.frames.err)
		case errors.Is(err, io.EOF) && v.n == 0 && !v.frames.any:
			return io.EOF // an empty file: no results
		case errors.Is(err, io.EOF) && v.frames.left == 0:
			return io.EOF
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return parseErr(where, nil, err, "the file ends inside a record (was vegeta stopped while writing?)")
		}
		return parseErr(where, nil, err, "not vegeta's binary results (vegeta attack -output; for vegeta encode's JSON use vegeta-json)")
	}
	v.n++
	return fromVegeta(where, &vr, res, nil)
}

// vegetaJSON reads `vegeta encode` JSON, a result object per line, into
// vegeta's own Result type. Lines are read here rather than by vegeta's
// JSON decoder so that an error can name and quote the line.
type vegetaJSON struct {
	lines lineReader
}

func newVegetaJSON(r io.Reader, _ Options) decoder {
	return &vegetaJSON{lines: newLineReader(r)}
}

func (v *vegetaJSON) next(res *tare.Result) error {
	line, where, err := v.lines.next()
	if err != nil {
		return err
	}
	var vr vegeta.Result
	if err := json.Unmarshal(line, &vr); err != nil {
		return parseErr(where, line, err, "not a vegeta encode JSON result")
	}
	return fromVegeta(where, &vr, res, line)
}

// fromVegeta fills res from vr, or says what is wrong with it.
func fromVegeta(where string, vr *vegeta.Result, res *tare.Result, input []byte) error {
	switch {
	case vr.Timestamp.IsZero():
		return parseErr(where, input, nil, "no timestamp")
	case vr.Latency < 0:
		return parseErr(where, input, nil, "negative latency %s", vr.Latency)
	}
	res.Scheduled, res.Sent = vr.Timestamp, vr.Timestamp
	res.Done = vr.Timestamp.Add(vr.Latency)
	res.Status = int(vr.Code)
	res.Err = errKind(res.Status, vr.Error)
	res.BytesIn, res.BytesOut = clampInt64(vr.BytesIn), clampInt64(vr.BytesOut)
	return nil
}

func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// gobFrames passes a gob stream through, checking the length of each
// message before the decoder sees it (encoding/gob: a message is its byte
// count, an unsigned integer, then that many bytes; an unsigned integer is
// one byte below 128, else a byte holding the negated count of the
// big-endian bytes that follow).
type gobFrames struct {
	r    *bufio.Reader
	pend []byte // the current message's header, not yet passed on
	left uint64 // bytes of the current message not yet passed on
	any  bool   // some byte was read
	err  error  // a message too long
}

func (g *gobFrames) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(g.pend) == 0 && g.left == 0 {
		b, err := g.r.ReadByte()
		if err != nil {
			return 0, err
		}
		g.any = true
		hdr := []byte{b}
		n := uint64(b)
		if b >= 0x80 {
			k := int(-int8(b))
			if k > 8 {
				g.err = fmt.Errorf("a gob message length of %d bytes: not a gob stream", k)
				return 0, g.err
			}
			n = 0
			for range k {
				c, err := g.r.ReadByte()
				if err != nil {
					return 0, io.ErrUnexpectedEOF
				}
				hdr = append(hdr, c)
				n = n<<8 | uint64(c)
			}
		}
		if n > maxGobMessage {
			g.err = fmt.Errorf("a gob message of %s bytes, more than the %d a vegeta result can take: not vegeta's binary results", strconv.FormatUint(n, 10), maxGobMessage)
			return 0, g.err
		}
		g.pend, g.left = hdr, n
	}
	if len(g.pend) > 0 {
		n := copy(p, g.pend)
		g.pend = g.pend[n:]
		return n, nil
	}
	if uint64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, err := g.r.Read(p)
	g.left -= uint64(n)
	if err == io.EOF && g.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
