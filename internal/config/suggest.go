package config

import (
	"strings"
)

// suggestKey returns the fix for the unknown key key inside mapping n at key
// path at: a near miss among n's keys ("did you mean pending.redis_url?"),
// else the one place the key exists elsewhere (a misplaced key), else the
// keys allowed there.
func suggestKey(n *node, at, key string) string {
	if best := closest(key, n.keys()); best != "" {
		return "did you mean " + joinKey(at, best) + "?"
	}
	var elsewhere []string
	for _, f := range allPaths() {
		if f.key == key && !strings.Contains(f.path, "[]") {
			elsewhere = append(elsewhere, f.path)
		}
	}
	if len(elsewhere) == 1 {
		return "did you mean " + elsewhere[0] + "?"
	}
	where := "at the top level"
	if at != "" {
		where = "under " + at
	}
	return "remove it; the keys allowed " + where + " are " + strings.Join(n.keys(), ", ")
}

// closest returns the candidate nearest to s by edit distance, or "" when
// none is near enough to be a plausible typo.
func closest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d <= maxTypo(s) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// maxTypo is how many edits still count as a typo of s: short words admit
// fewer, or "dir" would suggest "url".
func maxTypo(s string) int {
	switch {
	case len(s) <= 4:
		return 1
	case len(s) <= 10:
		return 2
	}
	return 3
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and swaps of two adjacent
// letters ("nmae" for "name") each cost one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
