package load

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/net/http2/hpack"
)

// HTTP/2's framing (RFC 9113, section 4 and 6), as much of it as a
// client that sends requests and reads their answers needs. Frames are
// appended to a buffer, so that the frames of many streams leave in one
// write; header blocks are HPACK (RFC 7541) through x/net's hpack.

// h2Preface opens every connection: the client's magic string (RFC 9113,
// 3.4); the client's SETTINGS follow it.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Frame types.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9
)

// Frame flags.
const (
	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// Settings.
const (
	settingHeaderTableSize      = 0x1
	settingEnablePush           = 0x2
	settingMaxConcurrentStreams = 0x3
	settingInitialWindowSize    = 0x4
	settingMaxFrameSize         = 0x5
)

// Error codes.
const (
	errCodeNo            = 0x0
	errCodeProtocol      = 0x1
	errCodeFlowControl   = 0x3
	errCodeRefusedStream = 0x7
	errCodeCancel        = 0x8
)

const (
	frameHeaderLen  = 9
	defaultWindow   = 65535   // every window's size until SETTINGS say otherwise
	defaultMaxFrame = 1 << 14 // SETTINGS_MAX_FRAME_SIZE's initial value
	maxWindow       = 1<<31 - 1
)

// frameHeader is the nine bytes in front of every frame.
type frameHeader struct {
	length int
	typ    byte
	flags  byte
	stream uint32
}

func parseFrameHeader(p []byte) frameHeader {
	return frameHeader{
		length: int(p[0])<<16 | int(p[1])<<8 | int(p[2]),
		typ:    p[3],
		flags:  p[4],
		stream: binary.BigEndian.Uint32(p[5:9]) & (1<<31 - 1),
	}
}

func appendFrameHeader(b []byte, length int, typ, flags byte, stream uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream))
}

// appendSettings appends a SETTINGS frame of id, value pairs.
func appendSettings(b []byte, pairs ...uint32) []byte {
	b = appendFrameHeader(b, 3*len(pairs), frameSettings, 0, 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		b = binary.BigEndian.AppendUint16(b, uint16(pairs[i]))
		b = binary.BigEndian.AppendUint32(b, pairs[i+1])
	}
	return b
}

func appendWindowUpdate(b []byte, stream uint32, n uint32) []byte {
	b = appendFrameHeader(b, 4, frameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(b, n)
}

func appendRSTStream(b []byte, stream uint32, code uint32) []byte {
	b = appendFrameHeader(b, 4, frameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(b, code)
}

// appendHeaders appends block as one HEADERS frame and as many
// CONTINUATION frames as maxFrame needs.
func appendHeaders(b []byte, stream uint32, block []byte, endStream bool, maxFrame int) []byte {
	var flags byte
	if endStream {
		flags = flagEndStream
	}
	typ := byte(frameHeaders)
	for {
		n := min(len(block), maxFrame)
		f := flags
		if n == len(block) {
			f |= flagEndHeaders
		}
		b = appendFrameHeader(b, n, typ, f, stream)
		b = append(b, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return b
		}
		typ, flags = frameContinuation, 0
	}
}

// appendData appends p as DATA frames of maxFrame bytes at most, the last
// one ending the stream when end is set.
func appendData(b []byte, stream uint32, p []byte, end bool, maxFrame int) []byte {
	for {
		n := min(len(p), maxFrame)
		var f byte
		if end && n == len(p) {
			f = flagEndStream
		}
		b = appendFrameHeader(b, n, frameData, f, stream)
		b = append(b, p[:n]...)
		p = p[n:]
		if len(p) == 0 {
			return b
		}
	}
}

// headerBlock is a request's header block, encoded once for every stream
// of every connection: with a dynamic table of size 0 (a size update
// opens it) no field is indexed, so the block does not depend on the
// blocks before it and costs no encoding per request.
func headerBlock(method, scheme, authority, path string, fields [][2]string, contentLength int) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(0)
	enc.SetMaxDynamicTableSize(0)
	write := func(name, value string) { enc.WriteField(hpack.HeaderField{Name: name, Value: value}) }
	write(":method", method)
	write(":scheme", scheme)
	write(":authority", authority)
	write(":path", path)
	for _, f := range fields {
		write(f[0], f[1])
	}
	if contentLength > 0 {
		write("content-length", itoa(contentLength))
	}
	return buf.Bytes()
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// framePayload is a frame's payload without its padding; false when the
// padding is longer than the frame (a connection error).
func framePayload(h frameHeader, p []byte) ([]byte, bool) {
	if h.flags&flagPadded == 0 || (h.typ != frameData && h.typ != frameHeaders) {
		return p, true
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, false
	}
	return p[1 : len(p)-int(p[0])], true
}
