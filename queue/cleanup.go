package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// UnlinkKeys deletes keys, which all start with prefix (checked, as
// deleting a foreign key is what cleanup must never do).
func UnlinkKeys(ctx context.Context, rdb redis.UniversalClient, prefix string, keys []string) error {
	const batch = 256
	for i := 0; i < len(keys); i += batch {
		part := keys[i:min(len(keys), i+batch)]
		for _, k := range part {
			if !strings.HasPrefix(k, prefix) {
				return fmt.Errorf("clean up: scan returned foreign key %q", k)
			}
		}
		if err := rdb.Unlink(ctx, part...).Err(); err != nil {
			return fmt.Errorf("clean up: unlink %d keys: %w", len(part), err)
		}
	}
	return nil
}

// RemoveTaresMembers removes tare's jobs (their ids start with JobIDPrefix)
// from the sorted set key, and says what it removed.
func RemoveTaresMembers(ctx context.Context, rdb *redis.Client, key string) ([]string, error) {
	var removed []string
	var cursor uint64
	for {
		members, next, err := rdb.ZScan(ctx, key, cursor, JobIDPrefix+"*", 512).Result()
		if err != nil {
			return removed, fmt.Errorf("scan %q: %w", key, err)
		}
		for i := 0; i < len(members); i += 2 { // member, score, …
			if err := rdb.ZRem(ctx, key, members[i]).Err(); err != nil {
				return removed, err
			}
			removed = append(removed, strconv.Quote(key)+" entry "+members[i])
		}
		if cursor = next; cursor == 0 {
			return removed, nil
		}
	}
}
