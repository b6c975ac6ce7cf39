package checkpoint

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Location kinds.
const (
	// KindKV stores the checkpoint in a NATS JetStream key-value bucket.
	KindKV = "kv"
	// KindFile stores the checkpoint in a local file.
	KindFile = "file"
)

// Location says where checkpoints are kept, as parsed by [ParseLocation].
type Location struct {
	// Kind is KindKV or KindFile.
	Kind string
	// Bucket is the KV bucket name when Kind is KindKV.
	Bucket string
	// Path is the file path when Kind is KindFile.
	Path string
}

// String returns the form ParseLocation accepts.
func (l Location) String() string {
	if l.Kind == KindFile {
		return KindFile + ":" + l.Path
	}
	return l.Kind + ":" + l.Bucket
}

const locationForms = `want "kv:BUCKET" (a NATS KV bucket; letters, digits, '_' and '-') or "file:PATH"`

// ParseLocation parses "kv:BUCKET" or "file:PATH". Bucket names may hold
// only ASCII letters, digits, '_' and '-' (what JetStream accepts). The error
// quotes the bad value and the accepted forms.
func ParseLocation(s string) (Location, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Location{}, fmt.Errorf("invalid checkpoint location %q: %s", s, locationForms)
	}
	switch kind {
	case KindKV:
		if !validBucket(rest) {
			return Location{}, fmt.Errorf("invalid checkpoint location %q: bucket %q is not a valid name: %s", s, rest, locationForms)
		}
		return Location{Kind: KindKV, Bucket: rest}, nil
	case KindFile:
		if rest == "" {
			return Location{}, fmt.Errorf("invalid checkpoint location %q: empty path: %s", s, locationForms)
		}
		return Location{Kind: KindFile, Path: filepath.Clean(rest)}, nil
	default:
		return Location{}, fmt.Errorf("invalid checkpoint location %q: unknown kind %q: %s", s, kind, locationForms)
	}
}

// validBucket mirrors JetStream's rule for KV bucket names, so a bad name is
// reported when the flag is parsed rather than on first connect.
func validBucket(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validKey mirrors JetStream's rule for KV keys.
func validKey(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '_' || c == '-' || c == '/' || c == '=' || c == '.') {
			return false
		}
	}
	return true
}
