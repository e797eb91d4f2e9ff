// Command tinymodel writes a tiny llama-architecture model with random
// weights as a GGUF file, for an inference server to load in seconds on a
// CPU: 2 layers, hidden size 64, the real Llama 3 tokenizer (the one in
// Ollama's tokenizer testdata, given by -tokenizer).
//
// Random weights may pick any token next, the end of a turn included. So
// that every reply is exactly as long as the request's max_tokens, and
// every token is one content chunk of a stream, the output layer is
// biased against the tokens that would end a reply or be held back: the
// special tokens, and the tokens whose text is not printable UTF-8, is
// blank, or holds a '<' (which a server holds back while it may still
// become a stop sequence such as "<|eot_id|>"). Every embedding carries a
// constant feature, and those tokens' output rows weigh it with a large
// negative weight, so their logits stay far below every other token's.
//
//	go run . -tokenizer $OLLAMA_SRC/tokenizer/testdata/llama3.2 -o tiny.gguf
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ollama/ollama/fs/ggml"
)

// The model's shape: small enough to write in seconds and to generate
// about a hundred tokens a second on one core.
const (
	layers      = 2
	hidden      = 64
	heads       = 4
	kvHeads     = 2
	feedForward = 128
	contextLen  = 4096

	feature = 8    // the constant feature in dimension 0 of every embedding
	banned  = -100 // a banned token's output weight on that feature
	spread  = 0.2  // the spread of the other output weights: the logits'
)

// Llama 3's special tokens follow its 128,000 text tokens.
const (
	firstSpecial = 128000
	specials     = 256
	bos          = 128000 // <|begin_of_text|>
	eos          = 128009 // <|eot_id|>, the end of an instruct turn
)

func main() {
	dir := flag.String("tokenizer", "", "directory with encoder.json and vocab.bpe (Ollama's tokenizer/testdata/llama3.2)")
	out := flag.String("o", "tiny.gguf", "the GGUF file to write")
	seed := flag.Uint64("seed", 1, "seed of the random weights")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "tinymodel: -tokenizer is required")
		os.Exit(2)
	}
	if err := write(*dir, *out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}

func write(dir, out string, seed uint64) error {
	tokens, err := readVocab(filepath.Join(dir, "encoder.json"))
	if err != nil {
		return err
	}
	merges, err := readMerges(filepath.Join(dir, "vocab.bpe"))
	if err != nil {
		return err
	}
	types := make([]int32, len(tokens))
	ban := make([]bool, len(tokens))
	for id, tok := range tokens {
		types[id] = 1 // normal
		if id >= firstSpecial {
			types[id] = 3 // control
		}
		ban[id] = id >= firstSpecial || !printable(tok)
	}

	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "tiny",
		"general.file_type":                      uint32(0), // all float32
		"llama.block_count":                      uint32(layers),
		"llama.context_length":                   uint32(contextLen),
		"llama.embedding_length":                 uint32(hidden),
		"llama.feed_forward_length":              uint32(feedForward),
		"llama.attention.head_count":             uint32(heads),
		"llama.attention.head_count_kv":          uint32(kvHeads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.freq_base":                   float32(500000),
		"llama.rope.dimension_count":             uint32(hidden / heads),
		"llama.vocab_size":                       uint32(len(tokens)),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "llama-bpe",
		"tokenizer.ggml.tokens":                  tokens,
		"tokenizer.ggml.token_type":              types,
		"tokenizer.ggml.merges":                  merges,
		"tokenizer.ggml.bos_token_id":            uint32(bos),
		"tokenizer.ggml.eos_token_id":            uint32(eos),
		"tokenizer.ggml.add_bos_token":           true,
	}

	rng := rand.New(rand.NewPCG(seed, 0x7a7e))
	normal := func(n int, sigma float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * sigma
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	vocab := len(tokens)
	embed := normal(vocab*hidden, 1)
	output := normal(vocab*hidden, spread)
	for id := range vocab {
		embed[id*hidden] = feature
		output[id*hidden] = 0
		if ban[id] {
			output[id*hidden] = banned
		}
	}

	// Shapes are GGML's: the row length first.
	headDim := hidden / heads
	ts := []*ggml.Tensor{
		tensor("token_embd.weight", embed, hidden, vocab),
		tensor("output_norm.weight", ones(hidden), hidden),
		tensor("output.weight", output, hidden, vocab),
	}
	for i := range layers {
		blk := func(name string) string { return fmt.Sprintf("blk.%d.%s.weight", i, name) }
		ts = append(ts,
			tensor(blk("attn_norm"), ones(hidden), hidden),
			tensor(blk("attn_q"), normal(hidden*hidden, 0.02), hidden, hidden),
			tensor(blk("attn_k"), normal(hidden*kvHeads*headDim, 0.02), hidden, kvHeads*headDim),
			tensor(blk("attn_v"), normal(hidden*kvHeads*headDim, 0.02), hidden, kvHeads*headDim),
			tensor(blk("attn_output"), normal(hidden*hidden, 0.02), hidden, hidden),
			tensor(blk("ffn_norm"), ones(hidden), hidden),
			tensor(blk("ffn_gate"), normal(hidden*feedForward, 0.02), hidden, feedForward),
			tensor(blk("ffn_up"), normal(hidden*feedForward, 0.02), hidden, feedForward),
			tensor(blk("ffn_down"), normal(feedForward*hidden, 0.02), feedForward, hidden),
		)
	}

	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	if err := ggml.WriteGGUF(f, kv, ts); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", out, err)
	}
	n := 0
	for _, b := range ban {
		if b {
			n++
		}
	}
	fmt.Fprintf(os.Stderr, "tinymodel: wrote %s: %d tokens (%d never generated), %d layers, hidden %d\n", out, vocab, n, layers, hidden)
	return nil
}

// tensor is a float32 tensor of the given GGML shape.
func tensor(name string, data []float32, shape ...int) *ggml.Tensor {
	s := make([]uint64, len(shape))
	for i, d := range shape {
		s[i] = uint64(d)
	}
	return &ggml.Tensor{Name: name, Kind: 0, Shape: s, WriterTo: floats(data)}
}

// floats writes itself as little-endian float32s, as GGUF stores them.
type floats []float32

func (v floats) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := binary.Write(bw, binary.LittleEndian, []float32(v)); err != nil {
		return 0, err
	}
	return int64(4 * len(v)), bw.Flush()
}

// readVocab reads the text tokens (encoder.json, token → id) and appends
// Llama 3's special tokens after them.
func readVocab(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read vocabulary: %w", err)
	}
	ids := map[string]int{}
	if err := json.Unmarshal(b, &ids); err != nil {
		return nil, fmt.Errorf("parse vocabulary %s: %w", path, err)
	}
	if len(ids) != firstSpecial {
		return nil, fmt.Errorf("vocabulary %s: %d tokens, want Llama 3's %d", path, len(ids), firstSpecial)
	}
	tokens := make([]string, firstSpecial+specials)
	for tok, id := range ids {
		if id < 0 || id >= firstSpecial || tokens[id] != "" {
			return nil, fmt.Errorf("vocabulary %s: token %q has id %d, outside 0-%d or taken", path, tok, id, firstSpecial-1)
		}
		tokens[id] = tok
	}
	named := map[int]string{
		128000: "<|begin_of_text|>", 128001: "<|end_of_text|>",
		128004: "<|finetune_right_pad_id|>",
		128006: "<|start_header_id|>", 128007: "<|end_header_id|>",
		128008: "<|eom_id|>", 128009: "<|eot_id|>", 128010: "<|python_tag|>",
	}
	reserved := 0
	for id := firstSpecial; id < firstSpecial+specials; id++ {
		if name, ok := named[id]; ok {
			tokens[id] = name
			continue
		}
		tokens[id] = fmt.Sprintf("<|reserved_special_token_%d|>", reserved)
		reserved++
	}
	return tokens, nil
}

// readMerges reads the BPE merges, one "a b" a line, past the "#version"
// header.
func readMerges(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read merges: %w", err)
	}
	defer f.Close()
	var merges []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			merges = append(merges, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read merges %s: %w", path, err)
	}
	return merges, nil
}

// printable reports whether a byte-level BPE token decodes to text a
// server streams as it comes: valid UTF-8, printable, not blank, no '<'.
func printable(tok string) bool {
	var text []byte
	for _, r := range tok {
		b, ok := byteOf[r]
		if !ok {
			return false
		}
		text = append(text, b)
	}
	s := string(text)
	if !utf8.ValidString(s) || strings.TrimSpace(s) == "" || strings.ContainsRune(s, '<') {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// byteOf inverts GPT-2's byte-level alphabet: the printable bytes stand
// for themselves, and the 68 others for the runes from U+0100 up, in order.
var byteOf = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	next := rune(0x100)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
			m[rune(b)] = byte(b)
			continue
		}
		m[next] = byte(b)
		next++
	}
	return m
}()
