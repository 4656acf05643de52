// Package keys derives the keys toolgate's MACs use from the approvals
// secret, one per purpose.
package keys

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
)

// Derive is the key for one purpose, named by label, from secret (HKDF
// with SHA-256): every replica derives the same one, and no MAC keyed for
// one purpose can stand for a MAC of another, whatever their inputs.
func Derive(secret []byte, label string) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, label, sha256.Size)
	if err != nil {
		panic(err) // only for a key length SHA-256 cannot give
	}
	return k
}

// OrOwn is keys, or, when there are none, one random key of its own: a
// seal made with it is believed by this process alone, which is all a
// single instance needs.
func OrOwn(keys [][]byte) [][]byte {
	if len(keys) > 0 {
		return keys
	}
	k := make([]byte, sha256.Size)
	_, _ = rand.Read(k)
	return [][]byte{k}
}
