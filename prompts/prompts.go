// Package prompts feeds a model endpoint or a job queue the prompts users
// send: a dataset read from a file, or synthetic prompts of a given input
// length and output budget, each arrival taking its own.
//
// A dataset is JSON lines, each {"prompt": "..."} or {"messages": [{"role",
// "content"}]} with an optional "max_tokens", or a ShareGPT-style
// conversation file (a JSON array, or JSON lines, of {"conversations":
// [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}) whose
// first human turn is the prompt and, when asked, the reply's length the
// output budget, as vLLM's and guidellm's benchmarks read them.
//
// Lengths are counted in words: a synthetic prompt of 512 tokens is 512
// short common English words, which most tokenizers make one token each
// and tare's simulated model counts one each. The server's usage says
// what it really counted, and that is what the summary reports.
//
// Assignment is a pure function of the arrival's number (and the seed),
// so the same run sends the same prompts whatever order workers take
// arrivals in: a dataset in file order, round and round; synthetic lengths
// drawn from N(mean, spread²), at least 1.
package prompts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
)

// MaxFileSize bounds a dataset read into memory.
const MaxFileSize = 256 << 20

// The accepted forms, for messages.
const (
	datasetForm = `JSON lines like {"prompt": "...", "max_tokens": 128} or {"messages": [{"role": "user", "content": "..."}]}, or ShareGPT conversations like [{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}]}]`
	lengthsForm = "must be MEAN or MEAN,SPREAD in tokens, like 512,128"
)

// Read reads a prompt dataset. With replyBudget, a ShareGPT conversation's
// budget is the length of the reply to its first human turn. A bad file
// is a *tare.Error with code tare.EINVALID (tare.ENOTFOUND when it does not
// exist) naming the file, the line or item, and the accepted form.
func Read(path string, replyBudget bool) ([]tare.Prompt, error) {
	return readWith(path, replyBudget, Parse)
}

// readWith opens the prompts file at path and parses it with parse.
func readWith[T any](path string, replyBudget bool, parse func(io.Reader, string, bool) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, tare.Errorf(tare.ENOTFOUND, "prompts file %q does not exist", path)
		}
		return nil, tare.Errorf(tare.EINVALID, "cannot read prompts file %q: %w", path, err)
	}
	defer f.Close()
	return parse(f, path, replyBudget)
}

// Parse reads a dataset from r; file names it in messages.
func Parse(r io.Reader, file string, replyBudget bool) ([]tare.Prompt, error) {
	var out []tare.Prompt
	err := eachItem(r, file, func(raw []byte) error {
		p, err := parseItem(raw, replyBudget)
		out = append(out, p)
		return err
	})
	return out, err
}

// eachItem calls parse on every item of a dataset, a JSON array or JSON
// lines, and wraps its error with the item's place; a file with no item is
// an error.
func eachItem(r io.Reader, file string, parse func(raw []byte) error) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return tare.Errorf(tare.EINVALID, "cannot read prompts file %q: %w", file, err)
	}
	if len(data) > MaxFileSize {
		return tare.Errorf(tare.EINVALID, "prompts file %q is larger than %d MiB", file, MaxFileSize>>20)
	}
	n := 0
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(t, &items); err != nil {
			return bad(file, "", "not a JSON array of conversations (%s)", jsonMessage(err))
		}
		for i, raw := range items {
			if err := parse(raw); err != nil {
				return bad(file, fmt.Sprintf("item %d", i+1), "%s", err)
			}
			n++
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), MaxFileSize)
		for line := 1; sc.Scan(); line++ {
			raw := bytes.TrimSpace(sc.Bytes())
			if len(raw) == 0 {
				continue
			}
			if err := parse(raw); err != nil {
				return bad(file, "line "+strconv.Itoa(line), "%s", err)
			}
			n++
		}
		if err := sc.Err(); err != nil {
			return bad(file, "", "%s", err)
		}
	}
	if n == 0 {
		return bad(file, "", "no prompt in it")
	}
	return nil
}

func bad(file, where, format string, args ...any) error {
	at := ""
	if where != "" {
		at = ", " + where
	}
	return tare.Errorf(tare.EINVALID, "prompts file %q%s: %s; the file must be %s", file, at, fmt.Sprintf(format, args...), datasetForm)
}

// item is one entry of a dataset, in any of the accepted forms.
type item struct {
	Prompt        *string        `json:"prompt"`
	Messages      []tare.Message `json:"messages"`
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
	MaxTokens *int `json:"max_tokens"`
}

func parseItem(raw []byte, replyBudget bool) (tare.Prompt, error) {
	var it item
	if err := json.Unmarshal(raw, &it); err != nil {
		return tare.Prompt{}, fmt.Errorf("not a JSON object with prompt, messages or conversations (%s)", jsonMessage(err))
	}
	var p tare.Prompt
	switch {
	case it.Prompt != nil:
		if strings.TrimSpace(*it.Prompt) == "" {
			return p, fmt.Errorf("an empty prompt")
		}
		p.Messages = []tare.Message{{Role: "user", Content: *it.Prompt}}
	case len(it.Messages) > 0:
		for i, m := range it.Messages {
			if m.Role == "" {
				return p, fmt.Errorf("message %d has no role", i+1)
			}
		}
		p.Messages = it.Messages
	case len(it.Conversations) > 0:
		for i, turn := range it.Conversations {
			if turn.From != "human" && turn.From != "user" {
				continue
			}
			p.Messages = []tare.Message{{Role: "user", Content: turn.Value}}
			if replyBudget && i+1 < len(it.Conversations) {
				p.MaxTokens = max(len(strings.Fields(it.Conversations[i+1].Value)), 1)
			}
			break
		}
		if p.Messages == nil {
			return p, fmt.Errorf("a conversation with no human turn")
		}
	default:
		return p, fmt.Errorf("none of prompt, messages or conversations")
	}
	if it.MaxTokens != nil {
		if *it.MaxTokens < 1 {
			return p, fmt.Errorf("max_tokens must be 1 or more; got %d", *it.MaxTokens)
		}
		p.MaxTokens = *it.MaxTokens
	}
	return p, nil
}

func jsonMessage(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }

// Lengths is a length in tokens drawn per arrival: a mean and the
// standard deviation around it (0: always the mean).
type Lengths struct {
	Mean, Spread int
}

// ParseLengths reads "MEAN" or "MEAN,SPREAD". Bad input is a *tare.Error
// with code tare.EINVALID whose message reads well after the flag's name.
func ParseLengths(s string) (Lengths, error) {
	ms, ss, hasSpread := strings.Cut(strings.TrimSpace(s), ",")
	mean, err1 := strconv.Atoi(strings.TrimSpace(ms))
	spread, err2 := 0, error(nil)
	if hasSpread {
		spread, err2 = strconv.Atoi(strings.TrimSpace(ss))
	}
	if err1 != nil || err2 != nil || mean < 1 || spread < 0 {
		return Lengths{}, tare.Errorf(tare.EINVALID, "%s; got %q", lengthsForm, s)
	}
	return Lengths{Mean: mean, Spread: spread}, nil
}

// String is the form ParseLengths reads.
func (l Lengths) String() string {
	if l.Spread == 0 {
		return strconv.Itoa(l.Mean)
	}
	return fmt.Sprintf("%d,%d", l.Mean, l.Spread)
}

// draw is arrival seq's length from stream, at least 1.
func (l Lengths) draw(seed, seq, stream uint64) int {
	if l.Spread == 0 {
		return l.Mean
	}
	u1 := uniform(seed, seq, stream)
	u2 := uniform(seed, seq, stream+1)
	z := math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
	return max(int(math.Round(float64(l.Mean)+float64(l.Spread)*z)), 1)
}

// uniform is in [0, 1), a function of its inputs alone.
func uniform(seed, seq, stream uint64) float64 {
	return float64(mix64(seed^mix64(seq^mix64(stream)))>>11) * 0x1p-53
}

// mix64 is SplitMix64's finaliser: nearby inputs, unrelated outputs.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Streams of draws, so the input and output lengths are independent.
const (
	streamInput  = 1
	streamOutput = 3
	streamWords  = 5
	streamBlocks = 7  // a trace's prefix blocks
	streamGroups = 9  // the prefix group of a synthetic prompt
	streamThink  = 11 // think times, one stream per turn above it
)

// Dataset gives arrival seq prompt seq mod len(ps); output, when its Mean
// is set, draws the budget of the prompts that have none.
func Dataset(ps []tare.Prompt, output Lengths, seed uint64) tare.Prompts {
	return func(seq uint64) tare.Prompt {
		p := ps[seq%uint64(len(ps))]
		if p.MaxTokens == 0 && output.Mean > 0 {
			p.MaxTokens = output.draw(seed, seq, streamOutput)
		}
		return p
	}
}

// Synthetic gives each arrival a prompt of input words and, when output's
// Mean is set, a budget of output tokens. An input Mean of 0 leaves the
// messages empty: the target's own prompt, with the drawn budget.
func Synthetic(input, output Lengths, seed uint64) tare.Prompts {
	return func(seq uint64) tare.Prompt {
		var p tare.Prompt
		if output.Mean > 0 {
			p.MaxTokens = output.draw(seed, seq, streamOutput)
		}
		if input.Mean == 0 {
			return p
		}
		n := input.draw(seed, seq, streamInput)
		var b strings.Builder
		b.Grow(n * 6)
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			w := mix64(seed ^ mix64(seq) ^ mix64(uint64(i)+streamWords))
			b.WriteString(words[w%uint64(len(words))])
		}
		p.Messages = []tare.Message{{Role: "user", Content: b.String()}}
		return p
	}
}

// words are short common English words, one token each in the usual
// tokenizers.
var words = strings.Fields(`the of and to in is it you that he was for on are
with as his they be at one have this from or had by word but what some we can
out other were all there when up use your how said an each she which do their
time if will way about many then them write would like so these her long make
thing see him two has look more day could go come did number sound no most
people my over know water than call first who may down side been now find`)
