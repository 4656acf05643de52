// Package kubernetes holds toolgate's Kubernetes manifests; its test parses them.
package kubernetes
