// Package helm holds toolgate's Helm chart (toolgate/); its test renders the
// chart with the helm binary and checks the result against the Kubernetes API
// types and toolgate's own config loader.
package helm
