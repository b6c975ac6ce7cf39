package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// ackHistogram is outboxd's commit→PubAck histogram on --metrics-addr.
const ackHistogram = "outboxd_commit_to_ack_seconds"

// bucket is one cumulative histogram bucket: count observations ≤ le.
type bucket struct {
	le    float64 // seconds; +Inf for the last
	count float64
}

// scrapeHistogram reads the buckets of name from a Prometheus text
// endpoint.
func scrapeHistogram(ctx context.Context, url, name string) ([]bucket, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return parseBuckets(bufio.NewScanner(resp.Body), name)
}

// parseBuckets reads lines like name_bucket{le="0.004"} 123.
func parseBuckets(s *bufio.Scanner, name string) ([]bucket, error) {
	prefix := name + `_bucket{le="`
	var bs []bucket
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), prefix)
		if !ok {
			continue
		}
		le, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			return nil, fmt.Errorf("%s: bad bucket line %q", name, s.Text())
		}
		b := bucket{le: math.Inf(1)}
		var err error
		if le != "+Inf" {
			if b.le, err = strconv.ParseFloat(le, 64); err != nil {
				return nil, fmt.Errorf("%s: bucket bound %q: %w", name, le, err)
			}
		}
		if b.count, err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return nil, fmt.Errorf("%s: bucket count %q: %w", name, value, err)
		}
		bs = append(bs, b)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return nil, fmt.Errorf("no %s_bucket lines in the metrics", name)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	return bs, nil
}

// upperBoundMS returns the upper bound, in milliseconds, of the bucket in
// which quantile q of the observations falls: the histogram can only say
// "at most this".
func upperBoundMS(bs []bucket, q float64) float64 {
	if len(bs) == 0 {
		return 0
	}
	total := bs[len(bs)-1].count
	for _, b := range bs {
		if b.count >= q*total {
			return b.le * 1000
		}
	}
	return math.Inf(1)
}
