package cache

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// encodeCache caches the outputs of runtime.CacheableObject's CacheEncode for one object, per
// encoder (runtime.Identifier), as the cachingObject of kube-apiserver's cacher does
// (k8s.io/apiserver/pkg/storage/cacher/caching_object.go): the apiserver's watch encoder
// caches a whole watch frame per event type this way, so an object sent to many watchers is
// encoded once per encoder. Objects (object versions and their views) and shared BOOKMARK
// objects (bookmark) use it. The zero value is ready to use.
type encodeCache struct {
	// m holds the map[runtime.Identifier]*serialization, replaced (copy on insert) under mu so
	// that lookups are lock-free.
	m  atomic.Pointer[map[runtime.Identifier]*serialization]
	mu sync.Mutex
}

// serialization is one cached encoder output.
type serialization struct {
	once sync.Once
	raw  []byte
	err  error
}

// encode writes the output of encode for id to w: the first call for id runs encode on what
// obj returns (obj is called then only) and caches the bytes or the error; every call writes
// the cached bytes (using runtime.Splice when w supports it, like the cacher) or returns the
// cached error.
func (c *encodeCache) encode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, obj func() runtime.Object, w io.Writer) error {
	s := c.serialization(id)
	s.once.Do(func() {
		var buf bytes.Buffer
		s.err = encode(obj(), &buf)
		s.raw = buf.Bytes()
	})
	if s.err != nil {
		return s.err
	}
	if sp, ok := w.(runtime.Splice); ok {
		sp.Splice(s.raw)
		return nil
	}
	_, err := w.Write(s.raw)
	return err
}

// serialization returns the cache slot for id, creating it if needed.
func (c *encodeCache) serialization(id runtime.Identifier) *serialization {
	if m := c.m.Load(); m != nil {
		if s, ok := (*m)[id]; ok {
			return s
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if s, ok := (*old)[id]; ok {
			return s
		}
	}
	n := make(map[runtime.Identifier]*serialization, 1)
	if old != nil {
		for k, v := range *old {
			n[k] = v
		}
	}
	s := &serialization{}
	n[id] = s
	c.m.Store(&n)
	return s
}
