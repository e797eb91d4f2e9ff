package modelsim

import (
	"container/list"
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// CacheBlockTokens is the tokens of one block of the prefix cache, vLLM's
// default block size.
const CacheBlockTokens = 16

// prefixCache is a server's automatic prefix cache, as vLLM's: the prompt
// is cut into blocks of CacheBlockTokens words, each named by a hash of
// itself and every block before it, and a request whose leading blocks
// were prefilled before (by a request sharing its prefix, or by the turn
// before in the same conversation) prefills only the rest. The least
// recently used blocks are evicted beyond the capacity.
type prefixCache struct {
	seed maphash.Seed
	max  int // blocks held at most

	mu    sync.Mutex // guards order and where
	order *list.List // of uint64 block hashes, the most recently used first
	where map[uint64]*list.Element
}

func newPrefixCache(blocks int) *prefixCache {
	return &prefixCache{seed: maphash.MakeSeed(), max: blocks, order: list.New(), where: map[uint64]*list.Element{}}
}

// take returns how many of words' leading tokens were cached, and caches
// all of words' full blocks. A nil cache caches nothing.
func (c *prefixCache) take(words []string) (cached int) {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var h uint64 // the hash of the blocks so far
	hit := true
	for i := 0; i+CacheBlockTokens <= len(words); i += CacheBlockTokens {
		var mh maphash.Hash
		mh.SetSeed(c.seed)
		_, _ = mh.Write(binary.LittleEndian.AppendUint64(nil, h))
		for _, w := range words[i : i+CacheBlockTokens] {
			_, _ = mh.WriteString(w)
			_ = mh.WriteByte(' ')
		}
		h = mh.Sum64()
		if e, ok := c.where[h]; ok {
			c.order.MoveToFront(e)
			if hit {
				cached += CacheBlockTokens
			}
			continue
		}
		hit = false
		c.where[h] = c.order.PushFront(h)
		if c.order.Len() > c.max {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.where, old.Value.(uint64))
		}
	}
	return cached
}

// promptWords are the words of a checked request's text, in order: the
// messages' contents (strings, or their text parts), the words
// PromptTokens counts. parseRequest has checked the shapes; anything else gives none.
func promptWords(body []byte) []string {
	var top struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	var out []string
	for _, m := range top.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			out = append(out, strings.Fields(s)...)
			continue
		}
		var parts []struct {
			Type, Text string
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			for _, p := range parts {
				if p.Type == "text" {
					out = append(out, strings.Fields(p.Text)...)
				}
			}
		}
	}
	return out
}

// cachedTokens looks req's prompt up in the cache (and caches it): the
// tokens whose prefill it saves. The last token is always computed, as
// vLLM recomputes it to produce the first output token.
func (s *Server) cachedTokens(body []byte, req request) int {
	if s.cache == nil {
		return 0
	}
	return min(s.cache.take(promptWords(body)), req.PromptTokens-1)
}

// prefill is req's prompt work: PromptCost per token not cached.
func (s *Server) prefill(req request) time.Duration {
	return time.Duration(req.PromptTokens-req.CachedTokens) * s.cfg.PromptCost
}
