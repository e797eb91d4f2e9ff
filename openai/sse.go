package openai

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrSSE is wrapped by the scanner's errors: the body is not a readable
// server-sent event stream.
var ErrSSE = errors.New("bad event stream")

// maxLine bounds one line of the stream, so a server that never sends a
// newline cannot make the client buffer without limit.
const maxLine = 1 << 20

// event is one server-sent event: its type (the "event:" field, "" when
// absent) and its data lines joined with "\n".
type event struct {
	Name string
	Data string
}

// sseScanner reads server-sent events from a stream, one at a time, after
// the WHATWG definition (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
//
//	: comment           ignored (servers send ": keep-alive")
//	event: name         sets the event type
//	data: text          appends a line of data ("data:text" too: one leading space is dropped)
//	id: / retry:        ignored: the client never reconnects
//	(blank line)        dispatches the event, if it has data
//
// Lines end with "\n" or "\r\n". Departing from the standard, which drops
// an unterminated event at the end of the stream, a final event whose last
// line was complete is still dispatched, since some servers end with
// "data: [DONE]\n" and close; a line cut before its newline is an error.
type sseScanner struct {
	r   *bufio.Reader
	ev  event
	err error // first error; io.EOF once the stream ended cleanly

	name    string
	data    bytes.Buffer
	hasData bool // a data field was seen since the last dispatch (data may be "")
	first   bool // the next line is the stream's first: strip a byte order mark
}

func newSSEScanner(r io.Reader) *sseScanner {
	return &sseScanner{r: bufio.NewReaderSize(r, 16<<10), first: true}
}

// Next advances to the next event and reports whether there is one. It
// returns false at the end of the stream or on an error; Err tells which.
func (s *sseScanner) Next() bool {
	if s.err != nil {
		return false
	}
	for {
		line, err := s.readLine()
		if err != nil {
			s.err = err
			if err == io.EOF && s.hasData {
				s.dispatch()
				return true
			}
			return false
		}
		if len(line) == 0 {
			if s.hasData {
				s.dispatch()
				return true
			}
			s.name = ""
			continue
		}
		s.field(line)
	}
}

// Event is the event Next found.
func (s *sseScanner) Event() event { return s.ev }

// Err is nil when the stream ended cleanly (at a line boundary), and the
// read error or an ErrSSE otherwise.
func (s *sseScanner) Err() error {
	if s.err == io.EOF {
		return nil
	}
	return s.err
}

func (s *sseScanner) dispatch() {
	s.ev = event{Name: s.name, Data: s.data.String()}
	s.name, s.hasData = "", false
	s.data.Reset()
}

// field applies one non-blank line to the event being built.
func (s *sseScanner) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	switch string(name) {
	case "data":
		if s.hasData {
			s.data.WriteByte('\n')
		}
		s.data.Write(value)
		s.hasData = true
	case "event":
		s.name = string(value)
	}
}

// readLine returns the next line without its terminator. It returns io.EOF
// only at a line boundary; a stream that ends inside a line, or a line
// longer than maxLine, is an ErrSSE; other read errors come back as they
// are, so the caller can tell a reset from a timeout.
func (s *sseScanner) readLine() ([]byte, error) {
	var long []byte // the line so far, when it outgrew the reader's buffer
	for {
		frag, err := s.r.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if len(long)+len(frag) > maxLine {
				return nil, fmt.Errorf("%w: line longer than %d bytes", ErrSSE, maxLine)
			}
			long = append(long, frag...)
			continue
		case err == io.EOF && len(long)+len(frag) > 0:
			return nil, fmt.Errorf("%w: stream ended inside a line: %w", ErrSSE, io.ErrUnexpectedEOF)
		case err != nil:
			return nil, err
		}
		line := frag
		if long != nil {
			line = append(long, frag...)
		}
		if len(line) > maxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrSSE, maxLine)
		}
		line = bytes.TrimRight(line[:len(line)-1], "\r")
		if s.first {
			s.first = false
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		return line, nil
	}
}
