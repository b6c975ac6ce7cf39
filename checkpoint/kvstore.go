package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// KVStore keeps the checkpoint under one key of a NATS JetStream key-value
// bucket, so it lives beside the stream it describes and follows outboxd
// from machine to machine.
type KVStore struct {
	kv     jetstream.KeyValue
	bucket string
	key    string
}

// NewKVStore binds to bucket, creating it when missing (file storage,
// history 1, one replica), and returns a store for key, which is normally
// the replication slot's name. Bucket names may hold ASCII letters, digits,
// '_' and '-'; keys may also hold '/', '=' and '.'. An existing bucket is
// used as it is.
func NewKVStore(ctx context.Context, js jetstream.JetStream, bucket, key string) (*KVStore, error) {
	if err := validKV(bucket, key); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: "outboxd checkpoints, one key per replication slot",
			History:     1,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			// Another outboxd created it between our lookup and create.
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint bucket %s: %w", bucket, err)
	}
	return &KVStore{kv: kv, bucket: bucket, key: key}, nil
}

// OpenKVStore is NewKVStore for readers such as `outboxd status`: it binds
// to an existing bucket and creates nothing. A missing bucket is an error
// matching ErrNotFound, since nothing can have been saved in it.
func OpenKVStore(ctx context.Context, js jetstream.JetStream, bucket, key string) (*KVStore, error) {
	if err := validKV(bucket, key); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open checkpoint bucket %s: bucket does not exist: %w", bucket, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint bucket %s: %w", bucket, err)
	}
	return &KVStore{kv: kv, bucket: bucket, key: key}, nil
}

func validKV(bucket, key string) error {
	if !validBucket(bucket) {
		return fmt.Errorf("open checkpoint bucket %q: invalid name: want letters, digits, '_' or '-'", bucket)
	}
	if !validKey(key) {
		return fmt.Errorf("open checkpoint bucket %s: invalid key %q: want letters, digits, '_', '-', '/', '=' or '.' (not at either end)", bucket, key)
	}
	return nil
}

// String returns "kv:BUCKET/KEY".
func (s *KVStore) String() string { return KindKV + ":" + s.bucket + "/" + s.key }

// DeleteCommand returns "nats kv del BUCKET KEY".
func (s *KVStore) DeleteCommand() string { return "nats kv del " + s.bucket + " " + s.key }

// Load reads the checkpoint. A missing (or deleted) key is ErrNotFound; a
// value that is not a valid checkpoint is a *CorruptError naming the bucket,
// key and revision.
func (s *KVStore) Load(ctx context.Context) (Checkpoint, error) {
	entry, err := s.kv.Get(ctx, s.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Checkpoint{}, fmt.Errorf("load checkpoint %s: %w", s, ErrNotFound)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("load checkpoint %s: %w", s, err)
	}
	return decodeStored(entry.Value(), fmt.Sprintf("%s revision %d", s, entry.Revision()), s.DeleteCommand())
}

// Save puts cp under the key. It returns once the JetStream server
// acknowledged the write; a context without a deadline gets the client's
// default API timeout.
func (s *KVStore) Save(ctx context.Context, cp Checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s, err)
	}
	if _, err := s.kv.Put(ctx, s.key, data); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", s, err)
	}
	return nil
}
